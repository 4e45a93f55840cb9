"""A published scaling table taken into a results root (``hvdbench import table FILE.csv``): each figure becomes a run
of the workload on its nodes and GPUs at its per-GPU batch, with its system's interconnect and exchange as the table
gives them, so a vendor's or a paper's table reads as a scaling table in ``report`` and is back-tested by ``project
--backtest`` like one's own runs. A figure is one number, not steps: its run holds one step of one second at the
published rate, marked so (its interval is none: a published figure says nothing of its spread). A table taken in
twice, or one figure twice, is refused in one line before anything is written."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from hvdbench.core.errors import UsageError
from hvdbench.core.records import RecordWriter
from hvdbench.core.spec import RunSpec, RunStatus
from hvdbench.readers.published_table import TablePoint, read_table
from .imported import free_repeat, taken_digests

LOG = "rank-0.jsonl"
SOURCE = "published"


@dataclass(frozen=True)
class Figure:
    """One published figure taken in: its run and the point it stands for."""

    spec: RunSpec
    point: TablePoint
    digest: str


def spec_of(point: TablePoint, repeat: int = 0) -> RunSpec:
    """The run a figure stands for (its exchange part of its arguments: figures of another exchange are another
    configuration)."""
    args = ("--from", "table", point.model, *(("--variable-update", point.exchange) if point.exchange else ()))
    return RunSpec(benchmark=SOURCE, framework=SOURCE, args=args, np=point.gpus, nodes=point.nodes,
                   launcher="external", controller="mpi", system=point.system, repeat=repeat)


def _digest(point: TablePoint) -> str:
    return hashlib.sha256(json.dumps([*point.key, point.throughput]).encode()).hexdigest()


def write_figure(root: Path, figure: Figure, table: Path) -> None:
    """The run folder, written aside and moved in whole: run.json, rank 0's record (env with the figure's system,
    one step at its rate, a summary), the other ranks' summaries, status ok."""
    spec, point = figure.spec, figure.point
    folder = root / f".importing-{spec.id}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    spec.write(folder)
    writer = RecordWriter(folder / LOG, rank=0, local_rank=0, size=spec.np)
    writer.write("env", benchmark=SOURCE, framework=SOURCE, model=point.model, unit="samples", run_id=spec.id,
                 host=None, time=None, flags={"batch_size": point.batch},
                 imported={"from": SOURCE, "file": table.name, "line": point.line, "system": point.system,
                           "content_sha256": figure.digest, "network": point.interconnect or None,
                           "exchange": point.exchange or None, "precision": point.precision or None,
                           "source": point.source or None, "nodes": point.nodes,
                           "accelerators_per_node": point.per_node, "batch_per_gpu": point.batch,
                           "parameter_servers": point.servers, "published_figure": True})
    writer.write("step", step=0, warmup=False, duration=1.0, samples=point.throughput, host=None, time=None)
    writer.write("summary", unit="samples", host=None, time=None)
    writer.close()
    for rank in range(1, spec.np):
        other = RecordWriter(folder / f"rank-{rank}.jsonl", rank=rank, local_rank=rank % max(1, spec.ranks_per_node),
                             size=spec.np)
        other.write("summary", unit="samples", host=None, time=None)
        other.close()
    RunStatus("ok", 0, 0.0, f"a published figure ({table.name} line {point.line}), taken in").write(folder)
    folder.rename(root / spec.id)


def import_tables(paths: Iterable[Path], root: Path) -> list[Figure]:
    """Every figure of each table as a run under ``root``; a UsageError in one line, before anything is written, for
    a bad table or a figure taken in already (here, or twice among ``paths``)."""
    seen = taken_digests(root) if root.exists() else set()
    planned: list[tuple[Figure, Path]] = []
    for path in paths:
        for point in read_table(path):
            digest = _digest(point)
            if digest in seen:
                raise UsageError(f"{path}:{point.line}: already taken into {root} or given twice (the same figure): "
                                 "one measurement, counted once")
            seen.add(digest)
            planned.append((Figure(spec_of(point), point, digest), path))
    done = []
    for figure, path in planned:
        figure = Figure(free_repeat(root, figure.spec), figure.point, figure.digest)
        write_figure(root, figure, path)
        done.append(figure)
    return done
