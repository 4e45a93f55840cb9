"""A report section that is one table, as one descriptor declared beside its builder (analysis/tables/X.py): the
name its CSV and Parquet take, its title and text, how its rows read, how it is built from what every section reads
(``Inputs``), and which of its columns a narrow page folds. The report's build() walks lists of them; a section with
rows of its own making (the headline, the decision, the matrices) stays a function there."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import pandas as pd

from .collect import Collection
from .document import Report
from .formatting import Rows


@dataclass(frozen=True)
class Inputs:
    """What table sections are built from: the collected runs, their statistics, the scaling table of training runs
    and that of the input pipelines timed alone (--data-only), and how verdicts are reached."""

    collection: Collection
    stats: pd.DataFrame
    table: pd.DataFrame
    pipelines: pd.DataFrame
    margin: float
    min_runs: int
    baseline: str | None = None  # the system others are set against (--baseline, else the first root's)
    built: dict[str, pd.DataFrame] = field(default_factory=dict, compare=False)  # tables two parts read, built once

    def once(self, name: str, build: Callable[[Inputs], pd.DataFrame]) -> pd.DataFrame:
        """The table ``name``, built the first time a part asks for it and the same object after."""
        if name not in self.built:
            self.built[name] = build(self)
        return self.built[name]

    @property
    def draws(self) -> dict:
        """Each run's bootstrap resamples (the intervals' source)."""
        return self.stats.attrs.get("draws", {})

    @property
    def points(self) -> dict | None:
        """Each run's own figure, where the resamples are centred on it."""
        return self.stats.attrs.get("points")


@dataclass(frozen=True)
class Terminal:
    """What a part says on the terminal after a report: blocks under the headline tables, one-line notes at the end."""

    blocks: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TableSection:
    """One table and the section that shows it, where it has rows."""

    name: str
    title: str
    text: str
    rows: Callable[[pd.DataFrame], Rows]
    build: Callable[[Inputs], pd.DataFrame]
    folded: tuple[int, ...] = ()  # columns a narrow page folds away
    banner: Callable[[pd.DataFrame], list[str]] | None = None  # what a reader must see before the table, if anything
    terminal: Callable[[Report], Terminal] | None = None  # what it says on the terminal (report/terminal.py)
