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
  between runs, and how many runs a side would likely (80%) decide it if the ratio is what was observed;
- not judged: fewer complete runs a side than --min-runs (the spread between runs unknown), or no interval at all.

"Equivalent" and "undecided" used to read alike ("no measurable difference"); a buyer reading the first signs, one
reading the second must run more."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

from hvdbench.core.metrics import MARGIN_PCT
from .ratios import Resampled, direction, t_quantile

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


def spread_text(sigma: float) -> str:
    """A spread between runs (the standard deviation of their log figures) as ``±4.1%``; "" where unknown."""
    return f"±{sigma:.1%}" if math.isfinite(sigma) else ""


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
        """The runs a side that would likely decide it, as a table's cell: ``~41 a side``, ``-``."""
        return f"~{self.runs_to_decide:,} a side" if self.runs_to_decide is not None else "-"

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


def _at(ratio: Resampled, runs: int | None) -> tuple[float, float]:
    """The ratio's log standard error and degrees of freedom (Welch and Satterthwaite) with ``runs`` runs a side (None:
    as measured); each side's variance scales as 1 / runs, a borrowed spread keeps its pooled degrees of freedom."""
    if runs is None:
        return math.sqrt(ratio.var), ratio.df
    terms = []
    for w, leaf in _leaves(ratio):
        count = max(runs, leaf.runs)
        var = w * w * leaf.var * leaf.runs / count
        terms.append((var, leaf.df if leaf.borrowed else count - 1.0))
    var = sum(v for v, _ in terms)
    parts = sum(v * v / df for v, df in terms if df > 0 and math.isfinite(df))
    return math.sqrt(var), (var * var / parts if parts > 0 else math.inf)


def _reach(se: float, df: float) -> float:
    """How far beyond the margin (log scale) a ratio must lie to be called with POWER chance at this error."""
    return (t_quantile(0.975, df) + t_quantile(POWER, df)) * se


def detectable(ratio: Resampled, margin: float) -> float:
    """The smallest ratio (≥ 1, either way) these runs would have called with 80% chance at the spread measured."""
    se, df = _at(ratio, None)
    return math.exp(math.log1p(margin) + _reach(se, df))


def runs_to_decide(ratio: Resampled, margin: float, center: float) -> int | None:
    """The runs a side (each side at least as many as it has) at which a ratio whose log is ``center`` would be
    decided with 80% chance: called, where it lies beyond the margin, equivalent where within; None where no number up
    to MOST_RUNS would (the ratio sits on the margin's edge)."""
    distance = abs(abs(center) - math.log1p(margin))
    have = max(leaf.runs for _, leaf in _leaves(ratio))
    low, high = have + 1, MOST_RUNS
    if distance <= 0 or _reach(*_at(ratio, high)) > distance:
        return None
    while low < high:  # the error only shrinks with runs: the first count that reaches the distance
        middle = (low + high) // 2
        if _reach(*_at(ratio, middle)) <= distance:
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
