"""The flags every training benchmark shares, declared once as one frozen dataclass (:class:`TrainFlags`): each field
carries its flag, its check, its help and what the plan and the report need of it (a run-length flag, a flag a run's
1-GPU baseline leaves out, an option of ``--data files`` alone, the frameworks that have it). The benchmark's parser,
the run-length and baseline flag sets and the axes' flag arities are derived from it, and a run's flags are read
back into it typed. A framework names a few of them in its own terms (FRAMEWORK_FLAGS)."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from .exchanges import DEFAULT, EXCHANGES, own_options
from .flags import (
    ADAPTIVE_CHUNK,
    MAX_STEPS_FACTOR,
    Parser,
    finite_float,
    non_negative_float,
    non_negative_int,
    percent,
    positive_float,
    positive_int,
)
from .loaders import loader_help, loaders_of
from .pagecache import CACHE_MODES

PRECISIONS = ("fp32", "fp16", "bf16", "amp")
BOTH = ("pytorch", "tensorflow")


@dataclass(frozen=True)
class FrameworkFlags:
    """What a framework's benchmarks call differently in the shared flags."""

    framework: str
    precisions: tuple[str, ...]
    precision_help: str
    data_modes: tuple[str, ...]
    data_help: str
    loader_help: str
    threads_help: str
    breakdown_help: str
    profile_help: str

    @property
    def loaders(self) -> tuple[str, ...]:
        """What reads --data files (the first the default: core/loaders.py)."""
        return loaders_of(self.framework)


@dataclass(frozen=True)
class Context:
    """What a shared flag's choices, default and help may depend on: the framework and the benchmark's models."""

    own: FrameworkFlags
    models: tuple[str, ...]
    default_model: str


Given = Any  # a value, or a function of the Context giving it
_PCT = "%%"  # argparse formats help text: a percent sign is doubled


@dataclass(frozen=True)
class Flag:
    """One shared flag: its spelling, its argparse type (None: a string), its choices, whether it is a switch
    (``off``: a switch that turns its field off), and what the plan reads of it."""

    flag: str
    help: Given
    parse: Callable[[str], Any] | None = None
    choices: Given = None
    switch: bool = False
    off: bool = False
    metavar: str | None = None
    length: bool = False  # how long a run measures, not what it measures
    baseline: bool = False  # left out of a run's independent twin and 1-GPU baseline
    frameworks: tuple[str, ...] = BOTH
    default_of: Given = None  # a function of the Context where the field's own default depends on it
    required: bool = False  # the benchmark cannot run without it (a model option: --model-file)
    path: bool = False  # it names a file or folder: made absolute when a run is planned, what it holds hashed

    @property
    def arity(self) -> int:
        """How many values the flag takes."""
        return 0 if self.switch else 1


def flag(default: Any, spelled: str, help: Given, **more: Any) -> Any:
    """A declared field (TrainFlags', a model family's options'): its default and its flag's declaration."""
    return dataclasses.field(default=default, metadata={"flag": Flag(spelled, help, **more)})


def _given(value: Given, context: Context | None) -> Any:
    return value(context) if callable(value) else value


def _o(name: str) -> Callable[[Context], Any]:
    """A FrameworkFlags attribute as a flag's choices or help."""
    return lambda context: getattr(context.own, name)


