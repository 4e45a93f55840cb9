"""The rank-log record format: one JSON object per line, one file per rank, readable behind any prefix.

Every record starts with the key ``"hvdbench"`` (the schema version), so a parser finds it inside
lines captured by ``mpirun --tag-output`` (``[1,0]<stdout>:{...}``), SLURM or any other wrapper.
Which kinds exist and which fields each carries is declared once, in ``schema.py``.
"""

from __future__ import annotations

import json
import operator
import os
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import IO, Any, Iterable, Iterator

from msgspec.json import decode as decode_json  # a whole rank log 3x as fast as json (measured on 1M records)

from .columns import Kept, write_columns
from .schema import KINDS, MARKER, SCHEMA_VERSION, kind as schema_kind
from .validate import regular_file


@lru_cache(maxsize=1)
def _host() -> str:
    """This machine's name, asked once (every record carries it)."""
    return socket.gethostname()


RANK_LOGS = "rank-*.jsonl"  # every rank's log in a run directory (rank_log_name's pattern)


def rank_log_name(rank: int) -> str:
    """File name of one rank's log inside a run directory."""
    return f"rank-{rank}.jsonl"


def rank_of_log(path: Path) -> int | None:
    """The rank a log's file name says it is (None where the name is not a rank log's)."""
    number = path.name.removeprefix("rank-").removesuffix(".jsonl")
    return int(number) if path.name.startswith("rank-") and path.name.endswith(".jsonl") and number.isdigit() \
        else None


def make_record(kind: str, *, rank: int, local_rank: int, size: int, **fields: Any) -> dict[str, Any]:
    """Build one record: the common header, then the kind's own fields (ValueError for a kind or a
    field the schema does not declare)."""
    schema_kind(kind).check(fields)
    record: dict[str, Any] = {
        "hvdbench": SCHEMA_VERSION,
        "kind": kind,
        "rank": rank,
        "local_rank": local_rank,
        "size": size,
        "host": _host(),
        "time": time.time(),
        "mono": time.monotonic(),
    }
    record.update(fields)
    return record


def encode(record: dict[str, Any]) -> str:
    """One record as one line of text, newline included."""
    return json.dumps(record, separators=(",", ":"), allow_nan=True, default=str) + "\n"


