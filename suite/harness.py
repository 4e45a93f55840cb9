"""The framework-neutral part of the harness: log directory, warm-up, the timed loop, records, summary.

A framework module (``suite/pytorch.py``) supplies a Runtime (rank facts, barrier, device sync,
object collectives) and a step; this module owns how the step is timed and recorded.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import resource
import statistics
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, Sequence

from .catalog import BenchmarkInfo, get_benchmark
from .records import RecordWriter, rank_log_name
from .spec import RUN_FILE, RunSpec

_LOCAL_FLAGS = {"--log-dir": 1, "--echo-records": 0}


@dataclass(frozen=True)
class Invocation:
    """A benchmark script's start: its catalog entry, arguments, checked flags and run label."""

    info: BenchmarkInfo
    argv: list[str]
    flags: argparse.Namespace
    label: str


def invocation(name: str, argv: Sequence[str] | None) -> Invocation:
    """Parse and check the command line (sys.argv by default); a bad one exits 2 with one line."""
    info = get_benchmark(name)
    args = list(sys.argv[1:] if argv is None else argv)
    flags = info.parse_or_exit(args)
    return Invocation(info, args, flags, f"{name}-{flags.model}")


class Runtime(Protocol):
    """What the timed loop needs from a framework and Horovod."""

    rank: int
    local_rank: int
    size: int
    local_size: int

    def barrier(self) -> None:
        """Wait until every rank arrives."""

    def sync(self) -> None:
        """Wait until the device has finished all work queued so far."""

    def allgather_object(self, obj: Any) -> list[Any]:
        """Every rank's obj, in rank order."""

    def broadcast_object(self, obj: Any) -> Any:
        """Rank 0's obj on every rank."""


def benchmark_args(argv: Sequence[str]) -> tuple[str, ...]:
    """The arguments that define the measurement: argv without where-to-log flags."""
    out: list[str] = []
    skip = 0
    for arg in argv:
        if skip:
            skip -= 1
            continue
        name = arg.split("=", 1)[0]
        if name in _LOCAL_FLAGS:
            skip = _LOCAL_FLAGS[name] if "=" not in arg else 0
            continue
        out.append(arg)
    return tuple(out)


def resolve_log_dir(runtime: Runtime, flags: argparse.Namespace, label: str) -> Path:
    """The run directory: --log-dir, or one new directory that rank 0 names for all ranks."""
    if flags.log_dir:
        return Path(flags.log_dir)
    name = f"{label}-{time.strftime('%Y%m%d-%H%M%S')}" if runtime.rank == 0 else None
    return Path("hvdbench-logs") / runtime.broadcast_object(name)


def ensure_run_file(runtime: Runtime, log_dir: Path, spec: RunSpec) -> None:
    """A standalone run describes itself: rank 0 writes run.json where no launcher did."""
    if runtime.rank == 0 and not (log_dir / RUN_FILE).exists():
        spec.write(log_dir)


def open_writer(runtime: Runtime, log_dir: Path, echo: bool) -> RecordWriter:
    """This rank's record file; an existing one is replaced (a rerun into the same directory)."""
    path = log_dir / rank_log_name(runtime.rank)
    log_dir.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    return RecordWriter(path, rank=runtime.rank, local_rank=runtime.local_rank, size=runtime.size,
                        echo=sys.stdout if echo else None)


@contextlib.contextmanager
def rank_logging(runtime: Runtime, *, benchmark: str, framework: str, controller: str,
                 flags: argparse.Namespace, argv: Sequence[str], label: str) -> Iterator[tuple[Path, RecordWriter]]:
    """The run directory, run.json and this rank's log, for any framework.

    Any failure inside becomes an error record and one line on stderr, and the process exits 1 at
    once: peers may wait in a collective that will never come, and the launcher ends them.
    """
    writer = None
    try:
        log_dir = resolve_log_dir(runtime, flags, label)
        hosts = len(set(runtime.allgather_object(os.uname().nodename)))
        ensure_run_file(runtime, log_dir, RunSpec(
            benchmark=benchmark, framework=framework, args=benchmark_args(argv), np=runtime.size,
            nodes=hosts if runtime.size % hosts == 0 else 1, launcher="external", controller=controller))
        writer = open_writer(runtime, log_dir, flags.echo_records)
        yield log_dir, writer
    except Exception as exc:
        message = error_line(exc)
        if writer is not None:
            writer.write("error", error=type(exc).__name__, message=message, traceback=traceback.format_exc(limit=8))
            writer.close()
        print(f"error: rank {runtime.rank}: {message}", file=sys.stderr, flush=True)
        os._exit(1)
    finally:
        if writer is not None:
            writer.close()


