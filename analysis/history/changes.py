"""Change points in a configuration's history, and what the latest stretch amounts to.

Detection is E-divisive means (Matteson & James 2014, as MongoDB's CI runs it on noisy performance history: Daly et
al., ICPE 2020; its ``signal-processing-algorithms`` is the peer the tests agree with): the split of a series of runs'
log figures that maximises the energy distance between the runs before and after it, kept where a permutation test
at ALPHA says so (p = (shuffles splitting as well + 1) / (PERMUTATIONS + 1) at most ALPHA: 999 shuffles resolve a 1%
test), then sought again on each side (binary segmentation). It assumes no distribution and no known spread, and a
single outlying run moves it little. Each segment holds MIN_SEGMENT runs at least.

A machine's pace wanders: one night's runs resemble the night before's (autocorrelation), and a test that shuffled
runs one by one alone would call that wander a change. Change points are first found with runs shuffled one by one
(E-divisive's own test); where the runs about the stretches found still resemble the ones before them beyond what
independent runs show (``block_length``), they are sought again with runs shuffled in circular blocks of (1 + ρ) /
(1 - ρ) runs, which keep that resemblance. The shuffles are the same for every series of one length (a fixed seed,
never the data's bytes), so a nudge of 1e-12 or a round trip through the CSV export cannot flip a change.
benchmarks/change_detection.py measures this against shuffling one by one alone and against prewhitening
(docs/results/history-month).

What the latest stretch amounts to is judged as every verdict is (analysis/findings.py), on whole runs (Student's t
on their log figures, Welch's degrees of freedom, each side's variance inflated by its autocorrelation), at ±margin:
against the stretch before it, and against the history's first stretch (or its accepted baseline where one is
given), so a standing regression after a partial fix is still a regression."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..findings import CHANGE, EQUIVALENT, Finding, not_judged
from ..ratios import Resampled
from ..verdicts.versus import inflated, side, verdict_draws, versus

NO_CHANGE = "no change"  # the finding of a history with no change point
ALPHA = 0.01  # a split is a change where at most 1% of shuffles of its runs split as well
PERMUTATIONS = 999  # shuffles a split is tested against: p resolves 0.001
MIN_SEGMENT = 3  # runs on each side of a change at least
MIN_HISTORY = 2 * MIN_SEGMENT + 2  # runs a configuration needs before its history is judged
SEED = 20140301  # the shuffles' seed (with the series' length): fixed, never the data's bytes
MOST_RHO = 0.9  # autocorrelation taken as at most this (a longer block leaves nothing to shuffle)
Stretch = dict[str, tuple[float, float, float]]  # runs by key: each figure and its within-run 95% interval


def divergences(x: np.ndarray) -> np.ndarray:
    """Q(τ) for every split τ = 1 … n-1 of each row of ``x`` (shape (..., n); column τ-1): the scaled energy
    distance between x[:τ] and x[τ:] (α = 1), NaN where a side has fewer than two runs."""
    x = np.asarray(x, dtype=float)
    n = x.shape[-1]
    d = np.abs(x[..., :, None] - x[..., None, :])
    upper = np.triu(d, 1)
    into = upper.sum(axis=-2)  # Σ_{i<t} d(i, t): what run t adds to the runs before it
    out_of = upper.sum(axis=-1)  # Σ_{j>t} d(t, j)
    total = upper.sum(axis=(-2, -1))[..., None]
    tau = np.arange(1, n)
    left = np.cumsum(into, axis=-1)[..., :-1]  # within x[:τ]
    right = np.flip(np.cumsum(np.flip(out_of, -1), axis=-1), -1)[..., 1:]  # within x[τ:]
    across = total - left - right
    m = n - tau
    with np.errstate(divide="ignore", invalid="ignore"):
        q = (tau * m / n) * (2 * across / (tau * m) - left / (tau * (tau - 1) / 2) - right / (m * (m - 1) / 2))
    q[..., (tau < 2) | (m < 2)] = np.nan
    return q


_divergences = divergences  # the single series' name the tests knew


def _best(q: np.ndarray, n: int, min_segment: int) -> np.ndarray:
    """Each row's largest divergence over the splits leaving min_segment runs a side."""
    return np.nanmax(q[..., min_segment - 1:n - min_segment], axis=-1)


def best_split(x: np.ndarray, min_segment: int = MIN_SEGMENT) -> tuple[int, float] | None:
    """The split (τ: runs before it) with the largest divergence, both sides min_segment runs at least; None
    where the series is too short to split."""
    if len(x) < 2 * min_segment:
        return None
    q = divergences(x)
    allowed = np.full(len(q), -np.inf)
    allowed[min_segment - 1:len(x) - min_segment] = q[min_segment - 1:len(x) - min_segment]
    tau = int(np.nanargmax(allowed)) + 1
    return tau, float(allowed[tau - 1])


