"""``project --batch-per-gpu B`` and ``--global-batch G``: a workload projected at the batch a GPU will have at each
node count, not the one it was measured at. A buyer's job at 64 nodes rarely runs the batch a GPU its 1-node runs
did: a global batch bounded by convergence (MLPerf's strong scaling) leaves each GPU fewer samples as nodes grow, and
a GPU's efficiency falls as its batch shrinks (kernels too small to fill it), so a step's compute is not linear in
the batch. Compute is fitted as ``k * b^p`` across the batches the workload's runs measured it at (a one-node batch
sweep, ``axes: batch_size``, of --independent twins or 1-rank runs), as the back-test on published results fits it
(backtest.compute_power); with one batch measured it is taken as linear, and every row says so. The exchange does not
depend on the batch: the gradients are the model's. A row's interval widens by the projection's own track record on
published results per e-fold of the batch from the nearest one measured (track_record.json)."""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np
import pandas as pd

from hvdbench.core.errors import ReportError
from hvdbench.core.run_flags import without
from .backtest import compute_power
from .inputs import FittedWorkload

MOST_BATCH = 1 << 24  # samples a GPU, or a global batch: beyond any training run


@dataclass(frozen=True)
class BatchAsked:
    """The batch asked for: the same on every GPU (``per_gpu``), or a global one shared by the GPUs of each node
    count (``global_batch``)."""

    per_gpu: int | None = None
    global_batch: int | None = None

    def at(self, ranks: int) -> int:
        """Samples a GPU at ``ranks`` GPUs: the global batch's share, rounded down (0: less than one a GPU)."""
        if self.per_gpu:
            return self.per_gpu
        return (self.global_batch or 0) // ranks

    def describe(self) -> str:
        return f"batch {self.per_gpu:,} a GPU" if self.per_gpu else f"global batch {self.global_batch:,}"


@dataclass(frozen=True)
class ComputeCurve:
    """A step's compute against the batch a GPU, ``k * b^p``, the batches it rests on, and how it was fitted."""

    k: float
    p: float
    batches: tuple[int, ...]
    how: str

    def compute_s(self, batch: int) -> float:
        return self.k * batch ** self.p

    def reach_e(self, batch: int) -> float:
        """e-folds from the nearest batch measured."""
        return min(abs(math.log(batch / b)) for b in self.batches)


def _family(w: FittedWorkload) -> tuple[tuple[str, str], ...]:
    """What a workload is apart from its batch (its arguments without --batch-size)."""
    def plain(key: str, value: Any) -> str:
        return shlex.join(without(shlex.split(value), {"--batch-size": 1})) if key == "base_args" and \
            isinstance(value, str) else str(value)

    return tuple(sorted((k, plain(k, v)) for k, v in w.key.items() if k != "batch_size"))


def batch_of(w: FittedWorkload) -> int | None:
    """The batch a GPU a workload ran (None: its runs record none)."""
    batch = w.key.get("batch_size")
    return None if batch is None or pd.isna(batch) else int(batch)


def compute_curve(mine: Sequence[FittedWorkload]) -> ComputeCurve:
    """The compute curve of one workload's runs at their batches (one compute a batch: the workload's own)."""
    points = sorted({b: w.model.compute_s for w in mine if (b := batch_of(w)) is not None}.items())
    batches, computes = [b for b, _ in points], [c for _, c in points]
    notes: list[str] = []
    k, p = compute_power(batches, computes, notes)
    said = ", ".join(f"{b:,} ({c * 1e3:.1f} ms)" for b, c in points)
    how = (f"compute {k * 1e3:.3g} ms x batch^{p:.2f}, fitted from the batches measured: {said}" if len(points) > 1
           else f"one batch measured ({said}): compute at another batch taken as linear in it (measure a batch "
                "sweep, axes: batch_size, to fit its shape)")
    return ComputeCurve(k, p, tuple(batches), "; ".join([how, *notes]))


def families(workloads: Sequence[FittedWorkload]) -> list[tuple[FittedWorkload, ComputeCurve]]:
    """Each workload family (the same but for the batch) once: the workload its exchange and overlap are taken
    from (the one with the most exchanging runs measured, then the largest batch), with the family's compute
    curve; a ReportError where no workload records its batch."""
    grouped: dict[tuple[tuple[str, str], ...], list[FittedWorkload]] = {}
    for w in workloads:
        if batch_of(w) is not None:
            grouped.setdefault(_family(w), []).append(w)
    if not grouped:
        raise ReportError("--batch-per-gpu/--global-batch: no workload's runs record their batch size")
    return [(max(mine, key=lambda w: (len(w.measured), batch_of(w) or 0)), compute_curve(mine))
            for mine in grouped.values()]


def at_batch(w: FittedWorkload, curve: ComputeCurve, asked: BatchAsked, batch: int) -> FittedWorkload:
    """The workload at ``batch`` a GPU: compute from the curve (its draws scaled alike), the same exchange; the
    runs measured kept only at the batch they ran; the speedup against one GPU at the batch asked (a global batch:
    the same work on one GPU, so what the GPUs lose as their share shrinks is in the efficiency)."""
    measured_batch = batch_of(w) or batch
    compute = curve.compute_s(batch)
    ratio = compute / w.model.compute_s
    thr = batch / compute
    reference = asked.per_gpu or asked.global_batch or batch
    base_ratio = reference / curve.compute_s(reference) / w.rank_throughput
    return replace(w, key={**w.key, "batch_size": batch}, label=label(w, asked), model=w.model.scaled(compute),
                   compute_draws=np.asarray(w.compute_draws) * ratio, rank_throughput=thr,
                   baseline=w.baseline * base_ratio, baseline_draws=np.asarray(w.baseline_draws) * base_ratio,
                   measured=w.measured if batch == measured_batch else [])


def label(w: FittedWorkload, asked: BatchAsked) -> str:
    """The workload's label with the batch asked for in place of the one measured."""
    batch = batch_of(w)
    said = f"batch {batch}"
    return w.label.replace(said, asked.describe(), 1) if batch is not None and said in w.label else \
        f"{w.label} {asked.describe()}"


def shown(w: FittedWorkload, curve: ComputeCurve, asked: BatchAsked) -> FittedWorkload:
    """The workload as the projection's inputs list it: its label at the batch asked, and how compute was fitted."""
    baseline = "one GPU at that batch" if asked.per_gpu else \
        "one GPU at the whole global batch (the same work on one GPU, its compute from the curve)"
    kept = [line for line in w.inputs if not line.startswith("speedup against")]  # the measured batch's baseline
    return replace(w, label=label(w, asked),
                   inputs=[*kept, curve.how, f"projected at {asked.describe()}; speedup against {baseline}"])


def batch_cells(curve: ComputeCurve | None, batch: int | None) -> dict[str, Any]:
    """A projected row's batch a GPU and its reach from the batches measured (NaN: projected at the one measured)."""
    if curve is None or batch is None:
        return {"batch_per_gpu": batch, "batch_e": math.nan}
    return {"batch_per_gpu": batch, "batch_e": curve.reach_e(batch)}
