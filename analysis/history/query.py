"""Selecting runs from the history store: by system, host, workload, size, status, time window and tags, as a run
table (one row a run) that the command line prints, writes as CSV or JSON, and aggregates per configuration."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pandas as pd

from hvdbench.core.errors import UsageError
from .store import Store

UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
SELECTED: dict[str, str] = {
    "run_key": "string", "run_id": "string", "started": "float64", "system": "string", "host": "string",
    "framework": "string",
    "benchmark": "string", "model": "string", "np": "Int64", "nodes": "Int64", "status": "string", "unit": "string",
    "throughput": "float64", "ci_low": "float64", "ci_high": "float64", "steps": "Int64",
    "time_to_target_s": "float64", "converged": "boolean", "root": "string", "config": "string",
    "environment": "object", "tags": "object",
}


def moment(text: str, now: float | None = None) -> float:
    """``30d``, ``12h``, ``90m``, ``2w`` before now, or a date or date-time (ISO 8601, UTC unless it says), as a
    Unix time; anything else is a UsageError."""
    text = text.strip()
    ago = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhdw])", text)
    if ago:
        return (time.time() if now is None else now) - float(ago.group(1)) * UNITS_S[ago.group(2)]
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"{text!r}: not a time: give an age (30d, 12h, 2w) or a date (2026-11-01, "
                         "2026-11-01T08:00)") from None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


@dataclass(frozen=True)
class Selection:
    """Which runs: each given field must match (None: any); ``tags`` each key=value must be on the run."""

    system: str | None = None
    host: str | None = None
    benchmark: str | None = None
    model: str | None = None
    np: int | None = None
    status: str | None = None
    since: float | None = None
    until: float | None = None
    tags: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def where(self) -> tuple[str, list[Any]]:
        """The SQL condition and its parameters."""
        parts, values = [], []
        for name in ("system", "host", "benchmark", "model", "np", "status"):
            if getattr(self, name) is not None:
                parts.append(f"runs.{name} = ?")
                values.append(getattr(self, name))
        if self.since is not None:
            parts.append("runs.started >= ?")
            values.append(self.since)
        if self.until is not None:
            parts.append("runs.started < ?")
            values.append(self.until)
        for key, value in self.tags:
            parts.append("EXISTS (SELECT 1 FROM tags WHERE tags.run_key = runs.run_key AND tags.key = ? "
                         "AND tags.value = ?)")
            values += [key, value]
        return (" AND ".join(parts) or "1 = 1"), values


def select(store: Store, selection: Selection) -> pd.DataFrame:
    """The runs selected, oldest first, with their environment and tags as mappings."""
    where, values = selection.where()
    names = [name for name in SELECTED if name != "tags"]
    rows = store.query(f"SELECT {', '.join('runs.' + n for n in names)} FROM runs WHERE {where} "
                       "ORDER BY runs.started, runs.run_id, runs.run_key", values)
    table = pd.DataFrame(rows, columns=names)
    table["environment"] = [json.loads(text) if text else {} for text in table["environment"]]
    tags: dict[str, dict[str, str]] = {}
    if len(table):
        for run_key, key, value in store.query("SELECT run_key, key, value FROM tags ORDER BY run_key, key"):
            tags.setdefault(run_key, {})[key] = value
    table["tags"] = [tags.get(run_key, {}) for run_key in table["run_key"]]
    return table.astype(SELECTED)


def aggregate(runs: pd.DataFrame) -> pd.DataFrame:
    """Per system and configuration: its complete runs, the geometric mean of their throughputs, the spread
    between them (standard deviation of log throughput), and the first and last run's start."""
    ok = runs[(runs["status"] == "ok") & runs["throughput"].notna() & (runs["throughput"] > 0)]
    rows = []
    for (system, config), group in ok.groupby(["system", "config"], sort=True):
        logs = np.log(group["throughput"].astype(float).to_numpy())
        first = group.iloc[0]
        rows.append({"system": system, "benchmark": first["benchmark"], "model": first["model"], "np": first["np"],
                     "unit": first["unit"], "runs": len(group), "throughput": float(np.exp(logs.mean())),
                     "run_spread": float(logs.std(ddof=1)) if len(group) > 1 else np.nan,
                     "first": float(group["started"].min()), "last": float(group["started"].max()),
                     "config": config})
    columns = ["system", "benchmark", "model", "np", "unit", "runs", "throughput", "run_spread", "first", "last",
               "config"]
    return pd.DataFrame(rows, columns=columns)
