"""The one set of flags every benchmark shares; importable without any framework."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Callable, NoReturn, Sequence

from .errors import UsageError
from .loaders import LOADERS, loader_help, loaders_of
from .exchanges import DEFAULT, EXCHANGES, offered, own_options
from .pagecache import CACHE_MODES
from .validate import finite


ADAPTIVE_CHUNK = 10      # with --target-ci: steps between two judgements of the interval
MIN_ADAPTIVE_STEPS = 10  # the first chunk of an adaptive run
MAX_STEPS_FACTOR = 10    # --max-steps by default: this many times --steps



class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and a UsageError, not a usage dump; with ``default_command`` set,
    a command line naming none of its subcommands runs that one (``hvdbench history --since 30d`` lists)."""

    default_command: str | None = None

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see --help)")

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        given = list(sys.argv[1:] if args is None else args)
        if self.default_command is not None and not set(given) & {*self._subcommands(), "-h", "--help"}:
            given.insert(0, self.default_command)
        return super().parse_known_args(given, namespace)

    def _subcommands(self) -> set[str]:
        return {name for action in self._actions if isinstance(action, argparse._SubParsersAction)
                for name in action.choices}


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text}")
    return value


def finite_float(text: str) -> float:
    """argparse type: a finite number (``nan`` and ``inf`` refused)."""
    try:
        return finite(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}") from None


def non_negative_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


