"""``history compare --a … --b …``: two selections of the store (two systems, last month and this one, before and
after an image) set against each other configuration by configuration, on whole runs, with the findings every
verdict speaks (analysis/findings.py: faster, slower, equivalent within ±m, undecided with what the runs could have
caught, not judged under --min-runs a side), and what differs in the environment between them."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from hvdbench.core.errors import UsageError
from ..findings import SPEED, judge
from ..ratios import combined, too_few_runs
from .changes import runs_of
from .check import NOT_TRACKED
from hvdbench.core.tags import tag_pair
from .query import Selection, moment

PAIRED_BY = "config"  # the configuration key, its system left out: the same work on either side
COMPARE_COLUMNS = ["benchmark", "model", "np", "unit", "runs_a", "runs_b", "throughput_a", "throughput_b", "ratio",
                   "ratio_low", "ratio_high", "finding", "verdict", "systems", "differs", "work"]


def side(text: str, base: Selection) -> Selection:
    """``system=dgx-a,since=60d,until=30d,tag.image=ngc-24.04`` on top of the filters both sides share."""
    fields: dict[str, Any] = {}
    tags = list(base.tags)
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not value:
            raise UsageError(f"side {text!r}: give key=value pairs separated by commas (system, host, benchmark, "
                             "model, np, status, since, until, tag.KEY)")
        if key in ("system", "host", "benchmark", "model", "status"):
            fields[key] = value
        elif key == "np":
            if not value.isdigit() or int(value) < 1:
                raise UsageError(f"side {text!r}: np={value!r} is not a rank count")
            fields["np"] = int(value)
        elif key in ("since", "until"):
            fields[key] = moment(value)
        elif key.startswith("tag."):
            tags.append(tag_pair(f"{key[4:]}={value}"))
        else:
            raise UsageError(f"side {text!r}: {key!r} is not one of system, host, benchmark, model, np, status, "
                             "since, until, tag.KEY")
    return replace(base, tags=tuple(tags), **fields)


def _work(config: str) -> str:
    """A configuration key without its system: what pairs the same work on two systems."""
    data = json.loads(config)
    data.pop("system", None)
    return json.dumps(data, sort_keys=True)


def _differs(a: pd.DataFrame, b: pd.DataFrame) -> str:
    """Environment values every run of one side shares and the other side's runs do not (``driver 535 | 550``)."""
    out = []
    keys = sorted({k for env in [*a["environment"], *b["environment"]] for k in env} - set(NOT_TRACKED))
    for key in keys:
        left = sorted({str(env.get(key)) for env in a["environment"]})
        right = sorted({str(env.get(key)) for env in b["environment"]})
        if left != right:
            out.append(f"{key} {'/'.join(left)} | {'/'.join(right)}")
    return "; ".join(out)


def compare_table(a: pd.DataFrame, b: pd.DataFrame, margin: float, min_runs: int) -> pd.DataFrame:
    """One row a configuration with complete runs on both sides: B's throughput over A's, its interval on whole runs
    (Student's t, Welch), the finding, each side's systems and what differs in their environment."""
    rows = []
    ok_a, ok_b = (t[(t["status"] == "ok") & t["throughput"].notna() & (t["throughput"] > 0)] for t in (a, b))
    ok_a, ok_b = ok_a.assign(work=ok_a["config"].map(_work)), ok_b.assign(work=ok_b["config"].map(_work))
    for work in sorted(set(ok_a["work"]) & set(ok_b["work"])):
        runs_a, runs_b = ok_a[ok_a["work"] == work], ok_b[ok_b["work"] == work]
        logs_a = np.log(runs_a["throughput"].astype(float).to_numpy())
        logs_b = np.log(runs_b["throughput"].astype(float).to_numpy())
        few = too_few_runs({"A": len(logs_a), "B": len(logs_b)}, min_runs, "hvdbench run … --repeats")
        # B over A, its parts in the order the finding names them (each side's spread said with its name)
        ratio = combined([(-1.0, runs_of(logs_a)), (1.0, runs_of(logs_b))]) if min(len(logs_a), len(logs_b)) > 1 \
            else None
        finding = judge(ratio, margin, SPEED, ("A", "B"), few=few)
        low, high = ratio.interval if ratio is not None else (np.nan, np.nan)
        first = runs_a.iloc[0]
        rows.append({"benchmark": first["benchmark"], "model": first["model"], "np": first["np"],
                     "unit": first["unit"], "runs_a": len(logs_a), "runs_b": len(logs_b),
                     "throughput_a": float(np.exp(logs_a.mean())), "throughput_b": float(np.exp(logs_b.mean())),
                     "ratio": float(np.exp(logs_b.mean() - logs_a.mean())), "ratio_low": low, "ratio_high": high,
                     "finding": finding.finding, "verdict": finding.sentence(),
                     "systems": f"{'/'.join(sorted(set(runs_a['system'])))} | "
                                f"{'/'.join(sorted(set(runs_b['system'])))}",
                     "differs": _differs(runs_a, runs_b), "work": work})
    return pd.DataFrame(rows, columns=COMPARE_COLUMNS)
