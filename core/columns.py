"""A rank's step records as columns beside its log (``rank-N.jsonl.columns.arrow``, Arrow IPC), written by the
rank when it finishes, so that the report reads a cluster's millions of step records without parsing JSON.

The JSON lines stay the record: written as each step ends, crash-safe, read where no columns file exists. The
columns file is written only by a writer that started its log (nothing appended to another's), for logs of at
least COLUMNS_FROM step records whose every step field has its schema type (anything else is left to the JSON
reader, which counts and names it), and only where pyarrow imports. It carries the log's size, record count, last
step and a CRC-32 of every byte the writer wrote: a reader uses it only while the log is what the rank left (a line
changed in the middle, at the same size, sends it to the JSON), and never through a link. A CRC, not a cryptographic
digest: it tells a changed line, and whoever could forge it could as well rewrite the columns file itself; it is
read at several GB/s, so proving a cluster's logs costs the report a fraction of what parsing them would."""

from __future__ import annotations

import json
import math
import os
import zlib
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .schema import KINDS, SCHEMA_VERSION

COLUMNS_SUFFIX = ".columns.arrow"
COLUMNS_FROM = 256  # step records from which a log gets its columns file (below it, JSON costs nothing to speak of)
META_KEY = b"hvdbench"  # the schema metadata entry holding what the columns do not: see Kept.meta
PHASES = ("forward", "backward", "exchange", "optimizer", "compute")  # a step's phases (--breakdown)
SHOWN_PHASES = ("forward", "backward", "compute", "exchange", "optimizer")  # as tables and plots show them, in order
CHUNK = 16 << 20  # bytes of a log read at a time to prove it


def log_crc(path: Path) -> int:
    """The CRC-32 of a whole log, read a chunk at a time (the writer keeps the same over what it wrote)."""
    crc = 0
    with path.open("rb") as log:
        while chunk := log.read(CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


def columns_path(log: Path) -> Path:
    """The columns file beside rank log ``log``."""
    return log.with_name(log.name + COLUMNS_SUFFIX)


def _finite(value: Any) -> bool:
    """A JSON number as the typed reader takes it: an int or a float (no bool, no NumPy scalar), finite."""
    return type(value) is int or (type(value) is float and math.isfinite(value))


@dataclass
class Kept:
    """What one writer wrote to a fresh log, kept compactly for its columns file: the step fields as arrays
    (while every one has its schema type; after the first that does not, no columns file), every other record's
    line, and the log's record count, size and first and last monotonic times."""

    rank: int
    size: int
    step: array = field(default_factory=lambda: array("q"))
    duration: array = field(default_factory=lambda: array("d"))
    samples: array = field(default_factory=lambda: array("d"))
    loss: array = field(default_factory=lambda: array("d"))
    warmup: array = field(default_factory=lambda: array("b"))
    phases: dict[str, array] = field(default_factory=dict)
    others: list[str] = field(default_factory=list)
    typed: bool = True
    lines: int = 0
    bytes: int = 0
    first_mono: float | None = None
    last_mono: float | None = None
    crc: int = 0  # CRC-32 of every byte written

    def keep(self, record: dict[str, Any], line: str) -> None:
        """One record as it was written (``line``: its encoded form, newline included)."""
        self.lines += 1
        self.bytes += len(line)  # encode() writes ASCII (json.dumps escapes the rest): a character a byte
        self.crc = zlib.crc32(line.encode(), self.crc)
        if self.first_mono is None:
            self.first_mono = record.get("mono")
        self.last_mono = record.get("mono")
        if not self.typed:
            return
        if (record.get("hvdbench"), record.get("rank"), record.get("size")) != (SCHEMA_VERSION, self.rank, self.size) \
                or record.get("kind") not in KINDS:
            self._untyped()  # no writer of this schema wrote it: the JSON reader's checks and counts apply
        elif record["kind"] != "step":
            self.others.append(line.rstrip("\n"))
        else:
            self._step(record)

    def _step(self, rec: dict[str, Any]) -> None:
        phases, loss, warmup = rec.get("phases", {}), rec.get("loss"), rec.get("warmup")
        if not (type(rec.get("step")) is int and _finite(rec.get("duration")) and _finite(rec.get("samples"))
                and (loss is None or _finite(loss)) and type(warmup) in (bool, type(None)) and type(phases) is dict
                and set(phases) <= set(PHASES) and all(v is None or _finite(v) for v in phases.values())):
            self._untyped()
            return
        count = len(self.step)
        self.step.append(rec["step"])
        self.duration.append(rec["duration"])
        self.samples.append(rec["samples"])
        self.loss.append(math.nan if loss is None else loss)
        self.warmup.append(bool(warmup))
        for phase, value in phases.items():
            if value is not None:
                column = self.phases.setdefault(phase, array("d", [math.nan]) * count)
                column.extend([math.nan] * (count - len(column)))
                column.append(value)

    def _untyped(self) -> None:
        """No columns file for this log (the JSON reader's checks and counts apply): nothing more kept."""
        self.typed = False
        self.step, self.duration, self.samples, self.loss, self.warmup, self.phases, self.others = \
            array("q"), array("d"), array("d"), array("d"), array("b"), {}, []

    def meta(self) -> dict[str, Any]:
        return {"rank": self.rank, "size": self.size, "lines": self.lines, "bytes": self.bytes,
                "last_step": self.step[-1], "first_mono": self.first_mono, "last_mono": self.last_mono,
                "others": self.others, "version": SCHEMA_VERSION, "crc32": self.crc}


def write_columns(log: Path, kept: Kept) -> Path | None:
    """``log``'s columns file from what its writer kept, written whole or not at all; None where none is due
    (few steps, a field of another type, no pyarrow, the file system refused)."""
    if not kept.typed or len(kept.step) < COLUMNS_FROM:
        return None
    try:
        import pyarrow as pa
        import pyarrow.ipc as ipc
    except ImportError:
        return None
    import numpy as np

    count = len(kept.step)
    data = {"step": np.frombuffer(kept.step, dtype=np.int64), "duration": np.frombuffer(kept.duration),
            "samples": np.frombuffer(kept.samples), "loss": np.frombuffer(kept.loss),
            "warmup": np.frombuffer(kept.warmup, dtype=np.int8).astype(bool)}
    for phase in PHASES:
        if phase in kept.phases:
            column = kept.phases[phase]
            data[phase] = np.frombuffer(column + array("d", [math.nan]) * (count - len(column)))
    table = pa.table(data).replace_schema_metadata({META_KEY: json.dumps(kept.meta()).encode()})
    target = columns_path(log)
    part = target.with_name(target.name + ".part")
    try:
        with ipc.new_file(str(part), table.schema) as out:
            out.write_table(table)
        os.replace(part, target)
    except OSError:
        part.unlink(missing_ok=True)
        return None
    return target
