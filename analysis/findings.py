"""The findings every verdict of hvdbench speaks in, defined once and imported by each verdict's writer and reader
(compare and its decision page, the weighted and cost verdicts, regressions, the knob and data-path tables; accept
judges a threshold, not a margin, and speaks the same words for its undecided). A ratio's 95% interval (runs and blocks
of their steps resampled, Student's t over runs: ratios.py) against the margin ±m gives one of:

- a direction (faster or slower; cheaper or more expensive; improvement or regression): the whole interval clears
  1 + m, or stays under 1 / (1 + m);
- equivalent within ±m: the whole interval inside [1 / (1 + m), 1 + m]. Schuirmann's two one-sided tests, each at
  2.5% (the interval shown is the one judged, so a reader can check every finding by eye);
- undecided: neither. The runs could not tell, and the finding says what they could have caught: the smallest ratio
  they would have called with 80% chance at the spread measured (the minimum detectable effect), each side's spread
  between runs, and how many runs a side would likely (80%) decide it if the ratio and the spread are what was
  observed: a direction where the ratio lies beyond the margin, equivalence (both one-sided tests) where inside it,
  the chance simulated with the interval's own width varying as it does over so few runs (decide_chance);
- not judged: fewer complete runs a side than --min-runs (the spread between runs unknown), or no interval at all.

"Equivalent" and "undecided" used to read alike ("no measurable difference"); a buyer reading the first signs, one
reading the second must run more."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

import numpy as np

from hvdbench.core.metrics import MARGIN_PCT
from .ratios import Resampled, direction, t_quantile, t_quantiles

EQUIVALENT = "equivalent"
UNDECIDED = "undecided"
NOT_JUDGED = "not judged"
SPEED = ("faster", "slower")
COST = ("more expensive", "cheaper")
CHANGE = ("improvement", "regression")
POWER = 0.80  # the chance "could have caught" and "runs to decide" speak of
MARGIN = MARGIN_PCT / 100  # the smallest change that counts (core/metrics.py's, the one home of the default)
MOST_RUNS = 1000  # runs a side beyond which no practical number of runs decides a comparison
NO_INTERVAL = f"{NOT_JUDGED} (no interval: too few steps)"
FINDINGS = (*SPEED, *COST, *CHANGE, EQUIVALENT, UNDECIDED, NOT_JUDGED)  # every value of a ``finding`` field


def margin_text(margin: float) -> str:
    """``±2%``: the margin as the findings say it."""
    return f"±{margin * 100:.3g}%"


LARGE_SPREAD = 0.25  # a log-scale spread from which "±x%" would mislead (±102% reads as "could be negative")


def spread_text(sigma: float) -> str:
    """A spread between runs (the standard deviation of their log figures) as ``±4.1%`` (what the runs vary, about);
    from LARGE_SPREAD on as the factor they vary by, ``×2.78`` (either way); "" where unknown."""
    if not math.isfinite(sigma):
        return ""
    return f"±{sigma:.1%}" if sigma < LARGE_SPREAD else f"×{math.exp(sigma):.2f}"


@dataclass(frozen=True)
class Finding:
    """What one comparison found: ``finding`` the word (the CSV and JSON field: a direction's word, equivalent,
    undecided or not judged), ``verdict`` the table's cell (``equivalent within ±2%``; a not-judged one says why),
    ``detectable`` the smallest ratio (≥ 1, either way) these runs would have called with 80% chance (NaN where not
    judged), ``runs_to_decide`` the runs a side that would likely decide an undecided one at the ratio observed (None
    where decided, not judged or no practical number would), ``spreads`` each side's spread between runs (the
    standard deviation of its runs' log figures, NaN where one run), ``why`` what an undecided one could not tell."""

    finding: str
    verdict: str
    detectable: float = math.nan
    runs_to_decide: int | None = None
    spreads: tuple[float, ...] = ()
    why: str = ""

    @property
    def judged(self) -> bool:
        return self.finding != NOT_JUDGED

    @property
    def decided(self) -> bool:
        """A direction or equivalence: what more runs would not change (at this confidence)."""
        return self.finding not in (UNDECIDED, NOT_JUDGED)

    def caught(self) -> str:
        """``×1.90``: what these runs could have caught; "" where not judged."""
        return f"×{self.detectable:.2f}" if math.isfinite(self.detectable) else ""

    def to_decide(self) -> str:
        """The runs a side that would likely decide it, as a table's cell: ``~41 a side``; ``over 1,000 a side``
        for an undecided one no practical number decides; ``-`` where decided or not judged."""
        if self.runs_to_decide is not None:
            return f"~{self.runs_to_decide:,} a side"
        return f"over {MOST_RUNS:,} a side" if self.finding == UNDECIDED else "-"

    def sentence(self) -> str:
        """The verdict with what stands behind it: ``undecided: could not tell: …``, ``faster (could have caught
        ×1.08)``."""
        if self.finding == UNDECIDED:
            return f"{self.verdict}: {self.why}"
        if self.judged and math.isfinite(self.detectable):
            return f"{self.verdict} (could have caught {self.caught()})"
        return self.verdict