def percent(text: str) -> float:
    """argparse type: a percentage above 0 and below 100."""
    value = finite_float(text)
    if not 0 < value < 100:
        raise argparse.ArgumentTypeError(f"must be a percentage above 0 and below 100, got {text}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (seconds of a timeout)."""
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


MOST_SECONDS = 366 * 86400.0  # a limit of more than a year is a typo, not a limit
MOST_EPOCHS = 1e6  # epochs a run to a target may train: more is a typo (and would overflow a step count)
MOST_BUSBW = 1e5  # GB/s: no link moves more


def bounded(most: float, unit: str, zero: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number above 0 (at least 0 where ``zero``), at most ``most`` ``unit``; beyond it
    one line saying so (``inf``, ``1e300`` are no limits)."""
    def parse(text: str) -> float:
        value = finite_float(text)
        if (value < 0 if zero else value <= 0) or value > most:
            raise argparse.ArgumentTypeError(f"must be {'at least 0' if zero else 'above 0'} and at most {most:,g} "
                                             f"{unit}, got {text}")
        return value
    parse.__name__ = f"number of {unit}"
    return parse


def byte_size(text: str) -> int:
    """argparse type: ``8``, ``64K``, ``1M``, ``1G`` (powers of 1024)."""
    units = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    number, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "")
    try:
        value = int(float(number) * units[unit])
    except (ValueError, OverflowError):  # not a number, or inf/nan
        raise argparse.ArgumentTypeError(f"expected a size such as 8, 64K, 1M, 1G; got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a size must be at least 1 byte, got {text!r}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


PRECISIONS = ("fp32", "fp16", "bf16", "amp")


@dataclass(frozen=True)
class FrameworkFlags:
    """What a framework's benchmarks add to, or call differently in, the shared flags."""

    precisions: tuple[str, ...]
    precision_help: str
    data_modes: tuple[str, ...]
    data_help: str
    loaders: tuple[str, ...]  # what reads --data files (the first the default: core/loaders.py)
    loader_help: str
    threads_help: str
    breakdown_help: str
    profile_help: str
    own: Callable[[Parser], None]  # layout, compiler and thread-pool flags in the framework's own terms
    framework: str = "pytorch"


def _pytorch_flags(parser: Parser) -> None:
    parser.add_argument("--channels-last", action="store_true", help="NHWC memory format (CNNs only)")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")


def _tensorflow_flags(parser: Parser) -> None:
    parser.add_argument("--data-format", choices=["channels_first", "channels_last"], default=None,
                        help="image layout of CNNs (default: channels_first on a GPU, channels_last "
                             "on the CPU, whose convolutions take only NHWC)")
    parser.add_argument("--inter-op-threads", type=positive_int, default=None,
                        help="TensorFlow's inter-op pool (default: TensorFlow's choice)")
    parser.add_argument("--xla", action="store_true",
                        help="jit_compile the forward and backward step (the gradient exchange stays outside)")


_PRECISION = ("fp32; fp16 or bf16 weights and activations; amp: autocast (fp16 with a gradient scaler on "
              "CUDA, bf16 on CPU)")
FRAMEWORK_FLAGS = {
    "pytorch": FrameworkFlags(
        PRECISIONS, _PRECISION, ("device", "host", "loader", "files"),
        "synthetic batches resident on the device; made on the host and copied every step; served by "
        "a DataLoader with workers and pinned memory; or files: a dataset read from --data-dir (imagenet, speech, "
        "translation)",
        loaders_of("pytorch"),
        "DataLoader workers (synthetic batches, or files read and decoded)",
        "CPU threads per rank (default: the node's cores / ranks on the node)",
        "time forward, backward, gradient exchange and optimizer per step, each bounded by a device sync "
        "(perturbs the overlap of exchange and backward)",
        "profile N extra steps after the timed ones: the top operators by self time into the log, "
        "trace-rank<r>.json beside it", _pytorch_flags, "pytorch"),
    "tensorflow": FrameworkFlags(
        PRECISIONS + ("mixed_float16", "mixed_bfloat16"),
        _PRECISION + "; mixed_float16 / mixed_bfloat16: that Keras policy (amp picks mixed_float16 on a GPU, "
                     "mixed_bfloat16 on the CPU)", ("device", "host", "pipeline", "files"),
        "synthetic batches resident on the device; made on the host and copied every step; or served by "
        "a tf.data pipeline with prefetch to the device; or files: a dataset read from --data-dir by tf.data "
        "(tf_imagenet: ImageFolder or TFRecord shards)", loaders_of("tensorflow"),
        "tf.data parallel calls (synthetic batches, or files)",
        "CPU threads per rank (default: the node's cores / ranks on the node) for TensorFlow's intra-op pool",
        "time compute (forward and backward together: one tape), gradient exchange and optimizer per step, each "
        "ended by reading its result back (the exchange then waits for the whole backward)",
        "profile N extra steps after the timed ones with TensorFlow's profiler: its trace directory "
        "tf-profile-rank<r> beside the log, for TensorBoard (no operator table in the log)", _tensorflow_flags,
        "tensorflow"),
}


def _data_flags(parser: Parser, own: FrameworkFlags) -> None:
    """Where batches come from: synthetic (on the device, the host, a loader) or a dataset read from files."""
    parser.add_argument("--data", choices=own.data_modes, default="device", help=own.data_help)
    parser.add_argument("--loader-workers", type=non_negative_int, default=2, help=own.loader_help)
    parser.add_argument("--data-dir", default=None, metavar="DIR",
                        help="with --data files: the dataset's folder (hvdbench data make makes one shaped like "
                             "the real one)")
    parser.add_argument("--data-layout", choices=["folder", "webdataset", "tfrecord"], default=None,
                        help="with --data files: how the folder holds its samples (default: detected)")
    parser.add_argument("--data-only", action="store_true",
                        help="with --data files: time the input pipeline alone (read, decode, augment, copy to the "
                             "device), no model: what the loader can give a rank")
    parser.add_argument("--loader", choices=own.loaders, default=own.loaders[0], help=loader_help(own.framework))
    parser.add_argument("--data-cache", choices=CACHE_MODES, default=CACHE_MODES[0],
                        help="with --data files: the dataset's pages in the page cache before the run, as found "
                             "(as-is), dropped (cold: a first pass from storage) or read once beforehand (warm); "
                             "the share resident at the start is recorded either way")


def benchmark_parser(prog: str, models: Sequence[str], default_model: str, unit: str,
                     extra: Callable[[Parser], None] | None = None, framework: str = "pytorch") -> Parser:
    """The shared benchmark flags; ``models`` are the architectures this benchmark offers and
    ``extra`` adds the options that size its model family. A framework names a few of them in its own
    terms (FRAMEWORK_FLAGS: TensorFlow's ``--data-format`` for ``--channels-last``, ``--xla`` for
    ``--compile``, a ``tf.data`` pipeline for the DataLoader, Keras mixed-precision policies)."""
    own = FRAMEWORK_FLAGS[framework]
    parser = Parser(prog=prog, description=f"Horovod training throughput benchmark ({unit}/s).")
    parser.add_argument("--model", choices=list(models), default=default_model,
                        help=f"architecture (default {default_model})")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="samples per step per rank")
    parser.add_argument("--steps", type=positive_int, default=50, help="timed steps after warm-up")
    parser.add_argument("--target-ci", type=percent, default=None, metavar="PCT",
                        help="adaptive length: after the --steps timed steps, run chunks of "
                             f"{ADAPTIVE_CHUNK} until the 95%% interval of throughput is within +-PCT%% "
                             "(or --max-steps); rank 0 decides for all")
    parser.add_argument("--max-steps", type=positive_int, default=None,
                        help=f"with --target-ci: the most timed steps (default {MAX_STEPS_FACTOR} x --steps)")
    parser.add_argument("--warmup-steps", type=non_negative_int, default=5,
                        help="untimed steps first (allocation, autotuning); recorded, marked warm-up")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="where to train: the GPU of this rank's local rank, or the CPU")
    parser.add_argument("--precision", choices=own.precisions, default="fp32", help=own.precision_help)
    _data_flags(parser, own)
    parser.add_argument("--threads", type=positive_int, default=None, help=own.threads_help)
    parser.add_argument("--independent", action="store_true",
                        help="no gradient exchange: each rank trains alone (the ideal-scaling baseline)")
    parser.add_argument("--fp16-allreduce", action="store_true",
                        help="exchange gradients in fp16: Horovod's compression, DDP's fp16 hook, FSDP's fp16 reduce")
    parser.add_argument("--exchange", choices=list(EXCHANGES), default=DEFAULT,
                        help="how gradients are exchanged: "
                             + "; ".join(f"{k}: {v.doc} ({', '.join(v.frameworks)})" for k, v in EXCHANGES.items()))
    parser.add_argument("--no-cudnn-autotune", dest="cudnn_autotune", action="store_false",
                        help="on a GPU, take cuDNN's heuristic convolution algorithms instead of timing them in "
                             "the first steps and keeping the fastest (PyTorch's cudnn.benchmark, TensorFlow's "
                             "TF_CUDNN_USE_AUTOTUNE; on by default, as Horovod's and tf_cnn_benchmarks' scripts)")
    own.own(parser)
    parser.add_argument("--breakdown", action="store_true", help=own.breakdown_help)
    parser.add_argument("--profile", type=non_negative_int, default=0, metavar="N", help=own.profile_help)
    parser.add_argument("--telemetry-interval", type=non_negative_float, default=1.0, metavar="SECONDS",
                        help="sample GPU (or process CPU/RSS) telemetry every SECONDS; 0 turns it off")
    parser.add_argument("--lr", type=finite_float, default=0.01, help="learning rate of the SGD optimizer")
    parser.add_argument("--seed", type=int, default=1234, help="seed of the model and synthetic data")
    parser.add_argument("--log-dir", default=None,
                        help="directory for run.json and rank-<r>.jsonl (default: hvdbench-logs/<name>-<time>)")
    parser.add_argument("--echo-records", action="store_true",
                        help="also print every record on stdout (one whole line per record)")
    if extra is not None:
        extra(parser.add_argument_group(f"{prog} model options"))  # type: ignore[arg-type]
    _exchange_options(parser)
    return parser


