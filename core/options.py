"""Options declared once: a dataclass field made by :func:`option` carries its sweep-file key, its command-line flag,
its default, its check (a :class:`Kind`) and its help. The sweep reader (:func:`read_options`) and the command
line (:func:`add_flags`) are generated from those fields, so a key, a flag and a default cannot drift apart, and
a value is refused with the same words in a file and on the command line.

A :class:`Block` reads one mapping of a file: every complaint is one line naming the file and the key."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection, Mapping

from .errors import SpecError
from .validate import grammar_problem, number_problem, text_problem


class OptionError(SpecError):
    """A file's value or a flag's text that an option's check refuses (the key or flag is added by the caller)."""


class Kind:
    """How one option's values are checked: ``read`` takes a file's value (YAML or TOML typed; relative paths
    against ``base``), ``parse`` a flag's text. Both raise OptionError with the reason."""

    metavar: str | None = None

    def read(self, value: Any, base: Path) -> Any:
        return value

    def parse(self, text: str) -> Any:
        return self.read(text, Path.cwd())


class Text(Kind):
    """A non-empty string (numbers are taken as their text) without control characters."""

    def read(self, value: Any, base: Path) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)) or str(value) == "":
            raise OptionError(f"expected a non-empty string, got {value!r}")
        problem = text_problem(str(value))
        if problem:
            raise OptionError(problem)
        return str(value)


@dataclass(frozen=True)
class Grammar(Text):
    """A string of its own grammar (a host, a SLURM name, a path handed to ssh unquoted)."""

    pattern: re.Pattern[str]
    what: str

    def read(self, value: Any, base: Path) -> str:
        problem = grammar_problem(super().read(value, base), self.pattern, self.what)
        if problem:
            raise OptionError(problem)
        return str(value)


@dataclass(frozen=True)
class Whole(Kind):
    """An integer at least ``least`` (1: a positive integer; 0: a whole number) and at most ``most`` (with why)."""

    least: int = 1
    most: int | None = None
    beyond: str = ""  # why not more than ``most``

    def read(self, value: Any, base: Path) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < self.least:
            what = "a positive integer" if self.least == 1 else f"a whole number, {self.least} or more"
            raise OptionError(f"expected {what}, got {value!r}")
        if self.most is not None and value > self.most:
            raise OptionError(f"at most {self.most}{f' ({self.beyond})' if self.beyond else ''}, got {value!r}")
        return int(value)

    def parse(self, text: str) -> int:
        try:
            number: Any = int(text)
        except ValueError:
            number = text
        return self.read(number, Path.cwd())


@dataclass(frozen=True)
class Number(Kind):
    """A positive, finite number (of ``unit``), below 100 where ``percent``, at most ``most`` (``beyond`` says why,
    whole)."""

    unit: str = ""
    percent: bool = False
    most: float | None = None
    beyond: str = ""

    def read(self, value: Any, base: Path) -> float:
        return self._checked(value, value)

    def parse(self, text: str) -> float:
        try:
            number = float(text)
        except ValueError:
            number = None
        return self._checked(number, text)

    def _checked(self, value: Any, given: Any) -> float:
        """``value`` as a float; a refusal shows what was ``given`` (the file's value, the flag's text)."""
        if number_problem(value, above=0) or (self.percent and float(value) >= 100):
            what = "a percentage above 0 and below 100" if self.percent else \
                f"a positive, finite number{f' of {self.unit}' if self.unit else ''}"
            raise OptionError(f"expected {what}, got {given!r}")
        if self.most is not None and float(value) > self.most:
            raise OptionError(f"{given!r}: {self.beyond or f'more than {self.most:g}'}")
        return float(value)


class Switch(Kind):
    """true or false (on the command line: a flag that is present or not)."""

    def read(self, value: Any, base: Path) -> bool:
        if not isinstance(value, bool):
            raise OptionError(f"expected true or false, got {value!r}")
        return value