def shown_rho(x: np.ndarray, cuts: list[int] | tuple[int, ...] = ()) -> float:
    """The lag-1 autocorrelation the runs show about the means of the stretches ``cuts`` make (how much one run
    resembles the one before beyond any change found): 0 where it is within what independent runs show (about two
    standard errors, 2 / sqrt(n)), else at most MOST_RHO."""
    r = np.asarray(x, dtype=float).copy()
    bounds = [0, *sorted(c for c in cuts if 0 < c < len(r)), len(r)]
    for a, b in zip(bounds, bounds[1:]):
        r[a:b] -= r[a:b].mean()
    energy = float(np.dot(r, r))
    if len(r) < 8 or energy == 0.0:
        return 0.0
    rho = float(np.dot(r[:-1], r[1:]) / energy)
    return 0.0 if rho <= 2.0 / math.sqrt(len(r)) else min(MOST_RHO, rho)


def difference_rho(x: np.ndarray) -> float:
    """The lag-1 autocorrelation ρ of the runs read from their differences (an AR(1) series' differences correlate at
    -(1 - ρ) / 2 whatever level it holds; a change is one outlying difference, more than 3 robust spreads out, left
    out with its neighbours' pairs so that it does not pass for autocorrelation), at least 0 and at most MOST_RHO:
    what a stretch's variance is inflated by when judged (a noisy estimate on 30 runs, taken as it is: a
    threshold that spared independent runs let a wandering pace through twice as often)."""
    d = np.diff(np.asarray(x, dtype=float))
    if len(d) < 4:
        return 0.0
    center = float(np.median(d))
    spread = 1.4826 * float(np.median(np.abs(d - center)))
    usual = np.abs(d - center) <= 3 * spread if spread > 0 else np.ones(len(d), dtype=bool)
    d = d - float(d[usual].mean())
    pairs = usual[:-1] & usual[1:]
    energy = float(np.dot(d[usual], d[usual]))
    if pairs.sum() < 3 or energy == 0.0:
        return 0.0
    r = float(np.dot(d[:-1][pairs], d[1:][pairs]) / pairs.sum() / (energy / usual.sum()))
    return float(min(MOST_RHO, max(0.0, 1.0 + 2.0 * r)))


