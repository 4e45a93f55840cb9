"""Reading rank logs for the report, the cost at cluster scale (10M step records).

A log of well-formed records, the usual case, is decoded in one pass as a typed array (msgspec: step
records straight into slotted structs, every other kind checked for its header and decoded again as a
plain record; a step field of the wrong type fails the pass). Anything else goes the careful way: every
record through ``records.records_of``, which finds records behind any prefix and counts what is malformed,
then step fields checked one record at a time. Both ways give the same columns and the same counts."""

from __future__ import annotations

import json
import math
import operator
import os
from dataclasses import dataclass, field
from itertools import compress, repeat
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Union

import msgspec
import numpy as np

from hvdbench.core.columns import META_KEY, PHASES, columns_path, log_crc
from hvdbench.core.records import ParseStats, decode_json, records_of
from hvdbench.core.schema import KINDS, MARKER, SCHEMA_VERSION, type_problem
from hvdbench.core.validate import regular_file

STEP_FIELDS = tuple(KINDS["step"].columns())  # step, warmup, duration, samples, loss
PARALLEL_FROM = 64
TAIL_BYTES = 65536  # where a log's last step record is looked for (its last records are a summary and a few others)
SHORT_TAIL_BYTES = 4096  # where it is looked for first
MIN_STEP_S = 1e-6  # no training step, however small, ends within a microsecond of its start and its device sync


@dataclass
class RankLog:
    """What one rank log holds, ready for the DataFrames: step columns and the few other records."""

    path: str
    steps: dict[str, Any]
    others: list[dict[str, Any]]
    malformed: int = 0
    examples: list[str] = field(default_factory=list)
    unreadable: str | None = None
    start: float | None = None  # the first record's monotonic time: telemetry is timed from it
    end: float | None = None    # the last record's
    ranks: set[tuple[int, int]] = field(default_factory=set)  # (rank, size) the records claim
    repeated: int = 0   # step records whose step index an earlier record of this log already had
    too_short: int = 0  # step records shorter than MIN_STEP_S: not a step that ran


# The typed pass: the header every record has, a step's fields with their schema types (None where the careful
# way reads an absent value the same), and the known phases; unknown fields are skipped, an unknown kind fails.
_HEADER: list[Any] = [("hvdbench", int), ("rank", int), ("size", int), ("mono", Any, None)]
_Phases = msgspec.defstruct("Phases", [(p, Optional[float], None) for p in PHASES], gc=False)
_Step = msgspec.defstruct("Step", [*_HEADER, ("step", int), ("duration", float), ("samples", float),
                                   ("loss", Optional[float], None), ("warmup", Optional[bool], None),
                                   ("phases", _Phases, msgspec.field(default_factory=_Phases))],
                           tag_field="kind", tag="step", gc=False, kw_only=True)
_Other = tuple(msgspec.defstruct(f"Header_{kind}", _HEADER, tag_field="kind", tag=kind, gc=False, kw_only=True)
               for kind in KINDS if kind != "step")
_typed_decoder = msgspec.json.Decoder(list[Union[(_Step, *_Other)]])  # type: ignore[valid-type]
_line_decoder = msgspec.json.Decoder(Union[(_Step, *_Other)])
_attr = {name: operator.attrgetter(name) for name in ("hvdbench", "rank", "size", "mono", "step", "duration",
                                                       "samples", "loss", "warmup", "phases", *PHASES)}
_NUMBERS = {int, float}
_MARKER = MARKER.encode()
_find_marker = operator.methodcaller("find", _MARKER)
_get = {name: operator.methodcaller("get", name) for name in ("hvdbench", "rank", "step", "duration", "samples",
                                                                 "loss", "warmup", "phases", *PHASES)}
_get_rank, _get_size, _get_kind = (operator.itemgetter(key) for key in ("rank", "size", "kind"))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass
class StepCheck:
    """Which step records to keep, and what the others say about the log: records that are not steps at all
    (malformed, counted in ParseStats), and steps that cannot be true (a repeated index, a step shorter
    than MIN_STEP_S), which make the run inconsistent."""

    keep: np.ndarray
    repeated: int = 0
    too_short: int = 0


