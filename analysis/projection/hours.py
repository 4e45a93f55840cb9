"""How long a plan will hold its nodes, before it is submitted: each run's steps (warm-up and timed, as its
arguments say) times a step time measured by an earlier run of the same work, else one the user gives, plus the
start-up that measured run took; node-hours = the sum of every run's nodes x its seconds. Imports the ground
floor."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from hvdbench.core.catalog import get_benchmark
from hvdbench.core.errors import UsageError
from hvdbench.core.flags import MAX_STEPS_FACTOR
from hvdbench.core.spec import RunSpec

from ..collect import Collection, collect, step_rows
from ..keys import measured_args

MEASURED_KEY = ["benchmark", "work", "nodes", "np"]


@dataclass(frozen=True)
class Timing:
    """What one measured run says of its work: seconds outside its steps, a warm-up step and a timed step."""

    start_s: float
    warmup_s: float
    step_s: float


@dataclass(frozen=True)
class PlanHours:
    """A plan's estimated node-hours and where each run's figure came from."""

    node_hours: float
    same_size: int  # runs timed by a finished run of the same work and size
    other_size: int  # ... of the same work at the nearest other size
    given: int  # runs timed by the given step time (start-up not counted)
    unknown: int  # runs with no step time
    adaptive: int  # runs whose --target-ci may stop them early (counted at their --max-steps)

    def text(self, step_time: float | None) -> str:
        """The dry run's line: the estimate and its sources, or what would give one."""
        total = self.same_size + self.other_size + self.given + self.unknown
        if self.unknown == total:
            return ("node-hours from step times: not estimated (no finished run of this work in the results "
                    "given to --estimate-from, and no --step-time)")
        parts = [f"{n} {what}" for n, what in (
            (self.same_size, "from a finished run of the same work and size"),
            (self.other_size, "from the same work at the nearest measured size"),
            (self.given, f"from --step-time {step_time:g} s (start-up not counted)" if step_time else ""),
            (self.unknown, "not estimated (no step time)")) if n]
        adaptive = (f"; {self.adaptive} with --target-ci counted at their --max-steps, an upper bound"
                    if self.adaptive else "")
        return f"node-hours from step times: about {self.node_hours:,.2f} ({'; '.join(parts)}{adaptive})"


def _steps(spec: RunSpec) -> tuple[int, int, bool] | None:
    """(warm-up steps, timed steps, adaptive) a training run's arguments ask for; None for other benchmarks."""
    info = get_benchmark(spec.benchmark)
    if not info.trains:
        return None
    flags = info.check(list(spec.args))
    if flags.target_ci is not None:
        return flags.warmup_steps, flags.max_steps or MAX_STEPS_FACTOR * flags.steps, True
    return flags.warmup_steps, flags.steps, False


def measured_timings(collection: Collection) -> dict[tuple[Any, ...], Timing]:
    """Per (benchmark, arguments without run length, nodes, ranks): the timing of its first finished run that
    logged steps; rank 0's steps (every rank steps together)."""
    runs = collection.runs[(collection.runs["status"] == "ok") & collection.runs["wall_s"].notna()]
    rows = step_rows(collection)
    out: dict[tuple[Any, ...], Timing] = {}
    for run in runs.itertuples():
        key = (run.benchmark, measured_args(run.args), int(run.nodes), int(run.np))
        if key in out or run.run_id not in rows:
            continue
        mine = collection.steps.iloc[rows[run.run_id]]
        mine = mine[mine["rank"] == 0]
        warm_rows = mine["warmup"].astype(bool)
        timed, warm = mine[~warm_rows]["duration"], mine[warm_rows]["duration"]
        if not len(timed):
            continue
        start = max(float(run.wall_s) - float(mine["duration"].sum()), 0.0)
        out[key] = Timing(start, float(warm.mean()) if len(warm) else float(timed.median()), float(timed.median()))
    return out


def _nearest(timings: dict[tuple[Any, ...], Timing], key: tuple[Any, ...]) -> Timing | None:
    """The timing of the same work at the size nearest ``key``'s (by rank count, on a log scale)."""
    same = [(k, t) for k, t in timings.items() if k[:2] == key[:2]]
    if not same:
        return None
    return min(same, key=lambda item: (abs(math.log(item[0][3] / key[3])), item[0][2] != key[2]))[1]


def plan_hours(specs: Sequence[RunSpec], roots: Sequence[Path], step_time: float | None) -> PlanHours:
    """Estimate the node-hours of ``specs`` from the finished runs under ``roots`` and the given step time."""
    if step_time is not None and not (math.isfinite(step_time) and step_time > 0):
        raise UsageError(f"--step-time {step_time}: give the seconds of one step, a positive number")
    timings = measured_timings(collect(roots)) if roots else {}
    seconds: list[float] = []
    counts = {"same_size": 0, "other_size": 0, "given": 0, "unknown": 0, "adaptive": 0}
    for spec in specs:
        steps = _steps(spec)
        key = (spec.benchmark, measured_args(" ".join(spec.args)), spec.nodes, spec.np)
        timing, source = timings.get(key), "same_size"
        if timing is None:
            timing, source = _nearest(timings, key), "other_size"
        if timing is None and step_time is not None:
            timing, source = Timing(0.0, step_time, step_time), "given"
        if timing is None or steps is None:
            counts["unknown"] += 1
            continue
        warmup, timed, adaptive = steps
        counts[source] += 1
        counts["adaptive"] += adaptive
        seconds.append(spec.nodes * (timing.start_s + warmup * timing.warmup_s + timed * timing.step_s))
    return PlanHours(float(np.sum(seconds)) / 3600 if seconds else 0.0, **counts)