def not_judged(why: str) -> Finding:
    """A comparison that cannot be judged, saying why (``why`` may already start with "not judged")."""
    return Finding(NOT_JUDGED, why if why.startswith(NOT_JUDGED) else f"{NOT_JUDGED}: {why}")


def _leaves(ratio: Resampled, weight: float = 1.0) -> Iterator[tuple[float, Resampled]]:
    """The configurations a ratio or mix is made of, each with its weight on the log scale."""
    if not ratio.parts:
        yield weight, ratio
        return
    for w, part in ratio.parts:
        yield from _leaves(part, weight * w)


def _terms(ratio: Resampled, runs: int | None) -> list[tuple[float, float]]:
    """Each configuration's share of the ratio's log variance with its degrees of freedom, with ``runs`` runs a side
    (None: as measured); a side's variance scales as 1 / runs, a borrowed spread keeps its pooled degrees of
    freedom."""
    terms = []
    for w, leaf in _leaves(ratio):
        count = leaf.runs if runs is None else max(runs, leaf.runs)
        df = leaf.df if runs is None or leaf.borrowed or not math.isfinite(leaf.df) else count - 1.0
        terms.append((w * w * leaf.var * leaf.runs / count, df))
    return terms


def _at(ratio: Resampled, runs: int | None) -> tuple[float, float]:
    """The ratio's log standard error and degrees of freedom (Welch and Satterthwaite) with ``runs`` runs a side (None:
    as measured)."""
    if runs is None:
        return math.sqrt(ratio.var), ratio.df
    terms = _terms(ratio, runs)
    var = sum(v for v, _ in terms)
    parts = sum(v * v / df for v, df in terms if df > 0 and math.isfinite(df))
    return math.sqrt(var), (var * var / parts if parts > 0 else math.inf)


def _reach(se: float, df: float) -> float:
    """How far beyond the margin (log scale) a ratio must lie to be called with POWER chance at this error."""
    return (t_quantile(0.975, df) + t_quantile(POWER, df)) * se


def interval_advice(value: float, low: float, high: float, bound: float, count: int,
                    most: int) -> tuple[float, int | None]:
    """For a positive figure whose 95% interval [low, high] is Student's on the log scale (as every interval here
    is), judged against a positive ``bound``: the factor either way beyond which it would have shown with 80%
    chance (``×1.23``: the bound times or over it), and the measurements in all (of ``count``, the error shrinking
    as 1/sqrt(n)) that would likely (80%) decide it at the value measured; None where more than ``most`` would.
    Accept's undecided and compare's findings speak one scale: a factor, never a percent of a log-scale spread."""
    df = count - 1.0 if count > 1 else math.inf
    se = (math.log(high) - math.log(low)) / (2 * t_quantile(0.975, df))
    caught = math.exp(_reach(se, df))
    distance = abs(math.log(value) - math.log(bound))
    if distance <= 0 or se <= 0:
        return caught, None
    low, high = count + 1, most  # the error at n measurements: se * sqrt(count / n), at n - 1 degrees of freedom
    if _reach(se * math.sqrt(count / high), high - 1.0) > distance:
        return caught, None
    while low < high:
        middle = (low + high) // 2
        if _reach(se * math.sqrt(count / middle), middle - 1.0) <= distance:
            high = middle
        else:
            low = middle + 1
    return caught, low


def detectable(ratio: Resampled, margin: float) -> float:
    """The smallest ratio (≥ 1, either way) these runs would have called with 80% chance at the spread measured."""
    se, df = _at(ratio, None)
    return math.exp(math.log1p(margin) + _reach(se, df))


DRAWS = 20_000  # simulated measurements a chance of deciding rests on (fixed seed: the same figure every time)


@lru_cache(maxsize=256)
def _scale(index: int, df: float) -> np.ndarray:
    """Draws of an estimated variance's share of the true one (chi-square over ``df``; 1 where df is infinite) for
    the ``index``-th configuration of a ratio, from a fixed seed."""
    if not math.isfinite(df):
        return np.ones(DRAWS)
    return 2.0 * np.random.default_rng((20261201, index)).standard_gamma(df / 2.0, DRAWS) / df


@lru_cache(maxsize=1)
def _normal() -> np.ndarray:
    return np.random.default_rng(20261201).standard_normal(DRAWS)