@dataclass(frozen=True)
class Choice(Kind):
    """One of a set of words: a tuple, or a registry's live view of its names (``RUNTIMES.keys()``), so that a member
    registered after the option was declared is one of them."""

    choices: Collection[str]

    def read(self, value: Any, base: Path) -> str:
        if value not in self.choices:
            raise OptionError(f"{value!r} is not one of {', '.join(self.choices)}")
        return str(value)


@dataclass(frozen=True)
class FilePath(Kind):
    """A path; relative in a file: to the file's folder (on the command line: to where it runs). ``plain``: it
    reaches a command line unquoted (ssh's identity file through horovodrun)."""

    plain: bool = False
    here: bool = False  # relative to where hvdbench runs, in a file too (an output folder)

    def read(self, value: Any, base: Path) -> Path:
        text = (_PLAIN if self.plain else Text()).read(value, base)
        path = Path(text).expanduser()
        return path if path.is_absolute() or self.here else base / path


_PLAIN = Grammar(re.compile(r"^[A-Za-z0-9_./~+@%,=-]+$"), "a plain path (letters, digits and ._/~+@%,=- only)")


class Argv(Kind):
    """Arguments: a list of strings, or one string split as a shell would."""

    def read(self, value: Any, base: Path) -> tuple[str, ...]:
        if isinstance(value, str):
            try:
                return tuple(shlex.split(value))
            except ValueError as exc:
                raise OptionError(f"cannot split {value!r} into arguments ({exc})") from None
        if isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
            return tuple(str(v) for v in value)
        raise OptionError(f"expected a list of arguments or one string, got {value!r}")


@dataclass(frozen=True)
class Check(Kind):
    """Another kind's value, then a check of its own (``check`` returns the reason it fails, or None)."""

    inner: Kind
    check: Callable[[Any], str | None]

    def read(self, value: Any, base: Path) -> Any:
        out = self.inner.read(value, base)
        problem = self.check(out)
        if problem:
            raise OptionError(problem)
        return out

    def parse(self, text: str) -> Any:
        out = self.inner.parse(text)
        problem = self.check(out)
        if problem:
            raise OptionError(problem)
        return out


@dataclass(frozen=True)
class Option:
    """One option: its key in its block of a sweep file (``block``: a mapping inside the class's own, such as
    axes:), its command-line flag (None: the file's alone), its default, its check, its help, and whether it is a
    list."""

    key: str
    kind: Kind
    default: Any
    help: str
    flag: str | None = None
    many: bool = False
    metavar: str | None = None
    block: str = ""


def option(default: Any, kind: Kind, help: str, *, key: str = "", flag: str | None = None, many: bool = False,
           metavar: str | None = None, block: str = "") -> Any:
    """A dataclass field declaring an option (``key``: the field's name where not given)."""
    return dataclasses.field(default=default, metadata={"option": Option(key, kind, default, help, flag, many,
                                                                         metavar, block)})


def options_of(cls: type, block: str | None = None) -> dict[str, Option]:
    """A dataclass's options by field name, each with its key filled in (``block``: those of that block only)."""
    out = {}
    for item in dataclasses.fields(cls):
        declared = item.metadata.get("option")
        if declared is not None and block in (None, declared.block):
            out[item.name] = dataclasses.replace(declared, key=declared.key or item.name)
    return out


def keys_of(cls: type, block: str = "") -> tuple[str, ...]:
    """The file keys of a dataclass's options in one block, in declaration order."""
    return tuple(o.key for o in options_of(cls, block).values())


