"""The decision between offers: each workload measured on two systems paired (configurations that differ only in run
length are the same measurement), every other system against the baseline the buyer chose, the ratio with its 95%
interval and a verdict in words; "no measurable difference" where the interval does not clear the margin; what was
measured on one system only listed beside the nearest configuration on the other, with what differs."""

from __future__ import annotations

import math
import shlex
from pathlib import Path

import numpy as np
import pandas as pd

from hvdbench.suite.core.errors import UsageError
from hvdbench.suite.core.metrics import percentile_interval
from hvdbench.suite.core.validate import read_toml_table, text_problem

NO_DIFFERENCE = "no measurable difference"
NOT_JUDGED = "not judged"
UNPAIRED_SCHEMA: dict[str, str] = {"system": "string", "workload": "string", "np": "int64", "nearest": "string",
                                   "differs": "string"}


def verdict(low: float, high: float, margin: float) -> str:
    """faster / slower where the ratio's whole 95% interval clears 1 by more than ``margin``, else "no measurable
    difference"; "not judged" where there is no interval (too few steps)."""
    if not (math.isfinite(low) and math.isfinite(high)):
        return f"{NOT_JUDGED} (no interval: too few steps)"
    if low > 1.0 + margin:
        return "faster"
    if high < 1.0 - margin:
        return "slower"
    return NO_DIFFERENCE


def ranks_text(np_: int, on_gpu: bool) -> str:
    """``8 GPUs``, or for ranks that trained on CPUs ``2 CPU ranks (not a GPU result)``."""
    if on_gpu:
        return f"{np_} GPU{'s' if np_ != 1 else ''}"
    return f"{np_} CPU rank{'s' if np_ != 1 else ''} (not a GPU result)"


def decision_lines(compared: pd.DataFrame, baseline: str, margin: float) -> list[str]:
    """One sentence per workload and system against the baseline: ``B is 1.83× [1.71–1.95] A on <workload> at 8
    GPUs: faster``."""
    lines = []
    for row in compared[compared["system"] != baseline].itertuples():
        workload = f"{row.framework} {row.benchmark} {row.model} {row.args}".strip()
        gpus = ranks_text(row.np, bool(getattr(row, "on_gpu", True)))
        if not math.isfinite(row.relative):
            lines.append(f"{row.system} on {workload} at {gpus}: {NOT_JUDGED} ({baseline} did not measure it)")
            continue
        said = verdict(row.relative_low, row.relative_high, margin)
        interval = (f" [{row.relative_low:.2f}–{row.relative_high:.2f}]" if math.isfinite(row.relative_low)
                    else "")
        lines.append(f"{row.system} is {row.relative:.2f}×{interval} {baseline} on {workload} at {gpus}: {said}")
    return lines


def unpaired_table(measured: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """Each configuration (``key`` columns of ``measured``: one row per system and configuration) that no other
    system measured, with the nearest configuration another system did (same benchmark, the closest GPU count,
    then the most arguments in common) and what differs."""
    rows = []
    counts = measured.groupby(key)["system"].transform("nunique")
    for row in measured[counts < 2].itertuples():
        others = measured[(measured["system"] != row.system) & (measured["benchmark"] == row.benchmark)]
        nearest, differs = "none: no other system ran this benchmark", ""
        if len(others):
            mine = set(shlex.split(row.args))
            def distance(other: pd.Series) -> tuple[int, int]:
                return abs(int(other["np"]) - int(row.np)), -len(mine & set(shlex.split(other["args"])))
            best = min((o for _, o in others.iterrows()), key=distance)
            nearest = f"{best['system']}: {best['model']} {best['args']} at {best['np']} GPU(s)".strip()
            differs = "; ".join(f"{name} {getattr(row, name)} vs {best[name]}" for name in key
                                if name != "system" and str(getattr(row, name)) != str(best[name]))
        workload = f"{row.framework} {row.benchmark} {row.model} {row.args}".strip()
        rows.append({"system": row.system, "workload": workload, "np": int(row.np), "nearest": nearest,
                     "differs": differs})
    return pd.DataFrame(rows, columns=list(UNPAIRED_SCHEMA)).astype(UNPAIRED_SCHEMA)


def load_weights(path: Path) -> dict[str, float]:
    """A weights file: ``[weights]`` with ``"BENCHMARK MODEL" = share`` (positive, finite; shares need not sum to 1,
    they are normalised); every problem one line naming the file and the key."""
    try:
        weights = read_toml_table(path, "a weights file", "weights", 'one [weights] table of "BENCHMARK MODEL" = share')
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for key, value in weights.items():
        problem = text_problem(key)
        if problem or len(key.split()) != 2:
            raise UsageError(f"{path}: weights.{key[:40]!r}: {problem or 'expected a benchmark and a model, e.g. '}"
                             + ("" if problem else '"imagenet resnet50"'))
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise UsageError(f"{path}: weights.{key}: expected a positive, finite share, got {value!r}")
    return {key: float(value) for key, value in weights.items()}


def weighted_lines(compared: pd.DataFrame, weights: dict[str, float], margin: float) -> list[str]:
    """Per system against the baseline: the weighted geometric mean of its ratios over the weighted workloads (each
    at the largest GPU count both systems measured), with the interval of the same mean over the resamples; "not
    judged" naming what is missing where a weighted workload has no paired measurement with an interval."""
    baseline, draws = compared.attrs.get("baseline"), compared.attrs.get("ratio_draws", {})
    total = sum(weights.values())
    lines = []
    for system in sorted(set(compared["system"]) - {baseline}):
        mine = compared[(compared["system"] == system) & compared["relative"].notna()]
        picked, missing = [], []
        for key, weight in weights.items():
            rows = mine[(mine["benchmark"] + " " + mine["model"]) == key].sort_values("np")
            rows = rows[[i in draws for i in rows.index]]
            if rows.empty:
                missing.append(key)
            else:
                picked.append((key, weight / total, rows.index[-1], int(rows["np"].iloc[-1])))
        if missing:
            lines.append(f"{system} against {baseline}, weighted: {NOT_JUDGED} ({', '.join(missing)} not measured on "
                         "both with an interval)")
            continue
        logs = sum(share * np.log(compared.loc[i, "relative"]) for _, share, i, _ in picked)
        resampled = np.exp(sum(share * np.log(draws[i]) for _, share, i, _ in picked))
        low, high = percentile_interval(resampled)
        parts = ", ".join(f"{key} {share:.0%} at {ranks_text(gpus, bool(compared.loc[i].get('on_gpu', True)))}"
                          for key, share, i, gpus in picked)
        lines.append(f"{system} against {baseline}, weighted ({parts}): {math.exp(logs):.2f}× [{low:.2f}–{high:.2f}]: "
                     f"{verdict(low, high, margin)}")
    return lines
