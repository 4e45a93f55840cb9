"""The one set of flags every benchmark shares; importable without any framework."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, NoReturn, Sequence

from .errors import UsageError
from .loaders import LOADERS, loaders_of
from .exchanges import DEFAULT, EXCHANGES, offered, own_options
from .pagecache import CACHE_MODES
from .validate import finite


ADAPTIVE_CHUNK = 10      # with --target-ci: steps between two judgements of the interval
MIN_ADAPTIVE_STEPS = 10  # the first chunk of an adaptive run
MAX_STEPS_FACTOR = 10    # --max-steps by default: this many times --steps



class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and a UsageError, not a usage dump, and which keeps every flag it
    and its groups declare (``declared``: option string -> its action); with ``default_command`` set, a command line
    naming none of its subcommands runs that one (``hvdbench history --since 30d`` lists)."""

    default_command: str | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.declared: dict[str, argparse.Action] = {}
        self.subcommands: dict[str, argparse.ArgumentParser] = {}
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see --help)")

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        return self.kept(super().add_argument(*args, **kwargs))

    def add_argument_group(self, *args: Any, **kwargs: Any) -> Any:
        return _Group(self, super().add_argument_group(*args, **kwargs))

    def add_subparsers(self, **kwargs: Any) -> Any:
        action = super().add_subparsers(**kwargs)
        self.subcommands = action.choices  # name -> its parser, as they are added
        return action

    def kept(self, action: argparse.Action) -> argparse.Action:
        """An action this parser or one of its groups added, kept under each of its option strings."""
        self.declared.update(dict.fromkeys(action.option_strings, action))
        return action

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        given = list(sys.argv[1:] if args is None else args)
        if self.default_command is not None and not set(given) & {*self.subcommands, "-h", "--help"}:
            given.insert(0, self.default_command)
        return super().parse_known_args(given, namespace)

    def given_only(self, args: Sequence[str]) -> dict[str, Any]:
        """The flags ``args`` give, typed, in the order given, with no default filled in (arguments it does not know
        left aside): the parse fills a default only where its namespace lacks the attribute, and this one lacks
        none."""
        return dict(vars(self.parse_known_args(list(args), _Given())[0]))


class _Given(argparse.Namespace):
    """A namespace that has every flag's attribute already (a missing one reads as None), so a parse sets only
    those the arguments give."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # argparse's own bookkeeping (its unrecognised arguments) is really absent
            raise AttributeError(name)
        return None


class _Group:
    """An argument group whose flags its parser keeps too (Parser.declared)."""

    def __init__(self, parser: Parser, group: Any) -> None:
        self._parser, self._group = parser, group

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        return self._parser.kept(self._group.add_argument(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._group, name)


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