@dataclass(frozen=True)
class TrainFlags:
    """Every shared flag of a training run, typed, at its default unless given (``model`` and ``loader``: the
    benchmark's and the framework's own defaults, which its parser fills; empty here)."""

    model: str = flag("", "--model", lambda c: f"architecture (default {c.default_model})",
                      choices=lambda c: c.models, default_of=lambda c: c.default_model)
    batch_size: int = flag(32, "--batch-size", "samples per step per rank", parse=positive_int)
    steps: int = flag(50, "--steps", "timed steps after warm-up", parse=positive_int, length=True)
    target_ci: float | None = flag(None, "--target-ci", f"adaptive length: after the --steps timed steps, run "
                                   f"chunks of {ADAPTIVE_CHUNK} until the 95{_PCT} interval of throughput is within "
                                   f"+-PCT{_PCT} (or --max-steps); rank 0 decides for all", parse=percent,
                                   metavar="PCT", length=True)
    max_steps: int | None = flag(None, "--max-steps", "with --target-ci: the most timed steps (default "
                                 f"{MAX_STEPS_FACTOR} x --steps)",
                                 parse=positive_int, length=True)
    warmup_steps: int = flag(5, "--warmup-steps", "untimed steps first (allocation, autotuning); recorded, marked "
                             "warm-up", parse=non_negative_int, length=True)
    device: str = flag("auto", "--device", "where to train: the GPU of this rank's local rank, or the CPU",
                       choices=("auto", "cpu", "cuda"))
    precision: str = flag("fp32", "--precision", _o("precision_help"), choices=_o("precisions"))
    data: str = flag("device", "--data", _o("data_help"), choices=_o("data_modes"))
    loader_workers: int = flag(2, "--loader-workers", _o("loader_help"), parse=non_negative_int)
    data_dir: str | None = flag(None, "--data-dir", "with --data files: the dataset's folder (hvdbench data make makes "
                                "one shaped like the real one)", metavar="DIR", path=True)
    data_layout: str | None = flag(None, "--data-layout", "with --data files: how the folder holds its samples "
                                   "(default: detected)", choices=("folder", "webdataset", "tfrecord"))
    data_only: bool = flag(False, "--data-only", "with --data files: time the input pipeline alone (read, decode, "
                           "augment, copy to the device), no model: what the loader can give a rank", switch=True)
    loader: str = flag("", "--loader", lambda c: loader_help(c.own.framework), choices=_o("loaders"),
                       default_of=lambda c: c.own.loaders[0])
    data_cache: str = flag(CACHE_MODES[0], "--data-cache", "with --data files: the dataset's pages in the page cache "
                           "before the run, as found (as-is), dropped (cold: a first pass from storage) or read once "
                           "beforehand (warm); the share resident at the start is recorded either way",
                           choices=CACHE_MODES)
    threads: int | None = flag(None, "--threads", _o("threads_help"), parse=positive_int)
    independent: bool = flag(False, "--independent", "no gradient exchange: each rank trains alone (the "
                             "ideal-scaling baseline)", switch=True, baseline=True)
    fp16_allreduce: bool = flag(False, "--fp16-allreduce", "exchange gradients in fp16: Horovod's compression, DDP's "
                                "fp16 hook, FSDP's fp16 reduce", switch=True)
    exchange: str = flag(DEFAULT, "--exchange", lambda c: "how gradients are exchanged: " + "; ".join(
        f"{k}: {v.doc} ({', '.join(v.frameworks)})" for k, v in EXCHANGES.items()),
        choices=lambda c: tuple(EXCHANGES))
    cudnn_autotune: bool = flag(True, "--no-cudnn-autotune", "on a GPU, take cuDNN's heuristic convolution algorithms "
                                "instead of timing them in the first steps and keeping the fastest (PyTorch's "
                                "cudnn.benchmark, TensorFlow's TF_CUDNN_USE_AUTOTUNE; on by default, as Horovod's and "
                                "tf_cnn_benchmarks' scripts)", switch=True, off=True)
    channels_last: bool = flag(False, "--channels-last", "NHWC memory format (CNNs only)", switch=True,
                               frameworks=("pytorch",))
    compile: bool = flag(False, "--compile", "torch.compile the model", switch=True, frameworks=("pytorch",))
    data_format: str | None = flag(None, "--data-format", "image layout of CNNs (default: channels_first on a GPU, "
                                   "channels_last on the CPU, whose convolutions take only NHWC)",
                                   choices=("channels_first", "channels_last"), frameworks=("tensorflow",))
    inter_op_threads: int | None = flag(None, "--inter-op-threads", "TensorFlow's inter-op pool (default: "
                                        "TensorFlow's choice)", parse=positive_int, frameworks=("tensorflow",))
    xla: bool = flag(False, "--xla", "jit_compile the forward and backward step (the gradient exchange stays "
                     "outside)", switch=True, frameworks=("tensorflow",))
    breakdown: bool = flag(False, "--breakdown", _o("breakdown_help"), switch=True)
    profile: int = flag(0, "--profile", _o("profile_help"), parse=non_negative_int, metavar="N")
    telemetry_interval: float = flag(1.0, "--telemetry-interval", "sample GPU (or process CPU/RSS) telemetry every "
                                     "SECONDS; 0 turns it off", parse=non_negative_float, metavar="SECONDS")
    lr: float = flag(0.01, "--lr", "learning rate of the SGD optimizer", parse=finite_float)
    seed: int = flag(1234, "--seed", "seed of the model and synthetic data", parse=int)
    log_dir: str | None = flag(None, "--log-dir", "directory for run.json and rank-<r>.jsonl (default: "
                               "hvdbench-logs/<name>-<time>)")
    echo_records: bool = flag(False, "--echo-records", "also print every record on stdout (one whole line per "
                              "record)", switch=True)

    @classmethod
    def read(cls, flags: Mapping[str, Any]) -> "TrainFlags":
        """A run's flags (as its parser gave them) typed; fields they lack at their defaults, others left out."""
        names = {item.name for item in dataclasses.fields(cls)}
        return cls(**{name: value for name, value in flags.items() if name in names})


