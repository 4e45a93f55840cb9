"""How systems are judged against each other, every option in one object that the report, compare, accept and
the history read (never beside it): the baseline, the change that counts, the runs a side needs, whether a spread
between runs is borrowed, prices, costs, the buyer's weights and the window of start times judged."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..findings import MARGIN
from ..ratios import MIN_RUNS
from ..selection import Window
from .costs import Cost


@dataclass(frozen=True)
class Judging:
    """How systems are judged against each other: the baseline (None: the first root's system, else the first by
    name), the change that counts (``margin``), the complete runs a side needs (``min_runs``), whether a side with
    fewer borrows its system's spread between runs from its other configurations (``borrow_spread``), prices per
    GPU-hour, a costs file and the buyer's weights; ``first_given``: the first results root's system; ``window``: the
    start times of the runs judged (the others left out, said)."""

    baseline: str | None = None
    margin: float = MARGIN
    min_runs: int = MIN_RUNS
    borrow_spread: bool = False
    prices: dict[str, float] = field(default_factory=dict)
    costs: dict[str, Cost] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    first_given: str | None = None
    window: Window = Window()  # the start times the runs judged may have (--runs-since, --runs-until)
