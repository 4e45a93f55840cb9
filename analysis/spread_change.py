"""Whether a configuration's runs spread more in its early runs than in its late ones (or less): a loaded hour at the
start of a long measurement, a neighbour that left. The two halves' spreads (the sd of the runs' log throughputs) are
set against each other by the F test of two variances, its p-value from the F distribution drawn with a fixed seed
(numpy's own F sampler; no statistics library needed, and the same runs always give the same answer)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

MIN_HALF = 4  # runs in each half before the spreads are set against each other
LEVEL = 0.05  # two-sided: a difference said only where equal spreads would show one this large this rarely
DRAWS = 200_000  # F draws for the p-value (its error about ±0.001 at 0.05)


@dataclass(frozen=True)
class SpreadChange:
    """The early and late runs' spreads (as factors: ×1.05 is 5% either way, one sd), how many of each, the F
    test's two-sided p-value."""

    early: int
    late: int
    early_factor: float
    late_factor: float
    p_value: float

    def line(self) -> str:
        louder = "early" if self.early_factor > self.late_factor else "late"
        return (f"the first {self.early} runs spread ×{self.early_factor:.3f} and the last {self.late} "
                f"×{self.late_factor:.3f} (F test of the two spreads: p = {self.p_value:.3f}): the {louder} runs were "
                f"the noisier (a loaded hour, a neighbour?); the verdict pools them all")


def f_test(log_early: Sequence[float], log_late: Sequence[float], draws: int = DRAWS) -> float:
    """The two-sided p-value of the F test that two samples share one variance."""
    a, b = np.asarray(log_early, float), np.asarray(log_late, float)
    var_a, var_b = float(np.var(a, ddof=1)), float(np.var(b, ddof=1))
    if var_a == 0 or var_b == 0:
        return 0.0 if var_a != var_b else 1.0
    ratio = var_a / var_b
    sampled = np.random.default_rng(20260101).f(len(a) - 1, len(b) - 1, size=draws)
    upper = float(np.mean(sampled >= ratio))
    return min(1.0, 2 * min(upper, 1 - upper))


def spread_change(values: Sequence[float]) -> SpreadChange | None:
    """The runs' figures in the order they were made, split in halves: a SpreadChange where the halves' spreads differ
    at LEVEL, else None (None too with fewer than MIN_HALF runs a half, or a figure that is not positive)."""
    logs = [math.log(v) for v in values if v is not None and math.isfinite(v) and v > 0]
    if len(logs) < len(values) or len(logs) < 2 * MIN_HALF:
        return None
    half = len(logs) // 2
    early, late = logs[:half], logs[half:]
    p = f_test(early, late)
    if p >= LEVEL:
        return None
    return SpreadChange(len(early), len(late), math.exp(float(np.std(early, ddof=1))),
                        math.exp(float(np.std(late, ddof=1))), p)