class Block:
    """Typed access to one mapping of a file; every complaint names the file and the key."""

    def __init__(self, path: Path, data: Any, where: str, keys: tuple[str, ...], error: type[SpecError]) -> None:
        self.path, self.where, self.error = path, where, error
        if not isinstance(data, Mapping):
            self.fail(where or "the file", f"must be a mapping of keys, got {type(data).__name__}")
        unknown = sorted(str(k) for k in set(data) - set(keys))
        if unknown:
            hint = difflib.get_close_matches(unknown[0], keys, n=1)
            self.fail(self.key(unknown[0]), "unknown key" + (f" (did you mean {hint[0]!r}?)" if hint else "")
                      + f"; valid: {', '.join(keys)}")
        self.data: Mapping[Any, Any] = data

    def key(self, name: str) -> str:
        return f"{self.where}.{name}" if self.where else name

    def fail(self, key: str, message: str) -> None:
        raise self.error(f"{self.path}: {key}: {message}")

    def read(self, kind: Kind, value: Any, key: str) -> Any:
        """One value through its kind; its refusal names the key."""
        try:
            return kind.read(value, self.path.parent)
        except OptionError as exc:
            self.fail(key, str(exc))

    def get(self, name: str, kind: Kind, default: Any) -> Any:
        if name not in self.data or self.data[name] is None:
            return default
        return self.read(kind, self.data[name], self.key(name))

    def many(self, name: str, kind: Kind, default: tuple[Any, ...] = ()) -> tuple[Any, ...]:
        """A list, or a single value standing for a list of one."""
        if name not in self.data or self.data[name] is None:
            return default
        value = self.data[name]
        items = value if isinstance(value, list) else [value]
        if not items:
            self.fail(self.key(name), "must not be an empty list")
        keys = [f"{self.key(name)}[{i}]" for i in range(len(items))] if isinstance(value, list) else [self.key(name)]
        out = tuple(self.read(kind, item, key) for item, key in zip(items, keys))
        if len(set(map(repr, out))) != len(out):
            self.fail(self.key(name), f"repeats a value in {list(out)}")
        return out

    def options(self, cls: type, block: str = "", **defaults: Any) -> dict[str, Any]:
        """Every option of ``cls`` in ``block`` that this mapping holds, by field name (``defaults``: where the file
        gives none, in place of the declared default); an option declared without a default must be given."""
        out = {}
        for name, o in options_of(cls, block).items():
            default = defaults.get(name, o.default)
            if default is dataclasses.MISSING and self.data.get(o.key) is None:
                choices = f": one of {', '.join(o.kind.choices)}" if isinstance(o.kind, Choice) else ""
                self.fail(self.key(o.key), f"missing{choices}")
            out[name] = self.many(o.key, o.kind, default) if o.many else self.get(o.key, o.kind, default)
        return out


def flag_type(kind: Kind) -> Callable[[str], Any]:
    """argparse's type for a kind: its ``parse``, its refusal as argparse's one-line error."""
    def convert(text: str) -> Any:
        try:
            return kind.parse(text)
        except OptionError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return convert


def add_flags(group: Any, cls: type, names: tuple[str, ...], *, defaults: Mapping[str, Any] | None = None,
              note: str = "", prefix: str = "") -> None:
    """The command-line flags of ``cls``'s options named (by field name), from their declarations: flag, check,
    help, default (``defaults``: this command's own, e.g. None for "the file's"; ``note`` follows such a help);
    each lands in ``args.<prefix><name>``."""
    options = options_of(cls)
    for field_name in names:
        o, name = options[field_name], prefix + field_name
        if o.flag is None:
            raise ValueError(f"option {cls.__name__}.{field_name} has no command-line flag")
        default = (defaults or {}).get(field_name, o.default)
        default = None if default is dataclasses.MISSING else default
        shown = o.default is not None and o.default is not False and o.default != () and \
            o.default is not dataclasses.MISSING
        said = note if defaults and field_name in defaults and note else (f"default {o.default:g}" if isinstance(
            o.default, float) else f"default {o.default}" if shown else "")
        text = f"{o.help} ({said})" if said else o.help
        text = text.replace("%", "%%")
        if isinstance(o.kind, Switch):
            group.add_argument(o.flag, dest=name, action="store_true", help=text)
        elif o.many:
            group.add_argument(o.flag, dest=name, action="append", type=flag_type(o.kind), default=[],
                               metavar=o.metavar or o.kind.metavar, help=text)
        elif isinstance(o.kind, Choice):
            group.add_argument(o.flag, dest=name, choices=o.kind.choices, default=default, help=text)
        else:
            group.add_argument(o.flag, dest=name, type=flag_type(o.kind), default=default,
                               metavar=o.metavar or o.kind.metavar, help=text)
