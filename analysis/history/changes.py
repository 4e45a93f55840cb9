"""Change points in a configuration's history, and what the latest one amounts to.

Detection is E-divisive means (Matteson & James 2014, as MongoDB's CI runs it on noisy performance history: Daly et
al., ICPE 2020): the split of a series of runs' log throughputs that maximises the energy distance between the runs
before and after it, kept where a permutation test says so few shuffles of the same runs split as well (p below
ALPHA), then sought again on each side (binary segmentation). It assumes no distribution and no known spread, and a
single outlying run moves it little. Each segment holds MIN_SEGMENT runs at least, so a change in the last runs shows
once that many have run after it.

What the latest change amounts to is judged as every verdict is (analysis/findings.py): the runs after it against
the runs before it (since the change before), on whole runs (Student's t on their log throughputs, Welch's degrees
of freedom), at ±margin: regression, improvement, equivalent within ±margin, or undecided with what the runs could
have caught."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field

import numpy as np

from ..findings import CHANGE, Finding, judge, not_judged
from ..ratios import Resampled, combined

NO_CHANGE = "no change"  # the finding of a history with no change point
ALPHA = 0.01  # a split is a change where fewer than 1% of shuffles of its runs split as well
PERMUTATIONS = 199  # shuffles a split is tested against (the smallest p it can show: 1/200)
MIN_SEGMENT = 3  # runs on each side of a change at least
MIN_HISTORY = 2 * MIN_SEGMENT + 2  # runs a configuration needs before its history is judged


def _divergences(x: np.ndarray) -> np.ndarray:
    """Q(τ) for every split τ = 1 … n-1 of ``x`` (index τ-1): the scaled energy distance between x[:τ] and x[τ:]
    (α = 1), NaN where a side has fewer than two runs."""
    n = len(x)
    d = np.abs(x[:, None] - x[None, :])
    upper = np.triu(d, 1)
    into = upper.sum(axis=0)  # Σ_{i<t} d(i, t): what run t adds to the runs before it
    out_of = upper.sum(axis=1)  # Σ_{j>t} d(t, j)
    total = upper.sum()
    tau = np.arange(1, n)
    left = np.cumsum(into)[:-1]  # within x[:τ]
    right = np.cumsum(out_of[::-1])[::-1][1:]  # within x[τ:]: each run from τ on with the runs after it
    across = total - left - right
    m = n - tau
    with np.errstate(divide="ignore", invalid="ignore"):
        q = (tau * m / n) * (2 * across / (tau * m) - left / (tau * (tau - 1) / 2) - right / (m * (m - 1) / 2))
    q[(tau < 2) | (m < 2)] = np.nan
    return q


def best_split(x: np.ndarray, min_segment: int = MIN_SEGMENT) -> tuple[int, float] | None:
    """The split (τ: runs before it) with the largest divergence, both sides min_segment runs at least; None
    where the series is too short to split."""
    if len(x) < 2 * min_segment:
        return None
    q = _divergences(x)
    allowed = np.full(len(q), -np.inf)
    allowed[min_segment - 1:len(x) - min_segment] = q[min_segment - 1:len(x) - min_segment]
    tau = int(np.nanargmax(allowed)) + 1
    return tau, float(allowed[tau - 1])


def _seed(x: np.ndarray) -> int:
    return int.from_bytes(hashlib.sha256(np.ascontiguousarray(x).tobytes()).digest()[:8], "little")


def split_p(x: np.ndarray, observed: float, min_segment: int = MIN_SEGMENT,
            permutations: int = PERMUTATIONS) -> float:
    """The permutation p of a split's divergence: the share of shuffles of the runs (seeded by the runs) whose best
    split diverges as much."""
    rng = np.random.default_rng(_seed(x))
    beaten = 0
    for _ in range(permutations):
        found = best_split(rng.permutation(x), min_segment)
        beaten += found is not None and found[1] >= observed
    return (beaten + 1) / (permutations + 1)


def change_points(x: np.ndarray, alpha: float = ALPHA, min_segment: int = MIN_SEGMENT) -> list[int]:
    """Every change point of the series (the index of the first run after each), in order."""
    found: list[int] = []
    pending = [(0, len(x))]
    while pending:
        start, end = pending.pop()
        segment = x[start:end]
        split = best_split(segment, min_segment)
        if split is None or split_p(segment, split[1], min_segment) >= alpha:
            continue
        found.append(start + split[0])
        pending += [(start, start + split[0]), (start + split[0], end)]
    return sorted(found)


def runs_of(logs: np.ndarray) -> Resampled:
    """A segment's runs as a configuration's figure on whole runs: the mean of their log throughputs, its variance
    (the spread between runs over their count) and n - 1 degrees of freedom; draws from it for the ratio's code."""
    n = len(logs)
    sd = float(np.std(logs, ddof=1))
    draws = np.exp(logs.mean() + sd / math.sqrt(n) * np.random.default_rng(_seed(logs)).standard_normal(1000))
    return Resampled(draws, n, float(logs.mean()), sd * sd / n, float(n - 1), spread=sd)


@dataclass
class History:
    """One configuration's history judged: its change points (the index of each first run after), and the finding
    of the latest (or of the latest runs against the rest, where none)."""

    runs: int
    changes: list[int] = field(default_factory=list)
    finding: Finding = field(default_factory=lambda: not_judged("no history"))
    ratio: float = math.nan
    low: float = math.nan
    high: float = math.nan
    before: int = 0  # runs the latest change is judged against
    after: int = 0


def judge_history(throughputs: np.ndarray, margin: float) -> History:
    """Change points of a configuration's run throughputs (oldest first) and what the latest amounts to; not judged
    under MIN_HISTORY runs."""
    logs = np.log(np.asarray(throughputs, dtype=float))
    n = len(logs)
    if n < MIN_HISTORY:
        return History(n, finding=not_judged(f"{n} run(s) in its history: {MIN_HISTORY} at least find a change "
                                             f"({MIN_SEGMENT} a side)"))
    changes = change_points(logs)
    if not changes:
        spread = float(np.std(logs, ddof=1))
        return History(n, changes, Finding(NO_CHANGE, f"{NO_CHANGE} in {n} runs (runs spread ±{spread:.1%})",
                                           spreads=(spread,)))
    last = changes[-1]
    first = changes[-2] if len(changes) > 1 else 0
    after, before = runs_of(logs[last:]), runs_of(logs[first:last])
    ratio = combined([(1.0, after), (-1.0, before)])
    low, high = ratio.interval
    finding = judge(ratio, margin, CHANGE, ("after", "before"))
    return History(n, changes, finding, ratio.value, low, high, last - first, n - last)
