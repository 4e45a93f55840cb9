"""How ``hvdbench history`` prints its tables: as text (one layout an action), CSV (cells made safe for a
spreadsheet) or JSON records."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from typing import Any

import pandas as pd

from hvdbench.analysis.document import csv_safe, text_table

SHOWN = ("started", "system", "benchmark", "model", "np", "status", "throughput", "interval", "unit", "host", "run_id")


def when(value: Any) -> str:
    return "-" if pd.isna(value) else datetime.fromtimestamp(float(value), timezone.utc).strftime("%Y-%m-%d %H:%M")


def cell(value: Any) -> str:
    return "-" if value is None or pd.isna(value) else str(value)


def number(value: Any) -> str:
    return "-" if pd.isna(value) else f"{float(value):,.4g}" if abs(float(value)) < 1000 else f"{float(value):,.0f}"


def print_table(table: pd.DataFrame, form: str, action: str) -> None:
    """The table as text, CSV (cells made safe for a spreadsheet) or JSON records."""
    if form == "json":
        records = json.loads(table.to_json(orient="records"))
        json.dump(records, sys.stdout, indent=1)
        print()
    elif form == "csv":
        flat = table.copy()
        for column in ("environment", "tags", "roots", "detail", "run_ids"):
            if column in flat:
                flat[column] = [json.dumps(v, sort_keys=True) for v in flat[column]]
        csv_safe(flat).to_csv(sys.stdout, index=False)
    elif action == "check":
        rows = [[cell(r.system), cell(r.benchmark), cell(r.model), cell(r.np), str(r.runs),
                 "-" if pd.isna(r.change_started) else f"{when(r.change_started)} ({cell(r.change_run)})",
                 "-" if pd.isna(r.ratio_low) else f"{r.ratio:.3f} [{r.ratio_low:.3f}–{r.ratio_high:.3f}]",
                 cell(r.verdict), cell(r.changed) or "-"] for r in table.itertuples()]
        print(text_table(["system", "benchmark", "model", "np", "runs", "latest change (first run after)",
                          "after / before", "finding", "environment changed then"], rows))
    elif action == "aggregate":
        rows = [[cell(r.system), cell(r.benchmark), cell(r.model), cell(r.np), str(r.runs), number(r.throughput),
                 "-" if pd.isna(r.run_spread) else f"±{100 * r.run_spread:.1f}%", cell(r.unit), when(r.first),
                 when(r.last)] for r in table.itertuples()]
        print(text_table(["system", "benchmark", "model", "np", "runs", "throughput", "spread", "unit", "first",
                          "last"], rows))
    else:
        rows = [[when(r.started), cell(r.system), cell(r.benchmark), cell(r.model), cell(r.np), cell(r.status),
                 number(r.throughput),
                 "-" if pd.isna(r.ci_low) else f"[{number(r.ci_low)}–{number(r.ci_high)}]", cell(r.unit),
                 cell(r.host), cell(r.run_id)] for r in table.itertuples()]
        print(text_table(list(SHOWN), rows))