def declared() -> dict[str, Flag]:
    """Every shared flag by its field's name, in declaration order."""
    return {item.name: item.metadata["flag"] for item in dataclasses.fields(TrainFlags)}


def flags_where(what: str) -> dict[str, int]:
    """The flags declared with ``what`` set (``length``, ``baseline``), each with how many values it takes."""
    return {f.flag: f.arity for f in declared().values() if getattr(f, what)}


def arities(*spelled: str) -> dict[str, int]:
    """How many values each of these shared flags takes (a flag not declared is refused by name)."""
    by_flag = {f.flag: f.arity for f in declared().values()}
    unknown = [s for s in spelled if s not in by_flag]
    if unknown:
        raise ValueError(f"not a shared flag (core/train_flags.py): {', '.join(unknown)}")
    return {s: by_flag[s] for s in spelled}


def path_flags(*declarations: type) -> tuple[str, ...]:
    """The flags of these declarations (TrainFlags, a model family's options) that name a file or folder."""
    return tuple(item.metadata["flag"].flag for cls in declarations for item in dataclasses.fields(cls)
                 if item.metadata["flag"].path)


def add_train_flags(parser: Parser, context: Context) -> None:
    """The shared flags the context's framework has, in declaration order, onto ``parser``."""
    add_declared(parser, TrainFlags, context)


def add_declared(parser: Any, cls: type, context: Context | None) -> None:
    """The flags a dataclass of ``flag()`` fields declares (those the context's framework has; None: a benchmark
    that does not train, every one), in declaration order, onto ``parser`` (or an argument group)."""
    for item in dataclasses.fields(cls):
        name, f = item.name, item.metadata["flag"]
        if context is not None and context.own.framework not in f.frameworks:
            continue
        default = _given(f.default_of, context) if f.default_of is not None else item.default
        text = _given(f.help, context)
        if f.switch:
            parser.add_argument(f.flag, dest=name, action="store_false" if f.off else "store_true", help=text)
            continue
        choices = _given(f.choices, context)
        parser.add_argument(f.flag, dest=name, type=f.parse, default=default, help=text, metavar=f.metavar,
                            **({"choices": list(choices)} if choices is not None else {}),
                            **({"required": True} if f.required else {}))


