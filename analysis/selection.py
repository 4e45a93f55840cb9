"""Runs left out by when they started (``--runs-since``, ``--runs-until``): a noisy hour left out of a verdict
without deleting a folder. Each run outside the window keeps its folder and its row, marked ``left out`` with the
window and when it started as its reason (runs.csv, the report's Runs left out), so the record says what the
verdict stood on; a run that recorded no start time cannot be placed inside the window and is left out too."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pandas as pd

from hvdbench.core.errors import UsageError

from .collect import Collection

LEFT_OUT = "left out"  # a run's status outside the window (core/time_to_train.NOT_RUNS: no ended run either)
KEPT_CACHE = ("step_rows", "measured")  # what a collection derived from its files alone, whatever its runs' status


@dataclass(frozen=True)
class Window:
    """The start times a verdict's runs may have, in Unix seconds (None: open on that side)."""

    since: float | None = None
    until: float | None = None

    def __post_init__(self) -> None:
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise UsageError(f"--runs-since {_when(self.since)} is not before --runs-until {_when(self.until)}: no "
                             "run could be inside that window")

    @property
    def open(self) -> bool:
        """No side given: every run stays."""
        return self.since is None and self.until is None

    def describe(self) -> str:
        """The window in words, as the flags give it."""
        sides = [f"--runs-since {_when(self.since)}" if self.since is not None else "",
                 f"--runs-until {_when(self.until)}" if self.until is not None else ""]
        return " and ".join(s for s in sides if s)

    def outside(self, started: float | None) -> str | None:
        """Why a run started at ``started`` is outside the window (None: inside)."""
        if started is None or pd.isna(started):
            return f"left out by time: it recorded no start time, so it cannot be placed inside {self.describe()}"
        if self.since is not None and started < self.since:
            return f"left out by time: started {_when(started)}, before {self.describe()}"
        if self.until is not None and started >= self.until:
            return f"left out by time: started {_when(started)}, after {self.describe()}"
        return None


def _when(seconds: float) -> str:
    return f"{pd.Timestamp(seconds, unit='s'):%Y-%m-%d %H:%M:%S} UTC"


def by_time(collection: Collection, window: Window) -> Collection:
    """The collection with every run outside the window left out (its earlier status and reason kept in the
    reason); the same collection where the window is open."""
    if window.open:
        return collection
    runs = collection.runs.copy()
    for index, row in runs.iterrows():
        why = window.outside(row["started"])
        if why is None or row["status"] == LEFT_OUT:  # left out already: the same window applied twice
            continue
        earlier = "" if row["status"] == "ok" else f" (was {row['status']}: {row['reason']})"
        runs.at[index, "status"] = LEFT_OUT
        runs.at[index, "reason"] = why + earlier
    runs.attrs["window"] = window.describe()
    return replace(collection, runs=runs, cache={k: v for k, v in collection.cache.items() if k in KEPT_CACHE})


def window_line(collection: Collection) -> str:
    """The report's sentence on the window, where one left runs out."""
    window = collection.runs.attrs.get("window")
    if not window:
        return ""
    left = int((collection.runs["status"] == LEFT_OUT).sum())
    return f" Runs selected by {window}: {left} run(s) outside it left out, listed under Runs left out."
