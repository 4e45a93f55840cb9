"""A run's flags as its benchmark's own parser reads them, parsed once per set of arguments: typed (8, not "8.0"
or "8"), however spelled (``--data files``, ``--data=files``, an abbreviation), defaults filled or only what was
given. The plan, the scheduler's job, the axes and the report's pairings read these fields, never argument
strings."""

from __future__ import annotations

from functools import lru_cache
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from .catalog import BENCHMARKS
from .errors import HvdbenchError
from .train_flags import TrainFlags, flags_where

Flags = Mapping[str, Any]
_EMPTY: Flags = MappingProxyType({})


@lru_cache(maxsize=8192)
def _parsed(benchmark: str, args: tuple[str, ...], given_only: bool) -> Flags | None:
    """The benchmark's parse of ``args`` (with ``given_only`` its defaults left out), None where the benchmark is
    not in the catalog (an imported tool's run) or its parser refuses the arguments."""
    info = BENCHMARKS.get(benchmark)
    if info is None:
        return None
    parser = info.parser()
    try:
        flags = parser.given_only(args) if given_only else vars(parser.parse_known_args(list(args))[0])
    except (HvdbenchError, SystemExit):
        return None
    return MappingProxyType(flags)


@lru_cache(maxsize=8192)
def _spelled(benchmark: str, args: tuple[str, ...]) -> tuple[str, ...]:
    info = BENCHMARKS.get(benchmark)
    if info is None:
        return args
    options = info.parser().declared
    out: list[str] = []
    for arg in args:
        name, eq, value = arg.partition("=")
        if not arg.startswith("--") or arg == "--":
            out.append(arg)
            continue
        known = [name] if name in options else [o for o in options if o.startswith(name) and o.startswith("--")]
        actions = {id(options[o]): options[o] for o in known}
        if len(actions) != 1:  # unknown, or an abbreviation of several: as written (the parser refuses it anyway)
            out.append(arg)
            continue
        action = next(iter(actions.values()))
        full = action.option_strings[-1]
        out += [full, value] if eq and action.nargs != 0 else [full + eq + value]
    return tuple(out)


def spelled(benchmark: str, args: Sequence[str]) -> tuple[str, ...]:
    """The arguments as its benchmark's parser reads them, one spelling a flag: ``--data=files`` and ``--data files``
    alike ``--data files``, an abbreviation its whole name; in their order (a flag the parser does not know, or
    arguments of a benchmark not in the catalog, as written). Runs of the same flags so spelled are one
    configuration in the report."""
    return _spelled(benchmark, tuple(map(str, args)))


def run_flags(benchmark: str, args: Sequence[str]) -> Flags:
    """Every flag of the run, its benchmark's defaults filled; empty where its parser cannot read the arguments."""
    return _parsed(benchmark, tuple(map(str, args)), False) or _EMPTY


def train_flags(benchmark: str, args: Sequence[str]) -> TrainFlags | None:
    """A training run's shared flags, typed (core/train_flags.py); None where its benchmark does not train or its
    parser cannot read the arguments."""
    return _typed(benchmark, tuple(map(str, args)))


@lru_cache(maxsize=8192)
def _typed(benchmark: str, args: tuple[str, ...]) -> TrainFlags | None:
    info = BENCHMARKS.get(benchmark)
    flags = _parsed(benchmark, args, False) if info is not None and info.trains else None
    return TrainFlags.read(flags) if flags else None


def given_flags(benchmark: str, args: Sequence[str]) -> Flags | None:
    """The flags ``args`` give, typed (defaults left out); None where the benchmark's parser cannot read them."""
    return _parsed(benchmark, tuple(map(str, args)), True)


def flags_key(benchmark: str, args: Sequence[str], leave_out: Mapping[str, int] | None = None) -> str:
    """What the run's given flags are, less those in ``leave_out`` (flag -> how many values it takes) and those given
    at their default's value, as one text in which two spellings of the same flags and values agree; for arguments no
    parser here reads, the arguments themselves less those flags in either spelling."""
    dropped = dict(leave_out or {})
    given = given_flags(benchmark, args)
    if given is None:
        return " ".join(without(args, dropped))
    fields = {flag.lstrip("-").replace("-", "_") for flag in dropped}
    defaults = run_flags(benchmark, ())
    return " ".join(f"{name}={given[name]!r}" for name in sorted(given)
                    if name not in fields and not (name in defaults and _same(defaults[name], given[name])))


def _same(default: Any, value: Any) -> bool:
    """A flag given at its default's value (0.01 and 1e-2 alike; a bool and a number never alike)."""
    return type(default) is type(value) and default == value


RUN_LENGTH = flags_where("length")  # how long, not what, a run measures (core/train_flags.py declares which)


def configuration(benchmark: str, args: Sequence[str]) -> str:
    """A run's arguments as the one key of its configuration: every flag given, typed, at a value other than its
    default, in one fixed order (``--lr 0.01``, ``--lr=1e-2`` and no --lr where 0.01 is the default agree; so do
    ``--model=x`` first or last); the arguments as written where no parser here reads them."""
    return flags_key(benchmark, args)


def measured(benchmark: str, args: Sequence[str]) -> str:
    """The configuration key without the flags that set how long a run measures (RUN_LENGTH): runs that differ only
    in those are the same measurement."""
    return flags_key(benchmark, args, RUN_LENGTH)


def flag_value(args: Sequence[str], flag: str, arity: int) -> Any:
    """What arguments no benchmark parser here reads give a flag (``--flag V`` or ``--flag=V``, the last one given;
    ``arity`` 0: whether it is there); None where they do not give it."""
    if arity == 0:
        return flag in args
    values = [arg.split("=", 1)[1] if "=" in arg else (args[i + 1] if i + 1 < len(args) else None)
              for i, arg in enumerate(map(str, args)) if arg.split("=", 1)[0] == flag]
    return values[-1] if values else None


def without(args: Sequence[str], flags: Mapping[str, int]) -> tuple[str, ...]:
    """Arguments without the given flags (``--flag V`` and ``--flag=V`` forms; ``flags``: how many values each
    takes): for a launcher's own arguments and for those no benchmark parser here reads."""
    out: list[str] = []
    skip = 0
    for arg in map(str, args):
        if skip:
            skip -= 1
            continue
        name = arg.split("=", 1)[0]
        if name in flags:
            skip = flags[name] if "=" not in arg else 0
            continue
        out.append(arg)
    return tuple(out)