def declared_parser(cls: type) -> Parser:
    """The parser of a benchmark that does not train, from its one declaration: ``PROG``, ``ABOUT`` and its
    ``flag()`` fields (core/collective_ops.py's CommFlags)."""
    parser = Parser(prog=cls.PROG, description=cls.ABOUT)  # type: ignore[attr-defined]
    add_declared(parser, cls, None)
    return parser


def benchmark_parser(prog: str, models: Sequence[str], default_model: str, unit: str,
                     options: Sequence[type] = (), framework: str = "pytorch") -> Parser:
    """The shared flags, then the options that size this benchmark's model family (``options``: dataclasses of
    ``flag()`` fields, core/model_flags.py), then every exchange's own options; a flag two of them declare is refused
    by name, not with argparse's bare conflict."""
    _owned_once(prog, options)
    parser = Parser(prog=prog, description=f"Horovod training throughput benchmark ({unit}/s).")
    context = Context(FRAMEWORK_FLAGS[framework], tuple(models), default_model)
    add_train_flags(parser, context)
    if options:
        group = parser.add_argument_group(f"{prog} model options")
        for declaration in options:
            add_declared(group, declaration, context)
    _exchange_options(parser)
    return parser


def _owned_once(prog: str, options: Sequence[type]) -> None:
    """Every model option a flag of its own: one that repeats a shared flag, or that two of the benchmark's
    declarations both declare, is a ValueError naming it and its owners."""
    owners = {f.flag: "a shared flag (core/train_flags.py)" for f in declared().values()}
    for declaration in options:
        for item in dataclasses.fields(declaration):
            spelled = item.metadata["flag"].flag
            if spelled in owners:
                raise ValueError(f"{prog}'s model option {spelled} ({declaration.__name__}) is already "
                                 f"{owners[spelled]}: give it a name of its own")
            owners[spelled] = f"{declaration.__name__}'s (core/model_flags.py)"


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


_PRECISION = ("fp32; fp16 or bf16 weights and activations; amp: autocast (fp16 with a gradient scaler on "
              "CUDA, bf16 on CPU)")
FRAMEWORK_FLAGS = {
    "pytorch": FrameworkFlags(
        "pytorch", PRECISIONS, _PRECISION, ("device", "host", "loader", "files"),
        "synthetic batches resident on the device; made on the host and copied every step; served by "
        "a DataLoader with workers and pinned memory; or files: a dataset read from --data-dir (imagenet, speech, "
        "translation)",
        "DataLoader workers (synthetic batches, or files read and decoded)",
        "CPU threads per rank (default: the node's cores / ranks on the node)",
        "time forward, backward, gradient exchange and optimizer per step, each bounded by a device sync "
        "(perturbs the overlap of exchange and backward)",
        "profile N extra steps after the timed ones: the top operators by self time into the log, "
        "trace-rank<r>.json beside it"),
    "tensorflow": FrameworkFlags(
        "tensorflow", PRECISIONS + ("mixed_float16", "mixed_bfloat16"),
        _PRECISION + "; mixed_float16 / mixed_bfloat16: that Keras policy (amp picks mixed_float16 on a GPU, "
                     "mixed_bfloat16 on the CPU)", ("device", "host", "pipeline", "files"),
        "synthetic batches resident on the device; made on the host and copied every step; or served by "
        "a tf.data pipeline with prefetch to the device; or files: a dataset read from --data-dir by tf.data "
        "(tf_imagenet: ImageFolder or TFRecord shards)",
        "tf.data parallel calls (synthetic batches, or files)",
        "CPU threads per rank (default: the node's cores / ranks on the node) for TensorFlow's intra-op pool",
        "time compute (forward and backward together: one tape), gradient exchange and optimizer per step, each "
        "ended by reading its result back (the exchange then waits for the whole backward)",
        "profile N extra steps after the timed ones with TensorFlow's profiler: its trace directory "
        "tf-profile-rank<r> beside the log, for TensorBoard (no operator table in the log)"),
}