def block_length(x: np.ndarray, cuts: list[int] | tuple[int, ...] = ()) -> int:
    """Runs a shuffle moves together: (1 + ρ) / (1 - ρ) of the autocorrelation the runs show about the stretches
    ``cuts`` make, 1 for runs that show none (independent runs are shuffled one by one, as E-divisive's own test
    does), at most a quarter of the series."""
    rho = shown_rho(x, cuts)
    return int(max(1, min(len(x) // 4, round((1 + rho) / (1 - rho)))))


def _shuffles(n: int, block: int, permutations: int) -> np.ndarray:
    """``permutations`` orderings of n runs in circular blocks of ``block``, the same for every series of length n
    (and block)."""
    rng = np.random.default_rng([SEED, n, block])
    if block <= 1:
        return np.argsort(rng.random((permutations, n)), axis=1)
    starts = rng.integers(0, n, size=(permutations, math.ceil(n / block)))
    return ((starts[:, :, None] + np.arange(block)) % n).reshape(permutations, -1)[:, :n]


def split_p(x: np.ndarray, observed: float, min_segment: int = MIN_SEGMENT,
            permutations: int = PERMUTATIONS, block: int = 1) -> float:
    """The permutation p of a split's divergence: (the shuffles whose best split diverges as much + 1) over
    (permutations + 1), the runs shuffled in blocks of ``block``."""
    shuffled = np.asarray(x, dtype=float)[_shuffles(len(x), block, permutations)]
    beaten = int(np.count_nonzero(_best(divergences(shuffled), len(x), min_segment) >= observed))
    return (beaten + 1) / (permutations + 1)


def _segmented(x: np.ndarray, alpha: float, min_segment: int, block: int) -> list[int]:
    """Binary segmentation: every split whose permutation p (runs shuffled in blocks of ``block``) is at most alpha."""
    found: list[int] = []
    pending = [(0, len(x))]
    while pending:
        start, end = pending.pop()
        segment = x[start:end]
        split = best_split(segment, min_segment)
        if split is None or split_p(segment, split[1], min_segment, block=min(block, len(segment) // 4 or 1)) > alpha:
            continue
        found.append(start + split[0])
        pending += [(start, start + split[0]), (start + split[0], end)]
    return sorted(found)


def change_points(x: np.ndarray, alpha: float = ALPHA, min_segment: int = MIN_SEGMENT) -> list[int]:
    """Every change point of the series (the index of the first run after each), in order: found with runs shuffled
    one by one (E-divisive's own test), then, where the runs about the stretches found still resemble the ones
    before them (``block_length``), sought again with runs shuffled in blocks that keep that resemblance."""
    x = np.asarray(x, dtype=float)
    found = _segmented(x, alpha, min_segment, 1)
    block = block_length(x, found)
    return found if block == 1 else _segmented(x, alpha, min_segment, block)


def runs_of(logs: np.ndarray, rho: float = 0.0) -> Resampled:
    """A stretch's runs (log figures) as a side every B against A judges (analysis/verdicts/versus.py), its variance
    inflated by (1 + ρ) / (1 - ρ) where one run resembles the one before."""
    figures = {f"run-{i}": (float(np.exp(v)),) * 3 for i, v in enumerate(logs)}
    made = side(list(figures), verdict_draws(figures), {k: v for k, (v, _, _) in figures.items()})
    assert made is not None
    return inflated(made, (1 + rho) / (1 - rho)) or made


def _stretch(figures: Stretch, start: int, end: int, rho: float) -> Resampled | None:
    """Runs start … end-1 of a history as a side: each by its key, figure and within-run interval."""
    chosen = {key: figures[key] for key in list(figures)[start:end]}
    made = side(list(chosen), verdict_draws(chosen), {k: v for k, (v, _, _) in chosen.items()})
    return inflated(made, (1 + rho) / (1 - rho))


@dataclass
class History:
    """One configuration's history judged: its change points (the index of each first run after), and the finding
    of its latest stretch (against the stretch before it, or its first where that is worse)."""

    runs: int
    changes: list[int] = field(default_factory=list)
    finding: Finding = field(default_factory=lambda: not_judged("no history"))
    ratio: float = math.nan
    low: float = math.nan
    high: float = math.nan
    before: int = 0  # runs the latest stretch is judged against
    after: int = 0
    against: str = ""  # what it was judged against: "the stretch before it", "the first stretch", "the baseline"


def _judged(figures: Stretch, start: int, end: int, last: int, margin: float, against: str, rho: float) -> History:
    ratio, finding = versus(_stretch(figures, last, len(figures), rho), _stretch(figures, start, end, rho), margin,
                            CHANGE, ("after", "before"))
    low, high = ratio.interval if ratio is not None else (math.nan, math.nan)
    return History(len(figures), [], finding, ratio.value if ratio is not None else math.nan, low, high, end - start,
                   len(figures) - last, against)


def _keyed(values: np.ndarray, intervals: tuple[np.ndarray, np.ndarray] | None, keys: list[str] | None,
           prefix: str) -> Stretch:
    """Runs as a side is made of: by key, each figure and its within-run interval (the figure itself where none)."""
    low, high = intervals if intervals is not None else (values, values)
    names = keys if keys is not None else [f"{prefix}{i}" for i in range(len(values))]
    return {str(k): (float(v), float(lo), float(hi)) for k, v, lo, hi in zip(names, values, low, high)}


def judge_history(figures: np.ndarray, margin: float, baseline: np.ndarray | None = None,
                  intervals: tuple[np.ndarray, np.ndarray] | None = None, keys: list[str] | None = None) -> History:
    """Change points of a configuration's run figures (higher better, oldest first; ``intervals`` their within-run
    95% intervals, ``keys`` their execution keys, where kept) and what its latest stretch amounts to, judged as every
    B against A is (analysis/verdicts/versus.py): against the stretch before it and against its first stretch
    (``baseline``: the accepted runs' figures, where recorded, instead), the worse of the two said; not judged under
    MIN_HISTORY runs."""
    values = np.asarray(figures, dtype=float)
    logs = np.log(values)
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
    rho = difference_rho(logs)
    runs = _keyed(values, intervals, keys, "run-")
    judged = _judged(runs, first, last, last, margin, "the stretch before it", rho)
    if baseline is not None and len(baseline) >= 2:
        accepted = {**_keyed(np.asarray(baseline, dtype=float), None, None, "accepted-"),
                    **{k: runs[k] for k in list(runs)[last:]}}
        other: History | None = _judged(accepted, 0, len(baseline), len(baseline), margin, "the accepted baseline",
                                        rho)
    else:
        other = _judged(runs, 0, changes[0], last, margin, "the first stretch", rho) if len(changes) > 1 else None
    worse = other if other is not None and other.finding.finding == CHANGE[1] and \
        judged.finding.finding != CHANGE[1] else judged
    worse.changes = changes
    if worse is other:
        worse.finding = Finding(CHANGE[1], f"{CHANGE[1]} against {other.against} (the latest change, against "
                                f"the stretch before it: {judged.finding.finding})", worse.finding.detectable,
                                spreads=worse.finding.spreads)
    elif judged.finding.finding in (CHANGE[0], EQUIVALENT) and other is not None:
        worse.finding = Finding(judged.finding.finding, f"{judged.finding.verdict} (against {other.against}: "
                                f"{other.finding.finding})", judged.finding.detectable, spreads=judged.finding.spreads)
    return worse