def _outcomes(center: float, terms: list[tuple[float, float]], margin: float) -> tuple[np.ndarray, np.ndarray]:
    """For fixed simulated measurements of a ratio whose true log is ``center`` and whose configurations contribute
    ``terms`` (variance, degrees of freedom) as judge() sees them: each side's variance estimated as a real one
    varies, the interval Student's at Welch and Satterthwaite's degrees of freedom from those estimates. Which
    measurements are called (the interval clears the margin either way) and which are equivalent (it lies wholly
    inside: both one-sided tests pass)."""
    parts = [var * _scale(i, round(df, 3) if math.isfinite(df) else math.inf) for i, (var, df) in enumerate(terms)]
    estimated = np.sum(parts, axis=0)
    finite = [p * p / df for p, (_, df) in zip(parts, terms) if math.isfinite(df) and df > 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        df = estimated ** 2 / np.sum(finite, axis=0) if finite else np.full(DRAWS, math.inf)
    half = t_quantiles(0.975, np.where(np.isfinite(df), df, 1e12)) * np.sqrt(estimated)
    estimate = center + math.sqrt(sum(v for v, _ in terms)) * _normal()
    edge = math.log1p(margin)
    called = (estimate - half > edge) | (estimate + half < -edge)
    return called, (estimate - half >= -edge) & (estimate + half <= edge)


def decide_chance(center: float, terms: list[tuple[float, float]], margin: float) -> float:
    """The chance that a measurement of a ratio whose true log is ``center`` is decided by the rule the findings use:
    a direction where it is called, equivalence (both one-sided tests) where its interval lies inside the margin."""
    called, equivalent = _outcomes(center, terms, margin)
    return float(np.mean(called | equivalent))


def tie_call_chance(ratio: Resampled | None, margin: float) -> float:
    """The chance that these runs (each side's error and degrees of freedom) would call a true tie faster or slower:
    one row's share of what chance alone calls on a page of many (NaN where there is no interval)."""
    if ratio is None or not all(map(math.isfinite, ratio.interval)):
        return math.nan
    return float(np.mean(_outcomes(0.0, _terms(ratio, None), margin)[0]))


def runs_to_decide(ratio: Resampled, margin: float, center: float) -> int | None:
    """The runs a side (each side at least as many as it has) at which a ratio whose log is ``center`` would be
    decided with 80% chance (decide_chance: called where it lies beyond the margin, equivalent, by both one-sided
    tests, where within); None where no number up to MOST_RUNS would (the ratio sits on the margin's edge)."""
    have = max(leaf.runs for _, leaf in _leaves(ratio))
    low, high = have + 1, MOST_RUNS

    def enough(runs: int) -> bool:
        return decide_chance(center, _terms(ratio, runs), margin) >= POWER

    if not enough(high):
        return None
    while low < high:  # the chance grows with the runs: the first count that reaches it
        middle = (low + high) // 2
        if enough(middle):
            high = middle
        else:
            low = middle + 1
    return low


def judge(ratio: Resampled | None, margin: float, words: tuple[str, str] = SPEED, names: tuple[str, ...] = (),
          few: str = "", scale: float = 1.0, invert: bool = False, advise: bool = True) -> Finding:
    """The finding of a ratio (``top`` over ``bottom``: ratios.ratio_draws) at ±``margin``: ``words`` for its two
    directions (above 1, below 1); ``names`` the two sides, as the spread between runs is said; ``few`` why a side
    has too few runs (ratios.too_few_runs), which makes it not judged; ``scale`` and ``invert`` judge ``scale /
    ratio`` instead (a cost per sample from a throughput ratio, prices held constant); ``advise``: an undecided one
    says how many runs a side would decide it (not where a sequential rule's budget says it)."""
    if ratio is None or not all(map(math.isfinite, ratio.interval)):
        return not_judged(few) if few else Finding(NOT_JUDGED, NO_INTERVAL)
    if few:
        return not_judged(few)
    low, high = ratio.interval
    if invert:
        low, high = scale / high, scale / low
    center = math.log(scale) - ratio.center if invert else ratio.center
    spreads = tuple(part.spread for _, part in ratio.parts)
    caught = detectable(ratio, margin)
    side = direction(low, high, margin)
    if side in ("above", "below"):
        return Finding(words[0] if side == "above" else words[1], words[0] if side == "above" else words[1], caught,
                       None, spreads)
    if low >= 1.0 / (1.0 + margin) and high <= 1.0 + margin:
        said = f"{EQUIVALENT} within {margin_text(margin)}"
        return Finding(EQUIVALENT, said, caught, None, spreads)
    runs = runs_to_decide(ratio, margin, center) if advise else None
    why = _could_not_tell(caught, spreads, names, runs, center, margin)
    return Finding(UNDECIDED, UNDECIDED, caught, runs, spreads, why if advise else why.split("; ")[0])


def _could_not_tell(caught: float, spreads: tuple[float, ...], names: tuple[str, ...], runs: int | None,
                    center: float, margin: float) -> str:
    """What an undecided comparison could not tell: ``could not tell: a difference under ×1.90 either way would likely
    not have shown (runs spread ±12.0% on A, ±3.1% on B); about 41 runs a side would likely decide it``."""
    said = [f"{spread_text(s)} on {n}" if n else spread_text(s)
            for s, n in zip(spreads, (*names, *[""] * len(spreads))) if math.isfinite(s)]
    spread = f" (runs spread {', '.join(said)})" if said else ""
    more = (f"about {runs:,} runs a side would likely decide it" if runs is not None else
            f"no practical number of runs decides it: the ratio sits {abs(abs(center) - math.log1p(margin)):.2%} "
            f"from the margin's edge")
    return f"could not tell: a difference under ×{caught:.2f} either way would likely not have shown{spread}; {more}"
