"""``history compare --a … --b …``: two selections of the store (two systems, last month and this one, before and
after an image) set against each other configuration by configuration, on whole runs, with the findings every
verdict speaks (analysis/findings.py: faster, slower, equivalent within ±m, undecided with what the runs could have
caught, not judged under --min-runs a side), and what differs in the environment between them. Runs to a quality
target are judged on their time to train by MLPerf's rule (core/time_to_train.py): every run that ended counts,
converged or not, and a side with no valid score is never called faster (not judged, each side's share said)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from hvdbench.core.errors import UsageError
from hvdbench.core.time_to_train import counts_as_run, not_comparable, score
from ..findings import SPEED, not_judged
from ..ratios import Resampled, too_few_runs
from ..verdicts.versus import differences, side as side_figure, verdict_draws, versus
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
    """What differs in the environment between the two sides' runs (versus.differences: ``driver 535 -> 550``)."""
    keys = sorted({k for env in [*a["environment"], *b["environment"]] for k in env} - set(NOT_TRACKED))
    return differences({k: [env.get(k) for env in a["environment"]] for k in keys},
                       {k: [env.get(k) for env in b["environment"]] for k in keys})


def _side(t: pd.DataFrame, column: str, intervals: bool) -> Resampled | None:
    """A side's runs as every B against A judges them (versus.py): by their execution keys, each run's figure with
    its within-run interval where kept (``intervals``), else the figure alone."""
    keys = [str(k) for k in t["run_key"]]
    values = t[column].astype(float).tolist()
    lows = t["ci_low"].astype(float).tolist() if intervals else values
    highs = t["ci_high"].astype(float).tolist() if intervals else values
    figures = {k: (v, lo, hi) for k, v, lo, hi in zip(keys, values, lows, highs)}
    return side_figure(keys, verdict_draws(figures), {k: v for k, (v, _, _) in figures.items()})


def _throughput(a: pd.DataFrame, b: pd.DataFrame, margin: float, min_runs: int) -> dict[str, Any]:
    """B's throughput over A's on whole runs, judged as every B against A is (versus.py)."""
    few = too_few_runs({"A": len(a), "B": len(b)}, min_runs, "hvdbench run … --repeats")
    ratio, finding = versus(_side(b, "throughput", True), _side(a, "throughput", True), margin, SPEED, ("A", "B"),
                            few)
    low, high = ratio.interval if ratio is not None else (np.nan, np.nan)
    means = [float(np.exp(np.log(t["throughput"].astype(float)).mean())) for t in (a, b)]
    return {"unit": a["unit"].iloc[0], "runs_a": len(a), "runs_b": len(b), "throughput_a": means[0],
            "throughput_b": means[1], "ratio": means[1] / means[0], "ratio_low": low, "ratio_high": high,
            "finding": finding.finding, "verdict": finding.sentence()}


def _to_target(a: pd.DataFrame, b: pd.DataFrame, margin: float, min_runs: int) -> dict[str, Any]:
    """B's time to train over A's (above 1: slower), judged only where both sides have a valid score by MLPerf's
    rule, on the runs that converged."""
    scores = [score(t["time_to_target_s"].astype(float).tolist(), t["converged"].fillna(False).astype(bool).tolist())
              for t in (a, b)]
    void = not_comparable(scores[0], scores[1], ("A", "B"))
    done = [t[t["converged"].fillna(False).astype(bool)] for t in (a, b)]
    few = too_few_runs({"A": len(done[0]), "B": len(done[1])}, min_runs, "hvdbench run … --repeats")
    ratio, finding = (None, not_judged(void)) if void else versus(
        _side(done[1], "time_to_target_s", False) if len(done[1]) else None,
        _side(done[0], "time_to_target_s", False) if len(done[0]) else None, margin, ("slower", "faster"),
        ("A", "B"), few)
    low, high = ratio.interval if ratio is not None else (np.nan, np.nan)
    means = [float(np.exp(np.log(t["time_to_target_s"].astype(float)).mean())) if len(t) else np.nan for t in done]
    shares = "" if void or all(s.converged == s.runs for s in scores) else \
        f" (A: {scores[0].share()}; B: {scores[1].share()})"
    return {"unit": "s to target", "runs_a": len(a), "runs_b": len(b), "throughput_a": means[0],
            "throughput_b": means[1], "ratio": means[1] / means[0] if len(done[0]) and len(done[1]) else np.nan,
            "ratio_low": low, "ratio_high": high, "finding": finding.finding, "verdict": finding.sentence() + shares}


def _kept(t: pd.DataFrame) -> pd.DataFrame:
    """A side's runs that count: complete runs with a throughput, and runs to a target that ended."""
    to_target = t["converged"].notna() if "converged" in t else pd.Series(False, index=t.index)
    measured = (t["status"] == "ok") & t["throughput"].notna() & (t["throughput"] > 0)
    kept = t[measured | (to_target & t["status"].map(counts_as_run).astype(bool))]
    return kept.assign(work=kept["config"].map(_work))


def compare_table(a: pd.DataFrame, b: pd.DataFrame, margin: float, min_runs: int) -> pd.DataFrame:
    """One row a configuration with runs on both sides: B's throughput over A's (or, for runs to a quality target,
    its time to train over A's), its interval on whole runs (Student's t, Welch), the finding, each side's systems
    and what differs in their environment."""
    rows = []
    ok_a, ok_b = _kept(a), _kept(b)
    for work in sorted(set(ok_a["work"]) & set(ok_b["work"])):
        runs_a, runs_b = ok_a[ok_a["work"] == work], ok_b[ok_b["work"] == work]
        to_target = bool(runs_a["converged"].notna().any() or runs_b["converged"].notna().any())
        judged = (_to_target if to_target else _throughput)(runs_a, runs_b, margin, min_runs)
        first = runs_a.iloc[0]
        rows.append({"benchmark": first["benchmark"], "model": first["model"], "np": first["np"], **judged,
                     "systems": f"{'/'.join(sorted(set(runs_a['system'])))} | "
                                f"{'/'.join(sorted(set(runs_b['system'])))}",
                     "differs": _differs(runs_a, runs_b), "work": work})
    return pd.DataFrame(rows, columns=COMPARE_COLUMNS)