def _exchange_options(parser: Parser) -> None:
    """Every exchange's own options, added after every other flag: one that two exchanges declare, or that is
    already a flag of the benchmark's, is named here instead of argparse's bare conflict."""
    owners = own_options()
    for option in (option for kind in EXCHANGES.values() for option in kind.options):
        typed = positive_int if option.kind is int else positive_float
        try:
            parser.add_argument(option.flag, default=None, help=f"with --exchange {owners[option.dest]}: "
                                f"{option.help}", **({"choices": list(option.choices)} if option.choices else
                                                     {"type": typed}))
        except argparse.ArgumentError:
            raise ValueError(f"exchange {owners[option.dest]}'s option {option.flag} is already a flag of the "
                             "benchmark's: give it a name of its own (core/exchanges.py)") from None


def check_flags(flags: argparse.Namespace, *, cnn: bool, framework: str = "pytorch", reads: str | None = None) -> None:
    """Combinations no device can run, caught before any rank starts: a UsageError naming them."""
    if getattr(flags, "channels_last", False) and not cnn:
        raise UsageError(f"--channels-last applies to CNNs; model {flags.model} is not one")
    if getattr(flags, "data_format", None) and not cnn:
        raise UsageError(f"--data-format applies to CNNs; model {flags.model} is not one")
    check_device(flags, on_gpu={"cpu": False, "cuda": True}.get(flags.device))
    check_adaptive(flags)
    check_exchange(flags, framework)
    check_data(flags, reads)