class RecordWriter:
    """Appends records to one rank's file; each record is a single write, flushed at once."""

    def __init__(self, path: Path, *, rank: int, local_rank: int, size: int, echo: IO[str] | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8")
        self._header = {"rank": rank, "local_rank": local_rank, "size": size}
        self._echo = echo
        self._lock = threading.Lock()  # the telemetry thread writes too
        # a log this writer starts gets its step columns beside it at close (core/columns.py); one it appends to not
        self._kept = Kept(rank, size) if os.fstat(self._file.fileno()).st_size == 0 else None

    def write(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Write one record of the given kind and return it (ValueError once closed)."""
        record = make_record(kind, **self._header, **fields)
        line = encode(record)
        with self._lock:
            self._file.write(line)
            self._file.flush()
            if self._kept is not None:
                self._kept.keep(record, line)
            if self._echo is not None:
                self._echo.write(line)
                self._echo.flush()
        return record

    @property
    def closed(self) -> bool:
        """Whether the file is closed (the run is over)."""
        return self._file.closed

    def close(self) -> None:
        """Flush and close the file (and sync it to disk), then write its step columns beside it where due."""
        with self._lock:
            if not self._file.closed:
                self._file.flush()
                os.fsync(self._file.fileno())
                self._file.close()
                if self._kept is not None:
                    write_columns(self.path, self._kept)
                    self._kept = None

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class ParseStats:
    """What a parse saw: record lines read, and lines that looked like records but were not."""

    records: int = 0
    malformed: int = 0
    other_lines: int = 0
    examples: list[str] = field(default_factory=list)


_decoder = json.JSONDecoder()


def parse_line(line: str) -> dict[str, Any] | None:
    """The record inside one line, or None when the line holds none.

    Raises ValueError for a line that starts a record but does not hold a whole, valid one.
    """
    start = line.find(MARKER)
    if start < 0:
        return None
    try:
        record, _ = _decoder.raw_decode(line, start)
    except json.JSONDecodeError as exc:
        raise ValueError(f"truncated or malformed record: {exc.msg}") from None
    except RecursionError:
        raise ValueError("a record nested deeper than any hvdbench writes") from None
    if not isinstance(record, dict) or record.get("kind") not in KINDS:
        raise ValueError(f"record of unknown kind {record.get('kind')!r}")
    for key in ("rank", "size"):
        if not isinstance(record.get(key), int):
            raise ValueError(f"record without an integer {key!r}")
    return record


# Open MPI's --tag-output: each chunk of a rank's output is forwarded behind its rank's tag
_MPI_TAG = re.compile(r"\[\d+,\d+\]<std(?:out|err|diag)>:")


def rejoin_tagged(lines: Iterable[str]) -> Iterator[str]:
    """Lines as each rank wrote them. ``mpirun --tag-output`` forwards a rank's output in chunks (2,048
    bytes seen), each behind the rank's tag, so a long line (an env record) can be cut and interleaved
    with another rank's chunks: ``[1,1]<stdout>:A1[1,0]<stdout>:B1[1,1]<stdout>:A2``, then
    ``[1,0]<stdout>:B2``. Each tag's chunks are put back together; a line ends where a physical line
    does. Lines with at most one tag, at their start or not, pass unchanged."""
    pending: dict[str, str] = {}
    for line in lines:
        cuts = list(_MPI_TAG.finditer(line))
        if not cuts or cuts[0].start() != 0 or (len(cuts) == 1 and not pending):
            yield line
            continue
        for this, after in zip(cuts, [*cuts[1:], None]):
            text = line[this.end():after.start() if after else len(line)]
            if after is not None:
                pending[this.group()] = pending.get(this.group(), "") + text
            else:
                yield this.group() + pending.pop(this.group(), "") + text
    yield from (tag + text for tag, text in pending.items())  # a rank's last line without its end


def parse_lines(lines: Iterable[str], stats: ParseStats | None = None) -> Iterator[dict[str, Any]]:
    """Yield the records among lines (a rank's lines cut by ``mpirun --tag-output`` put back together);
    count malformed ones in ``stats`` instead of failing."""
    stats = stats if stats is not None else ParseStats()
    for number, line in enumerate(rejoin_tagged(lines), 1):
        try:
            record = parse_line(line)
        except ValueError as exc:
            stats.malformed += 1
            if len(stats.examples) < 3:
                stats.examples.append(f"line {number}: {exc}")
            continue
        if record is None:
            if line.strip():
                stats.other_lines += 1
            continue
        stats.records += 1
        yield record


def read_lines(path: Path) -> list[str]:
    """A log's lines; undecodable bytes are replaced (a torn write is a malformed line, not a failure). A
    path that is no regular file (a FIFO, /dev/zero) is an OSError naming it, never read."""
    try:
        regular_file(path)
    except ValueError as exc:
        raise OSError(str(exc)) from None
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read().splitlines()


def read_records(path: Path, stats: ParseStats | None = None) -> list[dict[str, Any]]:
    """Every record of one file; undecodable bytes are replaced, malformed lines counted."""
    return records_of(read_lines(path), stats)


def records_of(lines: list[str], stats: ParseStats | None = None) -> list[dict[str, Any]]:
    """Every record among a log's lines, malformed ones counted.

    A file of whole records (the usual case) is decoded as one JSON array, several times faster than
    line by line; any problem sends it through the line-by-line parser, which counts what was wrong."""
    stats = stats if stats is not None else ParseStats()
    payload = record_payload(lines)
    fast = _whole_records(payload)
    if fast is not None:
        stats.records += len(fast)
        stats.other_lines += other_lines(lines, payload)
        return fast
    return list(parse_lines(lines, stats))


def record_payload(lines: list[str]) -> list[str]:
    """Each line that holds a record marker, from the marker on (the prefix a launcher adds cut off)."""
    starts = list(map(_find_marker, lines))
    if starts.count(0) == len(lines):
        return lines  # JSON allows the whitespace a line may end with between array items
    return [line[start:] for line, start in zip(lines, starts) if start >= 0]


def other_lines(lines: list[str], payload: list[str]) -> int:
    """Non-blank lines without a record (launcher and framework output)."""
    return 0 if len(payload) == len(lines) else sum(1 for line in lines if line.strip()) - len(payload)


def _whole_records(payload: list[str]) -> list[dict[str, Any]] | None:
    """The records of the payload lines when each holds exactly one valid record, else None. Checked with
    C-level passes (``map``) over the whole file: per-record Python code is what costs at 10M records."""
    try:
        records = decode_json("[" + ",".join(payload) + "]")
    except (ValueError, RecursionError):  # msgspec's DecodeError is a ValueError; a line nested beyond reason
        return None
    if len(records) != len(payload) or set(map(type, records)) - {dict}:
        return None
    try:
        kinds = set(map(_get_kind, records))
        types = set(map(type, map(_get_rank, records))) | set(map(type, map(_get_size, records)))
    except (KeyError, TypeError):  # a record without the key, or an unhashable kind
        return None
    return records if kinds.issubset(KINDS) and types <= {int} else None


_find_marker = operator.methodcaller("find", MARKER)
_get_kind, _get_rank, _get_size = (operator.itemgetter(key) for key in ("kind", "rank", "size"))