def _steps_of(stats: ParseStats, step: np.ndarray, duration: np.ndarray, samples: np.ndarray,
              typed_ok: np.ndarray) -> StepCheck:
    """Keep the records with an integer step, a finite positive duration, finite samples >= 0 and a numeric
    (or absent) loss and a boolean (or absent) warm-up flag, the first of each step index; malformed ones
    counted with an example; repeated indices and impossibly short steps counted apart."""
    with np.errstate(invalid="ignore"):
        valid = (~np.isnan(step) & np.isfinite(duration) & (duration > 0) & np.isfinite(samples) & (samples >= 0)
                 & typed_ok)
        too_short = int((valid & (duration < MIN_STEP_S)).sum())
    bad = int((~valid).sum())
    keep = np.zeros(len(step), dtype=bool)
    if valid.all() and (len(step) < 2 or bool((np.diff(step) > 0).all())):  # as a rank writes them: each once
        keep[:] = True
    elif valid.any():
        positions = np.flatnonzero(valid)
        _, first = np.unique(step[positions], return_index=True)
        keep[positions[first]] = True
    if bad:
        stats.malformed += bad
        stats.examples.append(f"{bad} step record(s) without an integer step, a finite positive duration, "
                              "numeric samples and loss and a true/false warm-up flag")
    return StepCheck(keep, int(valid.sum() - keep.sum()), too_short)


def _others(records: list[dict[str, Any]], stats: ParseStats) -> list[dict[str, Any]]:
    """Records other than steps whose declared fields have their declared types (the rest counted)."""
    typed = []
    for rec in records:
        problem = type_problem(rec)
        if problem:
            stats.malformed += 1
            stats.examples.append(problem)
        else:
            typed.append(rec)
    return typed


def _floats(values: list[Any], types: set[type]) -> np.ndarray | None:
    """``values`` as floats (None as NaN) where each is of ``types``, else None. One C-level pass for the
    check and one for the conversion: per-record Python code is what costs at 10M records."""
    return np.array(values, dtype=float) if set(map(type, values)) <= types else None


def _careful_arrays(steps: list[dict[str, Any]]) -> tuple[np.ndarray, ...]:
    """step, duration, samples and whether the loss is numeric and the warm-up flag boolean (or absent), for
    every step record (NaN where a value is not of its type): vectorised where each field has its type
    throughout, one record at a time where not."""
    fields = {name: list(map(_get[name], steps)) for name in ("step", "duration", "samples", "loss", "warmup")}
    step = _floats(fields["step"], {int})
    duration = _floats(fields["duration"], _NUMBERS)
    samples = _floats(fields["samples"], _NUMBERS)
    if step is not None and duration is not None and samples is not None \
            and _floats(fields["loss"], _NUMBERS | {type(None)}) is not None \
            and set(map(type, fields["warmup"])) <= {bool, type(None)}:
        return step, duration, samples, np.ones(len(steps), dtype=bool)
    step = np.array([v if type(v) is int else np.nan for v in fields["step"]], dtype=float)
    duration = np.array([v if _number(v) else np.nan for v in fields["duration"]], dtype=float)
    samples = np.array([v if _number(v) else np.nan for v in fields["samples"]], dtype=float)
    typed_ok = np.array([(loss is None or type(loss) in _NUMBERS) and type(warm) in (bool, type(None))
                         for loss, warm in zip(fields["loss"], fields["warmup"])], dtype=bool)
    return step, duration, samples, typed_ok


def _phase_column(values: list[Any]) -> np.ndarray:
    typed = _floats(values, _NUMBERS | {type(None)})
    return typed if typed is not None else np.array([v if type(v) in _NUMBERS else np.nan for v in values],
                                                    dtype=float)


def _columns(good: list[Any], get: Mapping[str, Callable[[Any], Any]], step: np.ndarray, duration: np.ndarray,
             samples: np.ndarray, phases: list[Any]) -> dict[str, np.ndarray]:
    """The step columns of the kept records (``get``: each field's accessor), with a column for each phase
    (``--breakdown``) some record has (NaN where a record lacks it or holds a non-number)."""
    columns = {"rank": np.fromiter(map(get["rank"], good), dtype=np.int64, count=len(good)),
               "step": step.astype(np.int64),
               "warmup": np.fromiter(map(bool, map(get["warmup"], good)), dtype=bool, count=len(good)),
               "duration": duration, "samples": samples,
               "loss": np.array(list(map(get["loss"], good)), dtype=float)}
    for phase in PHASES:
        values = list(map(get[phase], phases))
        if values.count(None) != len(values):
            columns[phase] = _phase_column(values)
    return columns


