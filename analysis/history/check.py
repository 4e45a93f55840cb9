"""``history check``: each configuration's runs judged against its own history (analysis/history/changes.py), with
the first run after its latest change and what changed in the environment then; and the environment's changes
along a history, which the trend pages mark. Runs to a quality target are judged on their pace to it (1 / time to
target: a regression is a slower time to train) and on whether they still converge (MLPerf's rule, core/time_to_train:
the latest WINDOW runs with no valid score where the runs before had one is a regression, said), throughput runs on
throughput."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from hvdbench.core.time_to_train import counts_as_run, score

from ..findings import CHANGE, NOT_JUDGED, UNDECIDED, Finding
from .changes import NO_CHANGE, History, judge_history

REGRESSION = CHANGE[1]
NEAR = 2  # runs from a change point within which an environment change is said with it
WINDOW = 5  # the latest runs to a target whose converged share is judged: as many as an MLPerf ResNet-50 result
NOT_TRACKED = ("host", "hvdbench_version")  # environment keys that change without changing the system measured
CHECK_COLUMNS = ["system", "benchmark", "model", "np", "unit", "metric", "runs", "finding", "verdict", "change_run",
                 "change_started", "ratio", "ratio_low", "ratio_high", "runs_before", "runs_after", "changed",
                 "changes", "config"]


def environment_changes(environments: list[dict[str, Any]]) -> list[tuple[int, dict[str, tuple[Any, Any]]]]:
    """Where a history's environment changed: (index of the first run with the new one, {key: (old, new)}); keys a
    run did not record are not changes."""
    out = []
    for i in range(1, len(environments)):
        before, now = environments[i - 1], environments[i]
        changed = {k: (before.get(k), now.get(k)) for k in sorted(set(before) | set(now))
                   if k not in NOT_TRACKED and before.get(k) is not None and now.get(k) is not None
                   and before.get(k) != now.get(k)}
        if changed:
            out.append((i, changed))
    return out


def changed_text(changed: dict[str, tuple[Any, Any]]) -> str:
    """``driver 535.104 → 550.54; nccl 2.19 → 2.21``."""
    return "; ".join(f"{k} {old} → {new}" for k, (old, new) in changed.items())


def near_change(environments: list[dict[str, Any]], at: int, within: int = NEAR) -> str:
    """The environment's changes at a change point (the first run after it: ``at``), or within ``within`` runs of it
    (where a change in pace shows a run or two from where it began), each said with how far from it."""
    said = []
    for index, changed in environment_changes(environments):
        if abs(index - at) <= within:
            away = index - at
            where = "" if away == 0 else f" ({abs(away)} run(s) {'before' if away < 0 else 'after'} it)"
            said.append(changed_text(changed) + where)
    return "; ".join(said)


TO_TARGET = "time to target"


def configurations(runs: pd.DataFrame) -> list[pd.DataFrame]:
    """Each system's configurations' complete runs with a throughput, and its runs to a quality target that ended
    (converged or not: a timeout is a run that did not converge), oldest first."""
    to_target = runs["converged"].notna() if "converged" in runs else pd.Series(False, index=runs.index)
    measured = (runs["throughput"].notna() & (runs["throughput"] > 0)) | to_target
    ended = (runs["status"] == "ok") | (to_target & runs["status"].map(counts_as_run).astype(bool))
    ok = runs[ended & measured]
    return [group.sort_values(["started", "run_id"]) for _, group in ok.groupby(["system", "config"], sort=True)]


def paced(group: pd.DataFrame) -> tuple[str, pd.DataFrame, pd.Series]:
    """What a configuration's history is judged on, higher better: runs to a target by their pace to it (1 / the
    time to target; the runs that did not converge left out and counted), the others by throughput."""
    if "converged" in group and group["converged"].notna().any():
        done = group[group["converged"].fillna(False).astype(bool) & (group["time_to_target_s"] > 0)]
        return TO_TARGET, done, 1.0 / done["time_to_target_s"].astype(float)
    return "throughput", group, group["throughput"].astype(float)


def stopped_converging(group: pd.DataFrame) -> str:
    """Why a configuration's runs to a target stopped converging: its latest WINDOW runs have no valid score by
    MLPerf's rule while the runs before them had one ("" where not so)."""
    if "converged" not in group or not group["converged"].notna().any() or len(group) < 2 * WINDOW:
        return ""
    ok = group["converged"].fillna(False).astype(bool).tolist()
    times = group["time_to_target_s"].astype(float).tolist()
    latest, before = score(times[-WINDOW:], ok[-WINDOW:]), score(times[:-WINDOW], ok[:-WINDOW])
    if not latest.void or before.void:
        return ""
    return (f"stopped converging: {latest.share()} of the latest {WINDOW} ({latest.why}); {before.share()} of the "
            f"{before.runs} before")