def error_line(exc: BaseException) -> str:
    """One line that names the problem: the exception's first line, or its last where the first is only
    a heading (TensorFlow's "in user code:")."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return lines[-1] if lines[0].endswith(":") and len(lines) > 1 else lines[0]


def peak_rss_bytes() -> int:
    """The process's peak resident set, in bytes."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


@dataclass
class StepOutcome:
    """What one step returns: its loss (read after the sync), the work it did, optional phase times."""

    loss: Any
    counts: dict[str, float]
    phases: dict[str, float] | None = None


def timed_loop(
    runtime: Runtime,
    writer: RecordWriter,
    step: Callable[[], StepOutcome],
    loss_value: Callable[[Any], float],
    *,
    warmup_steps: int,
    steps: int,
) -> dict[str, Any]:
    """Run warm-up then timed steps; record each step; return this rank's summary fields.

    ``counts["samples"]`` is the work in the benchmark's unit (images, words, tokens ...); other
    counts (audio seconds, sentences) are summed beside it. Every step ends with a device sync, so
    its duration is the device's work, not the dispatch. The timed window starts after a barrier
    and a sync and ends with a sync and a barrier.
    """
    losses: list[float] = []
    durations: list[float] = []
    totals: dict[str, float] = {}

    def one(index: int, warmup: bool) -> None:
        start = time.perf_counter()
        out = step()
        runtime.sync()
        duration = time.perf_counter() - start
        loss = loss_value(out.loss)
        losses.append(loss)
        if not warmup:
            durations.append(duration)
            for key, value in out.counts.items():
                totals[key] = totals.get(key, 0.0) + value
        extra = {"phases": out.phases} if out.phases is not None else {}
        writer.write("step", step=index, warmup=warmup, duration=duration, **out.counts, loss=loss, **extra)

    writer.write("phase", phase="warmup", steps=warmup_steps)
    for index in range(warmup_steps):
        one(index, True)
    runtime.barrier()
    runtime.sync()
    writer.write("phase", phase="timed", steps=steps)
    window_start = time.perf_counter()
    for index in range(warmup_steps, warmup_steps + steps):
        one(index, False)
    runtime.sync()
    window = time.perf_counter() - window_start
    runtime.barrier()
    samples = totals.pop("samples", 0.0)
    return {
        "steps": steps,
        "warmup_steps": warmup_steps,
        "samples": samples,
        "window_s": window,
        "step_time_sum_s": sum(durations),
        "median_step_s": statistics.median(durations),
        "throughput": samples / window,
        "totals": totals,
        "rates": {key: value / window for key, value in totals.items()},
        "final_loss": losses[-1],
        "loss_finite": all(math.isfinite(x) for x in losses),
    }


def summary_line(label: str, unit: str, per_rank: Sequence[dict[str, Any]]) -> str:
    """Rank 0's human summary: total throughput from every rank's own timing."""
    total = sum(s["throughput"] for s in per_rank)
    slowest = max(s["median_step_s"] for s in per_rank)
    return (f"hvdbench {label}: {len(per_rank)} rank(s), {total:,.1f} {unit}/s total "
            f"({total / len(per_rank):,.1f} per rank), slowest rank's median step {slowest * 1e3:.1f} ms")


class Sampler(Protocol):
    """A background sampler (telemetry) that runs while the steps are timed."""

    def start(self) -> Any: ...

    def stop(self) -> None: ...


def measure(runtime: Runtime, writer: RecordWriter, step: Callable[[], StepOutcome],
            loss_value: Callable[[Any], float], *, flags: argparse.Namespace, unit: str, label: str,
            sampler: Sampler, profile: Callable[[int], None], final: Callable[[], dict[str, Any]]) -> int:
    """Time the steps with the sampler running, profile if asked, write this rank's summary, and print
    the total on rank 0. ``final`` adds framework facts (peak memory, parameter checksum). Returns the
    exit status: 1 when a loss was not finite."""
    sampler.start()
    try:
        summary = timed_loop(runtime, writer, step, loss_value, warmup_steps=flags.warmup_steps, steps=flags.steps)
    finally:
        sampler.stop()
    if flags.profile:
        profile(flags.profile)
    summary.update(final())
    writer.write("summary", unit=unit, **summary)
    per_rank = runtime.allgather_object(summary)
    if runtime.rank == 0:
        print(summary_line(label, unit, per_rank), flush=True)
    return 0 if summary["loss_finite"] else 1