def _record_count(data: bytes) -> int | None:
    """How many lines a log has where every line is one record from its first byte (as the harness writes
    them), found without splitting it; else None."""
    if not data.startswith(_MARKER):
        return None
    starts, newlines = data.count(b"\n" + _MARKER), data.count(b"\n")
    return starts + 1 if starts == newlines - data.endswith(b"\n") else None


def _lines_at(data: bytes, indices: list[int], count: int) -> list[bytes]:
    """Lines ``indices`` of a log of ``count`` lines: each walked to from the nearer end where that is cheaper
    than splitting the log (the few records that are not steps sit at its start and end)."""
    if sum(min(i, count - 1 - i) for i in indices) > count:
        lines = data.split(b"\n")
        return [lines[i] for i in indices]
    found = []
    for i in indices:
        if i <= count - 1 - i:
            start = 0
            for _ in range(i):
                start = data.index(b"\n", start) + 1
            stop = data.find(b"\n", start)
        else:
            stop = len(data) - data.endswith(b"\n")
            for _ in range(count - 1 - i):
                stop = data.rindex(b"\n", 0, stop)
            start = data.rfind(b"\n", 0, stop) + 1
        found.append(data[start:stop if stop >= 0 else len(data)])
    return found


def _prefixed_lines(data: bytes) -> tuple[list[bytes], int]:
    """The record lines of a log's bytes (from the marker on: a launcher may prefix them) and how many other
    non-blank lines it has."""
    lines = data.splitlines()
    payload = [line[start:] for line, start in zip(lines, map(_find_marker, lines)) if start >= 0]
    return payload, sum(1 for line in lines if line.strip()) - len(payload)


def _typed_items(data: bytes) -> tuple[list[Any], Callable[[list[int]], list[bytes]], int] | None:
    """The records of a log decoded in one typed pass, a way to the lines of some of them, and how many other
    non-blank lines it has; None where a record is malformed, of an unknown kind or of a wrong type."""
    count = _record_count(data)
    try:
        if count is not None:  # the usual case: decoded as it lies, no line split off
            items = _line_decoder.decode_lines(data)
            return (items, lambda at: _lines_at(data, at, count), 0) if len(items) == count else None
        payload, other = _prefixed_lines(data)
        items = _typed_decoder.decode(b"[" + b",".join(payload) + b"]")
    except (msgspec.DecodeError, RecursionError):  # malformed JSON or UTF-8, an unknown kind, a wrong type, depth
        return None
    return (items, lambda at: [payload[i] for i in at], other) if len(items) == len(payload) else None


def _typed_pass(path: Path, data: bytes, stats: ParseStats) -> RankLog | None:
    """A log of well-formed records of this schema version in one typed pass, else None."""
    typed = _typed_items(data)
    if typed is None:
        return None
    items, lines_at, other = typed
    if set(map(_attr["hvdbench"], items)) - {SCHEMA_VERSION}:
        return None
    stats.records += len(items)
    stats.other_lines += other
    is_step = list(map(operator.is_, map(type, items), repeat(_Step)))
    steps = list(compress(items, is_step))
    step, duration, samples = (np.fromiter(map(_attr[name], steps), dtype=float, count=len(steps))
                               for name in ("step", "duration", "samples"))
    check = _steps_of(stats, step, duration, samples, np.ones(len(steps), dtype=bool))
    keep = check.keep
    good = list(compress(steps, keep))
    phases = list(map(_attr["phases"], good)) if b'"phases"' in data else []
    columns = _columns(good, _attr, step[keep], duration[keep], samples[keep], phases)
    others = _others([decode_json(line) for line in lines_at(list(compress(range(len(items)),
                                                                              map(operator.not_, is_step))))], stats)
    ranks, sizes = set(map(_attr["rank"], items)), set(map(_attr["size"], items))
    return RankLog(str(path), columns, others, stats.malformed, stats.examples[:3],
                   ranks={(r, n) for r, n in zip(ranks, sizes)} if len(ranks) == len(sizes) == 1
                   else set(zip(map(_attr["rank"], items), map(_attr["size"], items))),
                   start=_mono(_attr["mono"](items[0]) if items else None),
                   end=_mono(_attr["mono"](items[-1]) if items else None),
                   repeated=check.repeated, too_short=check.too_short)


def _mono(value: Any) -> float | None:
    return value if _number(value) else None


def _numpy(column: Any) -> np.ndarray:
    """An Arrow column as NumPy, a view of its buffer where the type allows (booleans are unpacked)."""
    chunk = column.chunk(0) if hasattr(column, "chunk") else column
    return chunk.to_numpy(zero_copy_only=False)