def judged_configuration(every: pd.DataFrame, margin: float, accepted: set[str] | frozenset[str] = frozenset()
                         ) -> tuple[str, pd.DataFrame, History]:
    """One configuration's runs judged as every history command judges them (check, publish): its metric, the runs
    its pace rests on, and the finding of its latest stretch (a configuration that stopped converging regressed)."""
    metric, group, pace = paced(every)
    stopped = stopped_converging(every)
    if stopped:
        return metric, group, History(len(every), finding=Finding(REGRESSION, f"{REGRESSION}: {stopped}"))
    kept = group["run_key"].isin(accepted).to_numpy() if "run_key" in group else np.zeros(len(group), bool)
    spans = (group["ci_low"].astype(float).to_numpy(), group["ci_high"].astype(float).to_numpy()) \
        if metric == "throughput" and {"ci_low", "ci_high"} <= set(group) else None
    keys = [str(k) for k in group["run_key"]] if "run_key" in group else None
    return metric, group, judge_history(pace.to_numpy(), margin, pace.to_numpy()[kept] if kept.sum() >= 2 else None,
                                        spans, keys)


def check_table(runs: pd.DataFrame, margin: float, accepted: set[str] | frozenset[str] = frozenset()) -> pd.DataFrame:
    """One row a configuration: the finding of its latest stretch (against the stretch before it, and against its
    first stretch or its accepted baseline: the runs of it an accept verdict passed, ``accepted`` by run key), no
    change, or not judged (too short a history); the first run after the change and the environment's change between
    the run before it and that run."""
    rows = []
    for every in configurations(runs):
        metric, group, judged = judged_configuration(every, margin, accepted)
        first = every.iloc[0]
        unconverged = len(every) - len(group)
        row: dict[str, Any] = {"system": first["system"], "benchmark": first["benchmark"], "model": first["model"],
                               "np": first["np"], "unit": first["unit"] if metric == "throughput" else "1/s",
                               "metric": metric + (f" ({unconverged} run(s) not converged: out of the pace, in the "
                                                   "converged share)" if unconverged else ""), "runs": judged.runs,
                               "finding": judged.finding.finding, "verdict": judged.finding.sentence(),
                               "ratio": judged.ratio, "ratio_low": judged.low, "ratio_high": judged.high,
                               "runs_before": judged.before, "runs_after": judged.after,
                               "changes": len(judged.changes), "config": first["config"]}
        if judged.changes:
            at = judged.changes[-1]
            row.update(change_run=group.iloc[at]["run_id"], change_started=group.iloc[at]["started"],
                       changed=near_change(list(group["environment"]), at))
        rows.append(row)
    return pd.DataFrame(rows, columns=CHECK_COLUMNS)


def exit_status(table: pd.DataFrame) -> int:
    """1 where any configuration's latest change is a regression; else 4 where any is not judged or undecided; else
    0 (no change, an improvement, or a change within the margin)."""
    findings = set(table["finding"])
    if REGRESSION in findings:
        return 1
    return 4 if findings & {NOT_JUDGED, UNDECIDED} else 0


def summary(table: pd.DataFrame) -> str:
    """``3 configuration(s): 1 regression, 2 no change``."""
    counts = table["finding"].value_counts()
    order = [REGRESSION, CHANGE[0], UNDECIDED, NO_CHANGE, NOT_JUDGED]
    said = [f"{counts[k]} {k}" for k in order if k in counts] + [f"{n} {k}" for k, n in counts.items()
                                                                  if k not in order]
    return f"{len(table)} configuration(s): " + ", ".join(said)
