"""The timed loop: warm-up, timed steps each bounded by a device sync, the window bounded by a barrier
and a sync at both ends, a record per step, and this rank's summary. Framework-neutral: a framework
supplies a Runtime (rank facts, barrier, sync, object collectives) and a step."""

from __future__ import annotations

import argparse
import math
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

from hvdbench.core.flags import ADAPTIVE_CHUNK
from hvdbench.core.metrics import rank_throughput, total_throughput
from hvdbench.core.records import RecordWriter
from .adaptive import Stopper


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


class HorovodObjects:
    """Object collectives through a framework's Horovod, named alike on every rank. Horovod names an
    unnamed one after the object's type, which differs where only rank 0 holds a value (rank 0 a str,
    the others None): the ranks then wait on two different collectives forever."""

    hvd: Any
    _collectives: int = 0

    def _name(self, op: str) -> str:
        self._collectives += 1
        return f"hvdbench.{op}.{self._collectives}"

    def allgather_object(self, obj: Any) -> list[Any]:
        return self.hvd.allgather_object(obj, name=self._name("allgather"))

    def broadcast_object(self, obj: Any) -> Any:
        return self.hvd.broadcast_object(obj, root_rank=0, name=self._name("broadcast"))


@dataclass
class StepOutcome:
    """What one step returns: its loss (read after the sync), the work it did, optional phase times."""

    loss: Any
    counts: dict[str, float]
    phases: dict[str, float] | None = None


class Adaptive:
    """Whether an adaptive run has timed enough steps: every rank sends rank 0 its step times and samples
    since the last judgement, rank 0 judges the interval over all of them and tells every rank, so all stop
    after the same step. Its own time (two object collectives and a bootstrap) is counted apart."""

    def __init__(self, runtime: Runtime, target_pct: float, max_steps: int) -> None:
        self.runtime, self.stopper = runtime, Stopper(target_pct, max_steps)
        self.sent = 0
        self.width = float("inf")
        self.done_by = ""
        self.seconds = 0.0

    def enough(self, durations: list[float], samples: list[float]) -> bool:
        """One judgement, collective: call on every rank after the same step."""
        start = time.perf_counter()
        mine = (durations[self.sent:], samples[self.sent:])
        self.sent = len(durations)
        gathered = self.runtime.allgather_object(mine)
        verdict = None
        if self.runtime.rank == 0:
            self.stopper.add(gathered)
            verdict = (self.stopper.reason(), self.stopper.width)
        self.done_by, self.width = self.runtime.broadcast_object(verdict)
        self.seconds += time.perf_counter() - start
        return bool(self.done_by)

    def summary(self) -> dict[str, Any]:
        """The summary fields of an adaptive run."""
        return {"target_ci_pct": self.stopper.target, "ci_reached_pct": self.width * 100.0,
                "stopped_by": self.done_by, "adaptive_check_s": self.seconds}


@dataclass
class _Steps:
    """The steps a rank ran: each timed from its start to its device sync, written as a record, and what the
    timed ones add up to."""

    runtime: Runtime
    writer: RecordWriter
    step: Callable[[], StepOutcome]
    loss_value: Callable[[Any], float]
    losses: list[float] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)
    samples: list[float] = field(default_factory=list)
    totals: dict[str, float] = field(default_factory=dict)

    def one(self, index: int, warmup: bool) -> None:
        """Run, time and record step ``index``."""
        start = time.perf_counter()
        out = self.step()
        self.runtime.sync()
        duration = time.perf_counter() - start
        loss = self.loss_value(out.loss)
        self.losses.append(loss)
        if not warmup:
            self.durations.append(duration)
            self.samples.append(float(out.counts.get("samples", 0.0)))
            for key, value in out.counts.items():
                self.totals[key] = self.totals.get(key, 0.0) + value
        extra = {"phases": out.phases} if out.phases is not None else {}
        self.writer.write("step", step=index, warmup=warmup, duration=duration, **out.counts, loss=loss, **extra)

    def summary(self, warmup_steps: int, window: float) -> dict[str, Any]:
        """This rank's summary fields over the timed steps."""
        totals = dict(self.totals)
        samples = totals.pop("samples", 0.0)
        return {
            "steps": len(self.durations), "warmup_steps": warmup_steps, "samples": samples, "window_s": window,
            "step_time_sum_s": sum(self.durations), "median_step_s": statistics.median(self.durations),
            "throughput": rank_throughput(samples, sum(self.durations)), "totals": totals,
            "rates": {key: value / window for key, value in totals.items()}, "final_loss": self.losses[-1],
            "loss_finite": all(math.isfinite(x) for x in self.losses),
        }


def timed_loop(
    runtime: Runtime,
    writer: RecordWriter,
    step: Callable[[], StepOutcome],
    loss_value: Callable[[Any], float],
    *,
    warmup_steps: int,
    steps: int,
    target_ci: float | None = None,
    max_steps: int | None = None,
) -> dict[str, Any]:
    """Run warm-up then timed steps; record each step; return this rank's summary fields.

    ``counts["samples"]`` is the work in the benchmark's unit (images, words, tokens ...); other
    counts (audio seconds, sentences) are summed beside it. Every step ends with a device sync, so
    its duration is the device's work, not the dispatch. The timed window starts after a barrier
    and a sync and ends with a sync and a barrier. With ``target_ci`` (percent) the run is adaptive:
    ``steps`` first, then chunks of ADAPTIVE_CHUNK until the interval is within the target or
    ``max_steps`` are timed (``Adaptive``).
    """
    ran = _Steps(runtime, writer, step, loss_value)
    writer.write("phase", phase="warmup", steps=warmup_steps)
    for index in range(warmup_steps):
        ran.one(index, True)
    runtime.barrier()
    runtime.sync()
    writer.write("phase", phase="timed", steps=steps)
    window_start = time.perf_counter()
    for index in range(warmup_steps, warmup_steps + steps):
        ran.one(index, False)
    adaptive = None if target_ci is None else Adaptive(runtime, target_ci, max_steps or steps)
    while adaptive is not None and not adaptive.enough(ran.durations, ran.samples):
        for _ in range(min(ADAPTIVE_CHUNK, adaptive.stopper.max_steps - len(ran.durations))):
            ran.one(warmup_steps + len(ran.durations), False)
    runtime.sync()
    window = time.perf_counter() - window_start
    runtime.barrier()
    return {**(adaptive.summary() if adaptive is not None else {}), **ran.summary(warmup_steps, window)}


def summary_line(label: str, unit: str, per_rank: Sequence[dict[str, Any]]) -> str:
    """Rank 0's human summary: total throughput from every rank's own timing."""
    total = total_throughput(s["throughput"] for s in per_rank)
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
        summary = timed_loop(runtime, writer, step, loss_value, warmup_steps=flags.warmup_steps, steps=flags.steps,
                             target_ci=getattr(flags, "target_ci", None), max_steps=getattr(flags, "max_steps", None))
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