def _tail_agrees(path: Path, meta: dict[str, Any]) -> bool:
    """Whether the log still holds what its writer left: its size, its last record's monotonic time and its last step
    record's index as the columns file says (its tail read, not the whole log: reading it all is the cost saved;
    a short tail first, the longer one where the last step record lies further back)."""
    with path.open("rb") as log:
        size = os.fstat(log.fileno()).st_size
        if size != meta["bytes"]:
            return False
        for reach in (SHORT_TAIL_BYTES, TAIL_BYTES):
            start = max(0, size - reach)
            log.seek(start)
            tail = log.read().splitlines()[1 if start else 0:]
            steps = (record for record in map(decode_json, reversed(tail)) if record.get("kind") == "step")
            last_step: dict[str, Any] = next(steps, {})
            if last_step or not start:
                break
    return bool(tail) and decode_json(tail[-1]).get("mono") == meta["last_mono"] \
        and last_step.get("step") == meta["last_step"]


COLUMNS_SLACK = 1 << 16  # a columns file's bytes beyond its log's (Arrow's framing): more is no columns file of it


def _same_bytes(path: Path, meta: dict[str, Any]) -> bool:
    """Whether the log is what its writer wrote, by the CRC-32 it kept (a columns file from before it: never)."""
    said = meta.get("crc32")
    return isinstance(said, int) and not isinstance(said, bool) and log_crc(path) == said


def _from_columns(path: Path) -> RankLog | None:
    """One rank log from the step columns its rank wrote beside it (core/columns.py) where they agree with the
    log, byte for byte; None where there are none, either is a link, or they do not agree (the JSON lines, which
    are the record, are read instead)."""
    side = columns_path(path)
    try:
        if side.is_symlink() or path.is_symlink():
            return None
        regular_file(side)
        regular_file(path)
        if side.stat().st_size > path.stat().st_size + COLUMNS_SLACK:  # columns are smaller than their JSON lines
            return None
        import pyarrow as pa
        import pyarrow.ipc as ipc

        # read whole, then viewed: NumPy's views keep the bytes alive (np.array on each Arrow column, or copies
        # off a memory map, cost five times as much at a cluster's thousands of logs)
        reader = ipc.open_file(pa.py_buffer(side.read_bytes()))
        table = reader.get_batch(0) if reader.num_record_batches == 1 else reader.read_all().combine_chunks()
        columns = {name: _numpy(table.column(i)) for i, name in enumerate(table.schema.names)}
        meta = json.loads(reader.schema.metadata[META_KEY])
        if meta.get("version") != SCHEMA_VERSION or not _tail_agrees(path, meta) or not _same_bytes(path, meta):
            return None
    except (OSError, ValueError, KeyError, IndexError, TypeError, AttributeError, ImportError, msgspec.DecodeError):
        return None  # pyarrow's ArrowInvalid (a truncated or foreign file) is a ValueError
    stats = ParseStats(records=meta["lines"])
    step = columns.pop("step").astype(float)
    check = _steps_of(stats, step, columns["duration"], columns["samples"], np.ones(len(step), dtype=bool))
    keep = check.keep
    steps = {"rank": np.full(int(keep.sum()), meta["rank"], dtype=np.int64), "step": step[keep].astype(np.int64),
             "warmup": columns["warmup"][keep], "duration": columns["duration"][keep],
             "samples": columns["samples"][keep], "loss": columns["loss"][keep],
             **{phase: columns[phase][keep] for phase in PHASES if phase in columns}}
    others = _others([decode_json(line) for line in meta["others"]], stats)
    return RankLog(str(path), steps, others, stats.malformed, stats.examples[:3], start=_mono(meta["first_mono"]),
                   end=_mono(meta["last_mono"]), ranks={(meta["rank"], meta["size"])}, repeated=check.repeated,
                   too_short=check.too_short)


def read_log(path: Path) -> RankLog:
    """One rank log: records of this schema version, step records as columns (first of each step index
    kept), anything malformed counted with examples; from the columns its rank wrote beside it where they agree
    with it."""
    columns = _from_columns(path)
    return columns if columns is not None else _read_json(path)


