"""Run until decided: repeats of a configuration are added one round at a time, and after every round the question is
asked again ("is it decided yet?"), so the intervals asked must stay right however often they are looked at. A
fixed-run interval looked at after every run is not: at a 10% spread between runs, looks after every run from 3 to
10 called a tie in 7.7% of simulated sequences, where one look at 8 runs does in 2% (docs/results/calibration.md).

The rule is a repeated confidence interval (Jennison and Turnbull, 1989), the group-sequential design's interval
with a look after every round from the first look (``first`` runs, --min-runs) to the budget: at ``n`` runs the
interval is the usual one (the figure's log ± t × its standard error, Student's or Welch's degrees of freedom) but
with a per-look two-sided level of ``level × n / budget`` instead of 5%: a level in proportion to the runs made
(linear spending, Lan and DeMets' power family at ρ = 1, between Pocock's and O'Brien and Fleming's), so early looks
stop only a clear case, and every look pays for the others: the last look's interval at a budget of 10 is about 28%
wider than a fixed design's at 10 runs. The constant ``level`` is found by simulating the looks' t statistics under
normal noise between runs, so that the chance any look's interval misses the truth is 5% (the statistic does not
depend on the unknown spread, so one simulation serves every configuration). Against a reference whose runs are
fixed (``--against ROOT``: another system's results), the statistic's law depends on the ratio of the two sides'
spreads: the level is the smallest over ratios from 1/4 to 4, so the rule holds whichever it is. Every interval
found so is valid at every look at once; a finding read off it (analysis/findings.py: a direction, equivalent,
undecided) keeps its error rate however many rounds were looked at. docs/results/calibration.md counts its false
calls and its runs against the fixed design's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

from hvdbench.core.metrics import CONFIDENCE

from ..collect import collect
from ..findings import SPEED, UNDECIDED, judge, margin_text, runs_to_decide, spread_text
from ..keys import measured_args
from ..ratios import Resampled, config_draws, ratio_draws, t_quantile, t_quantiles, too_few_runs
from ..tables.scaling import run_stats_table, scaling_table

ALPHA = 1.0 - CONFIDENCE  # the chance, over every look together, that an interval misses the truth
PATHS = 20000  # simulated sequences a design is calibrated on (its level within about 2% of its own size)
RATIOS = (0.25, 0.5, 1.0, 2.0, 4.0)  # the reference's spread over this side's, the design holding at each
STEPS = 30  # bisections of the level


ALONGSIDE = -1  # a design's ``reference`` where the reference grows with this side, a run of each a round


@dataclass(frozen=True)
class Design:
    """Looks at ``first`` to ``budget`` runs of the growing side, against ``reference`` fixed runs (0: a
    configuration's own interval; ALONGSIDE: a reference run alongside, as many runs as this side); at ``n`` runs the
    two-sided level ``level × n / budget``."""

    first: int
    budget: int
    reference: int
    level: float

    def quantile(self, runs: int, df: float) -> float:
        """The t multiplier of a look at ``runs`` runs."""
        return t_quantile(1.0 - self.level * min(runs, self.budget) / self.budget / 2.0, df)

    def interval(self, estimate: Resampled, runs: int) -> tuple[float, float]:
        """The repeated 95% interval of a look at ``runs`` runs: the figure (or ratio) ± the look's multiplier × its
        standard error, on the log scale."""
        half = self.quantile(runs, estimate.df) * math.sqrt(estimate.var)
        return math.exp(estimate.center - half), math.exp(estimate.center + half)

    def describe(self) -> str:
        """The rule in one line, for the output and the record."""
        against = (" against a reference run alongside (a run of each a round)" if self.reference == ALONGSIDE else
                   f" against {self.reference} fixed reference run(s)" if self.reference else "")
        return (f"repeated 95% intervals, a look after every round from {self.first} to {self.budget} runs{against}: "
                f"at n runs each interval's level is {self.level:.4f} × n / {self.budget} (two-sided)")


def _paths(first: int, budget: int, reference: int, ratio: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Simulated |t| statistics and their degrees of freedom at each look (paths x looks), the truth held at 0."""
    rng = np.random.default_rng(seed)
    y = rng.standard_normal((PATHS, budget))
    n = np.arange(1, budget + 1, dtype=float)
    mean = np.cumsum(y, axis=1) / n
    sumsq = np.maximum(np.cumsum(y * y, axis=1) - n * mean ** 2, 0.0)
    looks = slice(first - 1, budget)
    n, mean, var = n[looks], mean[:, looks], sumsq[:, looks] / (n[looks] - 1) / n[looks]
    if not reference:
        return np.abs(mean) / np.sqrt(var), np.broadcast_to(n - 1, var.shape)
    if reference == ALONGSIDE:  # the other side's runs made alongside: its own sums at each look
        x = rng.normal(0.0, ratio, (PATHS, budget))
        counts = np.arange(1, budget + 1, dtype=float)
        theirs = np.cumsum(x, axis=1) / counts
        spread = np.maximum(np.cumsum(x * x, axis=1) - counts * theirs ** 2, 0.0)
        centre, other, kept = theirs[:, looks], spread[:, looks] / (n - 1) / n, n
    else:
        x = rng.normal(0.0, ratio, (PATHS, reference))
        centre, other = x.mean(axis=1)[:, None], x.var(axis=1, ddof=1)[:, None] / reference
        kept = np.full_like(n, float(reference))
    total = var + other
    df = total ** 2 / (var ** 2 / (n - 1) + other ** 2 / (kept - 1))
    return np.abs(mean - centre) / np.sqrt(total), df


def _crossing(level: float, stats: np.ndarray, df: np.ndarray, first: int, budget: int) -> float:
    """The share of simulated sequences some look of which calls the truth wrong at this level."""
    hit = np.zeros(len(stats), dtype=bool)
    for j in range(stats.shape[1]):
        hit |= stats[:, j] > t_quantiles(1.0 - level * (first + j) / budget / 2.0, df[:, j])
    return float(hit.mean())


def _level(stats: np.ndarray, df: np.ndarray, first: int, budget: int) -> float:
    """The level at which the looks together miss the truth ALPHA of the time (bisection: more level, more misses)."""
    low, high = 0.0, ALPHA
    for _ in range(STEPS):
        middle = (low + high) / 2
        low, high = (middle, high) if _crossing(middle, stats, df, first, budget) <= ALPHA else (low, middle)
    return low


@lru_cache(maxsize=64)
def design(first: int, budget: int, reference: int = 0) -> Design:
    """The rule for looks at ``first`` to ``budget`` runs (a single look: the fixed design's 5%), calibrated by
    simulation (seeded: the same looks give the same rule in every process)."""
    if budget <= first:
        return Design(first, max(budget, first), reference, ALPHA)
    ratios = RATIOS if reference else (1.0,)
    level = min(_level(*_paths(first, budget, reference, ratio, seed), first, budget)
                for seed, ratio in enumerate(ratios, 2026))
    return Design(first, budget, reference, level)


@dataclass(frozen=True)
class Side:
    """One results root read for looking: its scaling rows (training), each run's resamples and figures, its runs."""

    table: pd.DataFrame
    draws: dict[str, np.ndarray]
    points: dict[str, float]
    runs: pd.DataFrame

    @classmethod
    def read(cls, root: Any, salt: str) -> "Side":
        collection = collect([root])
        stats = run_stats_table(collection, salt=salt)
        return cls(scaling_table(collection, stats), stats.attrs.get("draws", {}), stats.attrs.get("points", {}),
                   collection.runs)

    def made_on(self, row: pd.Series, host: str) -> bool:
        """Whether every run of a configuration was made on ``host`` (so more of it can be made here, alongside)."""
        mine = self.runs[self.runs["run_id"].isin(str(row["runs"]).split(","))]
        return len(mine) > 0 and "host" in mine and set(mine["host"].astype(str)) == {host}

    def row(self, run_ids: list[str]) -> pd.Series | None:
        """The scaling row whose runs are these configuration's (None before any of them completed)."""
        wanted = set(run_ids)
        for _, row in self.table.iterrows():
            if wanted & set(str(row["runs"]).split(",")):
                return row
        return None

    def resampled(self, row: pd.Series) -> Resampled | None:
        return config_draws(str(row["runs"]).split(","), self.draws, points=self.points)


PAIRED = ("framework", "benchmark", "model", "np", "nodes", "independent")  # with the arguments, less run length


def counterpart(reference: Side, row: pd.Series) -> pd.Series | None:
    """The reference's configuration of the same work and size (arguments compared without run-length flags): the
    one started alike where there is one, else its fastest (as compare pairs offers)."""
    table = reference.table
    if table.empty:
        return None
    same = np.logical_and.reduce([table[k].astype(str) == str(row[k]) for k in PAIRED])
    same &= table["args"].map(measured_args) == measured_args(str(row["args"]))
    found = table[same]
    if found.empty:
        return None
    alike = found[(found["launcher"] == row["launcher"]) & (found["controller"] == row["controller"])]
    return (alike if len(alike) else found).sort_values("throughput", ascending=False).iloc[0]


@dataclass(frozen=True)
class Look:
    """What one look found for one configuration: its runs, the sequential interval (of its throughput, or of its
    ratio to the reference), whether that decides it, and the line that says so."""

    label: str
    runs: int
    value: float
    low: float
    high: float
    decided: bool
    finding: str
    line: str


def own_look(label: str, side: Side, row: pd.Series, rule: Design, margin: float) -> Look:
    """A configuration judged on its own: decided once its throughput's sequential interval lies within ±margin of
    its figure."""
    mine = side.resampled(row)
    runs = int(row["repeats"])
    if mine is None or runs < 2:
        return Look(label, runs, math.nan, math.nan, math.nan, False, "not judged", f"{label}: {runs} run(s), no "
                    "spread between runs yet")
    low, high = rule.interval(mine, runs)
    decided = low >= mine.value / (1.0 + margin) and high <= mine.value * (1.0 + margin)
    said = (f"within {margin_text(margin)}: decided" if decided else
            f"±{(high / low) ** 0.5 - 1:.1%}, wider than {margin_text(margin)}: undecided")
    spread = spread_text(mine.spread)
    return Look(label, runs, mine.value, low, high, decided, "decided" if decided else "undecided",
                f"{label}: {runs} runs{f' (spread {spread})' if spread else ''}: {mine.value:,.1f} {row['unit']}/s "
                f"[{low:,.1f}–{high:,.1f}] {said}")


def against_look(label: str, side: Side, row: pd.Series, reference: Side, theirs: pd.Series, rule: Design,
                 margin: float, min_runs: int, names: tuple[str, str]) -> Look:
    """A configuration judged against the reference's: the finding of their ratio's sequential interval."""
    runs, base = int(row["repeats"]), int(theirs["repeats"])
    few = too_few_runs({names[0]: runs, names[1]: base}, min_runs)
    plain = ratio_draws(side.resampled(row), reference.resampled(theirs))
    ratio = look_ratio(plain, rule, runs)
    found = judge(ratio, margin, SPEED, names, few, advise=False)
    value = float(row["throughput"]) / float(theirs["throughput"])
    low, high = ratio.interval if ratio is not None else (math.nan, math.nan)
    said = found.verdict if found.finding == UNDECIDED else found.sentence()
    return Look(label, runs, value, low, high, found.decided, found.finding,
                f"{label}: {runs} run(s) against {base} of {names[1]}: {value:.2f}× [{low:.2f}–{high:.2f}] "
                f"{names[1]}: {said}{_so_far(found.finding, plain, low, high, margin, rule)}")


def _so_far(finding: str, plain: Resampled | None, low: float, high: float, margin: float, rule: Design) -> str:
    """What an undecided look's runs allow: the tie they could support (equivalence within the interval's own
    reach, against the margin asked) and about how many runs a side a fixed design would need to decide it."""
    if finding != UNDECIDED or plain is None or not (math.isfinite(low) and math.isfinite(high)) or low <= 0:
        return ""
    reach = max(high, 1.0 / low) - 1.0
    allow = f"; these runs allow equivalence within ±{reach:.1%} so far, not {margin_text(margin)}" \
        if low < 1.0 < high else ""
    more = runs_to_decide(plain, margin, plain.center)
    budget = rule.budget
    need = (f"; about {more:,} runs a side would likely decide it (a fixed design's count; the rule's last look asks "
            f"a little more){' — beyond the budget of ' + str(budget) if more > budget else ''}" if more is not None
            else "; no practical number of runs decides it (the ratio sits on the margin's edge)")
    return allow + need


def look_ratio(ratio: Resampled | None, rule: Design, runs: int) -> Resampled | None:
    """The ratio with its variance widened so that its ordinary 95% interval is the look's sequential one (what
    findings.judge then reads as it reads any interval)."""
    if ratio is None or not math.isfinite(ratio.df) or ratio.var <= 0:
        return ratio
    square = (rule.quantile(runs, ratio.df) / t_quantile(0.975, ratio.df)) ** 2
    parts = tuple((w, replace(part, var=part.var * square)) for w, part in ratio.parts)
    return replace(ratio, var=ratio.var * square, parts=parts)