def check_data(flags: argparse.Namespace, reads: str | None) -> None:
    """--data files with its folder, on a workload that reads one; its options only with it."""
    files = getattr(flags, "data", None) == "files"
    if files and reads is None:
        raise UsageError("--data files: this workload reads no dataset (imagenet, speech and translation do)")
    if files and not getattr(flags, "data_dir", None):
        raise UsageError("--data files needs --data-dir DIR (hvdbench data make makes one)")
    for option in ("data_dir", "data_layout", "data_only"):
        if getattr(flags, option, None) and not files:
            raise UsageError(f"--{option.replace('_', '-')} applies with --data files")
    if getattr(flags, "data_cache", CACHE_MODES[0]) != CACHE_MODES[0] and not files:
        raise UsageError(f"--data-cache {flags.data_cache} applies with --data files")
    loader = LOADERS.get(getattr(flags, "loader", None) or "")
    if loader is not None and loader.name != loaders_of(loader.framework)[0]:  # the default serves every run
        problem = loader.problem(reads, files)
        if problem:
            raise UsageError(problem)


def check_exchange(flags: argparse.Namespace, framework: str) -> None:
    """--exchange with the framework, --independent, the flags it refuses and its own options (core/exchanges.py);
    sets their defaults."""
    name = getattr(flags, "exchange", DEFAULT)
    mine = offered(framework) or (DEFAULT,)
    if name not in mine:
        raise UsageError(f"--exchange {name} does not apply to {framework} workloads; theirs: {', '.join(mine)}")
    kind = EXCHANGES[name]
    for option, why in kind.refuses:
        if getattr(flags, option, False):
            raise UsageError(f"--{option.replace('_', '-')} with --exchange {name}: {why}")
    if flags.independent and name != DEFAULT:
        raise UsageError(f"--independent trains each rank alone: --exchange {name} would have nothing to exchange")
    for option, owner in own_options().items():
        if getattr(flags, option, None) is not None and owner != name:
            raise UsageError(f"--{option.replace('_', '-')} applies with --exchange {owner}, not {name}")
    for own in kind.options:
        if getattr(flags, own.dest, None) is None:
            setattr(flags, own.dest, own.default)


def check_device(flags: argparse.Namespace, on_gpu: bool | None) -> None:
    """What the device a run trains on cannot do, refused in one line: at parse time where --device names it
    (``on_gpu`` None: --device auto, not known yet), by each framework's backend once the device is pinned."""
    if on_gpu is False and flags.precision == "fp16":
        raise UsageError("--precision fp16 needs a CUDA device; on the CPU use bf16 or amp")
    if on_gpu is False and getattr(flags, "data_format", None) == "channels_first":
        raise UsageError("--data-format channels_first: TensorFlow's CPU convolutions take only channels_last")


def check_adaptive(flags: argparse.Namespace) -> None:
    """--target-ci and --max-steps: the minimum is --steps, at least MIN_ADAPTIVE_STEPS; sets the default
    --max-steps."""
    if flags.target_ci is None:
        if flags.max_steps is not None:
            raise UsageError("--max-steps applies with --target-ci (a fixed-length run takes --steps)")
        return
    if flags.steps < MIN_ADAPTIVE_STEPS:
        raise UsageError(f"--target-ci needs --steps >= {MIN_ADAPTIVE_STEPS} (the first chunk, before any "
                         f"interval is judged), got {flags.steps}")
    if flags.max_steps is None:
        flags.max_steps = MAX_STEPS_FACTOR * flags.steps
    elif flags.max_steps < flags.steps:
        raise UsageError(f"--max-steps {flags.max_steps} is below the minimum: an adaptive run times at least "
                         f"--steps ({flags.steps}) steps")


def int_list(what: str, minimum: int = 1) -> Callable[[str], list[int]]:
    """argparse type factory: ``4096,4096`` as integers >= minimum, in the order given."""
    def parse(text: str) -> list[int]:
        try:
            values = [int(part) for part in text.split(",")]  # an empty item ("1,,2") is a typo, not nothing
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}, got {text!r}") from None
        if not values or min(values) < minimum:
            kind = "positive" if minimum == 1 else f">= {minimum}" if minimum > 1 else "non-negative"
            raise argparse.ArgumentTypeError(f"{what} must be {kind} integers, got {text!r}")
        return values

    return parse


def parse_or_exit(parse: Callable[[], argparse.Namespace]) -> argparse.Namespace:
    """Run a parse; a usage error is printed as one line and the process exits with status 2."""
    try:
        return parse()
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