def _read_json(path: Path) -> RankLog:
    """read_log from the JSON lines."""
    stats = ParseStats()
    try:
        regular_file(path)
        data = path.read_bytes()
    except ValueError as exc:  # a FIFO or a device: never read
        return RankLog(str(path), {}, [], unreadable=str(exc).split(": ", 1)[-1])
    except OSError as exc:
        return RankLog(str(path), {}, [], unreadable=f"unreadable: {exc.strerror}")
    fast = _typed_pass(path, data, stats)
    if fast is not None:
        return fast
    records = records_of(data.decode("utf-8", errors="replace").splitlines(), stats)
    versions = set(map(_get["hvdbench"], records)) - {SCHEMA_VERSION}
    if versions:
        stats.malformed += sum(rec.get("hvdbench") != SCHEMA_VERSION for rec in records)
        stats.examples.insert(0, f"record schema version {sorted(map(str, versions))} "
                                 f"(this hvdbench reads version {SCHEMA_VERSION}); those records skipped")
        records = [rec for rec in records if rec.get("hvdbench") == SCHEMA_VERSION]
    is_step = list(map("step".__eq__, map(_get_kind, records)))
    steps = list(compress(records, is_step))
    step, duration, samples, typed_ok = _careful_arrays(steps)
    check = _steps_of(stats, step, duration, samples, typed_ok)
    keep = check.keep
    good = list(compress(steps, keep))
    phases = [p if type(p) is dict else {} for p in map(_get["phases"], good)]
    columns = _columns(good, _get, step[keep], duration[keep], samples[keep], phases)
    others = _others(list(compress(records, map(operator.not_, is_step))), stats)
    return RankLog(str(path), columns, others, stats.malformed, stats.examples[:3],
                   ranks=set(zip(map(_get_rank, records), map(_get_size, records))),
                   start=_mono(records[0].get("mono") if records else None),
                   end=_mono(records[-1].get("mono") if records else None),
                   repeated=check.repeated, too_short=check.too_short)


@dataclass(frozen=True)
class _Packed:
    """A step column that is one value throughout, or evenly spaced (a rank's step indices 0, 1, 2 ...), as
    its first value, spacing and length: what a reader process sends back instead of the array."""

    first: Any
    spacing: Any
    length: int
    dtype: str

    def unpacked(self) -> np.ndarray:
        if self.spacing == 0:
            return np.full(self.length, self.first, dtype=self.dtype)
        return (self.first + self.spacing * np.arange(self.length)).astype(self.dtype, copy=False)


def _packed(values: np.ndarray) -> np.ndarray | _Packed:
    """``values``, or a _Packed that unpacks to exactly them: integers evenly spaced, booleans one value,
    floats one bit pattern (a float spacing would not give back the same bits)."""
    if len(values) < 2 or values.dtype.kind not in "iubf":
        return values
    if values.dtype.kind == "i":
        spacing = int(values[1] - values[0])
        same = bool((np.diff(values) == spacing).all())
    else:
        spacing, bits = 0, values.view(np.uint8 if values.dtype.kind == "b" else f"u{values.dtype.itemsize}")
        same = bool((bits == bits[0]).all())
    return _Packed(values[0].item(), spacing, len(values), values.dtype.str) if same else values


def _read_packed(path: Path) -> RankLog:
    """read_log in a reader process: its constant and evenly spaced step columns packed for the way back
    (at 10M records, sending the arrays back cost a third of the reading)."""
    log = _read_json(path)
    log.steps = {name: _packed(values) for name, values in log.steps.items()}
    return log


def _unpacked(log: RankLog) -> RankLog:
    log.steps = {name: values.unpacked() if isinstance(values, _Packed) else values
                 for name, values in log.steps.items()}
    return log


def read_all(paths: list[Path]) -> list[RankLog]:
    """Every log; from PARALLEL_FROM logs on, in up to 8 worker processes (parsing JSON is the cost at
    cluster scale)."""
    found = [_from_columns(p) for p in paths]  # here: reading columns costs less than sending them back
    rest = [p for p, log in zip(paths, found) if log is None]
    if len(rest) < PARALLEL_FROM or (os.cpu_count() or 1) < 2:
        read = iter([_read_json(p) for p in rest])
    else:
        from concurrent.futures import ProcessPoolExecutor

        workers = min(os.cpu_count() or 2, 8)
        with ProcessPoolExecutor(workers) as pool:
            # small chunks: results come back while the workers read on, not in a few large lumps at the end
            read = iter([_unpacked(log) for log in pool.map(_read_packed, rest,
                                                             chunksize=max(1, min(32, len(rest) // (workers * 4))))])
    return [log if log is not None else next(read) for log in found]
