"""What a string or number from a sweep file or the command line must look like before it reaches a
script, a ``#SBATCH`` line, an ssh option, a host list or a path: each check returns the reason it fails
(None when it passes), so every caller can name the key or flag in its own one-line error.
Framework-free."""

from __future__ import annotations

import math
import os
import re
import stat
import tomllib
from pathlib import Path
from typing import Any

CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# RFC 1123 host names, IPv4 and bracketed IPv6 addresses
HOST = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                  r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
                  r"|\[[0-9A-Fa-f:.]+\]|[0-9A-Fa-f:]+:[0-9A-Fa-f:.]*)$")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")       # results directories, job names
QUEUE_WORD = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:+@-]*$")     # partition, account, qos
GRES_TYPE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")         # a GPU type in gres (a100), no count
CONSTRAINT = re.compile(r"^[A-Za-z0-9_.,:&|!*()\[\]+-]+$")      # sbatch --constraint expressions
DIRECTIVE = re.compile(r"^--?[A-Za-z][A-Za-z0-9-]*(?:=[^\s'\"`$\\;&|<>]+)?$")
PATH = re.compile(r"^[A-Za-z0-9_./~+@%,=-]+$")                  # a path passed to ssh or horovodrun unquoted
MAX_TEXT = 4096


_UNSEEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # what a terminal acts on: escapes, carriage returns, C1


def visible(text: str) -> str:
    """Text made safe to print: every control character but newline and tab shown as its escape (\\x1b),
    so a value from a run's files cannot move the cursor, recolour or retitle the terminal."""
    return _UNSEEN.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


# what may never pass from a run's files or a user's into any output as it is: C0 and C1 controls (newline, carriage
# return, tab, escape), DEL, Unicode's line and paragraph separators, and its direction marks and overrides
_NOT_INERT = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def inert(text: object) -> str:
    """Text from a run's records or a user's file made inert for any output (terminal, Markdown, CSV, a
    protocol): one line, every control character shown as its escape (``\\n``, ``\\x1b``, ``\\u202e``), so a
    value can neither start a line of its own (a forged verdict) nor act on a terminal."""
    def escape(match: re.Match[str]) -> str:
        char = match.group()
        return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")

    return _NOT_INERT.sub(escape, str(text))


def spreadsheet_safe(cell: str) -> str:
    """A CSV cell a spreadsheet cannot run: one starting =, +, @, a tab or a carriage return, or a - that
    carries a call or a link ((, |, !), gets a leading apostrophe, which spreadsheets show as text."""
    if cell[:1] in ("=", "+", "@", "\t", "\r") or (cell[:1] == "-" and any(c in cell for c in "(|!")):
        return "'" + cell
    return cell


def text_problem(value: str) -> str | None:
    """Free text (a label, an argument): no control characters (a newline would end an #SBATCH line), bounded."""
    if CONTROL.search(value):
        return f"{value[:40]!r} holds a control character (newline, tab, NUL ...)"
    if len(value) > MAX_TEXT:
        return f"longer than {MAX_TEXT} characters"
    return None


def grammar_problem(value: str, pattern: re.Pattern[str], what: str) -> str | None:
    """A value of its own grammar (host name, SLURM word, path ...), or the reason it is not."""
    return text_problem(value) or (None if pattern.match(value) else f"{value[:60]!r} is not {what}")


def host_problem(value: str) -> str | None:
    return grammar_problem(value, HOST, "a host name or address")


def number_problem(value: Any, *, minimum: float | None = None, above: float | None = None,
                   integer: bool = False) -> str | None:
    """A finite number (an int where ``integer``), at least ``minimum`` or above ``above``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        return f"expected {'an integer' if integer else 'a number'}, got {value!r}"
    if not math.isfinite(value):
        return f"expected a finite number, got {value!r}"
    if minimum is not None and value < minimum:
        return f"must be at least {minimum:g}, got {value!r}"
    if above is not None and value <= above:
        return f"must be above {above:g}, got {value!r}"
    return None


def finite(text: str) -> float:
    """A command-line number that must be finite (``nan``, ``inf`` refused); ValueError otherwise."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {text!r}")
    return value


def regular_file(path: Path) -> None:
    """Only regular files are read: a FIFO would block the reader for ever, a device (/dev/zero) would fill
    its memory. A ValueError of one line naming the file otherwise (or where it cannot be looked at)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a folder" if stat.S_ISDIR(mode) else "a device or socket"
        raise ValueError(f"{path}: {kind}, not a regular file; left unread")


def read_small_text(path: Path, limit: int, what: str, *, strict: bool = True) -> str:
    """A small text file's content (at most ``limit`` bytes); a ValueError of one line naming the file when
    it is no regular file, cannot be read, is larger, holds NUL bytes (UTF-16, binary) or, where ``strict``,
    is not UTF-8."""
    regular_file(path)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read {what} ({exc.strerror})") from None
    if len(raw) > limit:
        raise ValueError(f"{path}: larger than {limit // 1024} KiB; too large for {what}")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in raw:
        raise ValueError(f"{path}: holds NUL bytes (saved as UTF-16, or binary?); save {what} as UTF-8 text")
    try:
        return raw.decode("utf-8", errors="strict" if strict else "replace")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None


MAX_TOML = 1 << 20  # criteria, peaks, targets, costs, weights: a few kB each


def read_toml(path: Path, what: str, limit: int = MAX_TOML) -> dict[str, Any]:
    """A small TOML file a user gives (criteria, a peak table, a target, costs), read only where it is a regular
    file of at most ``limit`` bytes of UTF-8 text (a FIFO would block, /dev/zero fill memory); a ValueError of
    one line naming the file otherwise, or where it is not TOML."""
    text = read_small_text(Path(path), limit, what)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:
        raise ValueError(f"{path}: nested deeper than any {what} is") from None


def read_toml_table(path: Path, what: str, key: str, shape: str) -> dict[str, Any]:
    """A TOML file (read_toml) holding one non-empty ``[key]`` table and nothing else; a ValueError of one line
    saying ``shape`` (what the table should look like) otherwise."""
    data = read_toml(path, what)
    table = data.get(key)
    if not isinstance(table, dict) or not table or set(data) - {key}:
        raise ValueError(f"{path}: expected {shape}")
    return table
