"""The decision between offers: each workload measured on two systems paired (configurations that differ only in run
length are the same measurement), every other system against the baseline the buyer chose, the ratio with its 95%
interval (runs and steps resampled: ratios.py) and its finding (analysis/findings.py): faster or slower where the
interval clears the margin, equivalent within ±margin where it lies inside it, undecided otherwise (with what the runs
could have caught and the runs a side that would decide it), not judged where a side has fewer complete runs than
--min-runs (the spread between runs unknown) unless that spread is borrowed (--borrow-spread); the cost per sample
judged the same way; what was measured on one system only listed beside the nearest configuration on the other, with
what differs."""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from hvdbench.core.errors import UsageError
from hvdbench.core.validate import read_toml_table, text_problem

from .costs import CAPITAL_ONLY
from ..findings import (COST, EQUIVALENT, NOT_JUDGED, SPEED, UNDECIDED, Finding, judge, margin_text, not_judged,
                        tie_call_chance)
from ..ratios import MIN_RUNS, Resampled, combined, direction, too_few_runs

UNPAIRED_SCHEMA: dict[str, str] = {"system": "string", "workload": "string", "np": "int64", "nearest": "string",
                                   "differs": "string"}
DECISION_SCHEMA: dict[str, str] = {
    "system": "string", "baseline": "string", "workload": "string", "framework": "string", "benchmark": "string",
    "model": "string", "args": "string", "np": "int64", "on_gpu": "bool", "ratio": "float64", "low": "float64",
    "high": "float64", "verdict": "string", "finding": "string", "why": "string", "detectable": "float64",
    "runs_to_decide": "Int64", "runs": "int64", "baseline_runs": "int64", "system_spread": "float64",
    "baseline_spread": "float64", "within_run": "bool", "spread": "string", "cost_ratio": "float64",
    "cost_low": "float64", "cost_high": "float64", "cost_verdict": "string", "cost_finding": "string", "row": "int64",
    "tie_call": "float64",
}


def verdict(low: float, high: float, margin: float, words: tuple[str, str] = SPEED) -> str:
    """An interval's finding in words alone (analysis/findings.py judges a ratio with what it could have caught):
    ``words[0]`` (faster) where the whole interval clears 1 + ``margin``, ``words[1]`` (slower) where it stays under
    1 / (1 + ``margin``), "equivalent within ±2%" where it lies inside the margin, else "undecided"; "not judged"
    where there is no interval (too few steps). One rule both ways: A 0.80× B is slower exactly when B 1.25× A is
    faster."""
    side = direction(low, high, margin)
    if side is None:
        return f"{NOT_JUDGED} (no interval: too few steps)"
    if side == "within":
        inside = low >= 1.0 / (1.0 + margin) and high <= 1.0 + margin
        return f"{EQUIVALENT} within {margin_text(margin)}" if inside else UNDECIDED
    return words[0] if side == "above" else words[1]


def ranks_text(np_: int, on_gpu: bool) -> str:
    """``8 GPUs``, or for ranks that trained on CPUs ``2 CPU ranks (not a GPU result)``."""
    if on_gpu:
        return f"{np_} GPU{'s' if np_ != 1 else ''}"
    return f"{np_} CPU rank{'s' if np_ != 1 else ''} (not a GPU result)"


def short_name(row: Any) -> str:
    """A workload in a few words: model, batch size and precision (``resnet50 b64 amp``); the full arguments stand
    beside it."""
    batch = getattr(row, "batch_size", None)
    precision = getattr(row, "precision", None)
    parts = [str(row.model)]
    if batch is not None and not pd.isna(batch):
        parts.append(f"b{int(batch)}")
    parts.append(str(precision) if isinstance(precision, str) and precision else "fp32")
    return " ".join(parts)


def _tokens(args: str) -> list[str]:
    """A run's arguments as tokens; text no shell could split (an unmatched quote) split at spaces instead."""
    try:
        return shlex.split(args)
    except ValueError:
        return args.split()


def decision_table(compared: pd.DataFrame, margin: float, min_runs: int = MIN_RUNS) -> pd.DataFrame:
    """One row per workload, size and system against the baseline: the ratio with its interval and finding, what the
    runs could have caught and the runs a side that would decide an undecided one, the runs and spread between runs each
    side rests on, and where costs were given the cost per sample's ratio and finding. A side with fewer than
    ``min_runs`` complete runs is "not judged" unless a spread between runs was borrowed for it."""
    baseline = str(compared.attrs.get("baseline", ""))
    draws: dict[int, Resampled] = compared.attrs.get("ratio_draws", {})
    rows = []
    for i, row in compared.iterrows():
        if row["system"] == baseline:
            continue
        ratio, low, high = float(row["relative"]), float(row["relative_low"]), float(row["relative_high"])
        runs, base_runs = int(row["repeats"]), row["baseline_repeats"]
        base_runs = 0 if pd.isna(base_runs) else int(base_runs)
        borrowed = str(row["spread"] or "") if "spread" in row else ""
        few = "" if borrowed else too_few_runs({row["system"]: runs, baseline: base_runs}, min_runs)
        drawn = draws.get(int(str(i)))
        names = (str(row["system"]), baseline)
        found = (not_judged(f"{baseline} did not measure it") if not math.isfinite(ratio) else
                 judge(drawn, margin, SPEED, names, few))
        cost = _cost(compared, row, baseline)
        unknown = _energy_unknown(compared, row, baseline)
        uncosted = _uncosted(compared, row, baseline) if cost is None else ""
        cost_found = (not_judged(uncosted) if uncosted else None if cost is None else found if not found.judged else
                      not_judged(f"{unknown}'s energy unknown (capital only)") if unknown else
                      judge(drawn, margin, COST, names, scale=cost[0] * ratio, invert=True))
        spreads = found.spreads or (math.nan, math.nan)
        rows.append({"system": row["system"], "baseline": baseline, "workload": short_name(row),
                     "framework": row["framework"], "benchmark": row["benchmark"], "model": row["model"],
                     "args": row["args"], "np": int(row["np"]), "on_gpu": bool(row.get("on_gpu", True)),
                     "ratio": ratio, "low": low, "high": high, "verdict": found.verdict, "finding": found.finding,
                     "why": found.why, "detectable": found.detectable, "runs_to_decide": found.runs_to_decide,
                     "runs": runs, "baseline_runs": base_runs, "system_spread": spreads[0],
                     "baseline_spread": spreads[1], "within_run": min(runs, base_runs) < 2 and not borrowed,
                     "spread": borrowed, "cost_ratio": math.nan if cost is None else cost[0],
                     "cost_low": math.nan if cost is None else cost[1],
                     "cost_high": math.nan if cost is None else cost[2],
                     "cost_verdict": "" if cost_found is None else cost_found.verdict,
                     "cost_finding": "" if cost_found is None else cost_found.finding, "row": int(str(i)),
                     "tie_call": tie_call_chance(drawn, margin) if found.judged else math.nan})
    table = pd.DataFrame(rows, columns=list(DECISION_SCHEMA)).astype(DECISION_SCHEMA)
    return _unambiguous(table)


def finding_of(row: Any) -> Finding:
    """A decision row's finding as its columns hold it."""
    runs = None if pd.isna(row.runs_to_decide) else int(row.runs_to_decide)
    return Finding(row.finding, row.verdict, row.detectable, runs, (row.system_spread, row.baseline_spread),
                   row.why if isinstance(row.why, str) else "")


def _unambiguous(table: pd.DataFrame) -> pd.DataFrame:
    """Short names that stand for one workload each: where two workloads share one (the same model, batch and
    precision under two benchmarks or arguments), the benchmark goes first, then the arguments that differ."""
    if table.empty:
        return table
    for name, rows in table.groupby("workload"):
        if rows[["benchmark", "args"]].drop_duplicates().shape[0] > 1:
            table.loc[rows.index, "workload"] = rows["benchmark"] + " " + rows["workload"]
    for name, rows in table.groupby("workload"):
        if rows["args"].nunique() > 1:
            table.loc[rows.index, "workload"] = rows["workload"] + " (" + rows["args"] + ")"
    return table


def _uncosted(compared: pd.DataFrame, row: pd.Series, baseline: str) -> str:
    """Why a row has no cost verdict where the buyer gave costs: which side the costs file prices not; "" where no
    cost was given at all."""
    if "usd_per_million" not in compared or not compared["usd_per_million"].notna().any():
        return ""
    priced = set(compared.loc[compared["usd_per_million"].notna(), "system"])
    missing = [s for s in (str(row["system"]), baseline) if s not in priced]
    return (f"the costs file prices no {' or '.join(missing)}: no cost per sample to set against the other"
            if missing else "")


def _hour_price(row: pd.Series) -> float:
    """What the row's GPUs cost an hour, as its cost per million samples was figured."""
    return float(row["usd_per_million"]) * float(row["throughput"]) * 3600.0 / 1e6


def _cost(compared: pd.DataFrame, row: pd.Series, baseline: str) -> tuple[float, float, float] | None:
    """The cost per sample against the baseline's on the same workload and size, with its interval (prices are
    constants: the interval is the throughput ratio's, turned around); None where either has no cost."""
    if "usd_per_million" not in compared or not math.isfinite(float(row["usd_per_million"])):
        return None
    same = compared[(compared["system"] == baseline) & (compared["framework"] == row["framework"])
                    & (compared["benchmark"] == row["benchmark"]) & (compared["model"] == row["model"])
                    & (compared["args"] == row["args"]) & (compared["np"] == row["np"])]
    if same.empty or not math.isfinite(float(same["usd_per_million"].iloc[0])):
        return None
    prices = _hour_price(row) / _hour_price(same.iloc[0])
    relative, low, high = float(row["relative"]), float(row["relative_low"]), float(row["relative_high"])
    return prices / relative, prices / high, prices / low


def _energy_unknown(compared: pd.DataFrame, row: pd.Series, baseline: str) -> str:
    """The side(s) whose cost left energy out (no power recorded), in words; "" where both counted it."""
    if "energy_counted" not in compared:
        return ""
    same = compared[(compared["framework"] == row["framework"]) & (compared["benchmark"] == row["benchmark"])
                    & (compared["model"] == row["model"]) & (compared["args"] == row["args"])
                    & (compared["np"] == row["np"]) & compared["system"].isin([row["system"], baseline])]
    return " and ".join(same[same["energy_counted"] == CAPITAL_ONLY]["system"].astype(str))


def _interval_text(row: Any, low: str = "low", high: str = "high") -> str:
    lo, hi = getattr(row, low), getattr(row, high)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return ""
    return f" [{lo:.2f}–{hi:.2f}{', within-run only' if row.within_run else ''}]"


def decision_lines(decided: pd.DataFrame) -> list[str]:
    """One sentence per workload and system against the baseline: ``B is 1.83× [1.71–1.95] A on <workload> at 8
    GPUs: faster (could have caught ×1.06)``; an undecided one says what it could not tell (a figure from one run a
    side marked within-run only; a borrowed spread named)."""
    lines = []
    for row in decided.itertuples():
        workload = f"{row.framework} {row.benchmark} {row.model} {row.args}".strip()
        gpus = ranks_text(row.np, row.on_gpu)
        if not math.isfinite(row.ratio):
            lines.append(f"{row.system} on {workload} at {gpus}: {row.verdict}")
            continue
        lent = f" ({row.spread})" if row.spread else ""
        lines.append(f"{row.system} is {row.ratio:.2f}×{_interval_text(row)} {row.baseline} on {workload} at {gpus}: "
                     f"{finding_of(row).sentence()}{lent}")
    return lines


def cost_verdict_lines(decided: pd.DataFrame) -> list[str]:
    """Per costed workload: ``DGX costs 0.41× [0.37–0.46] L40S per million samples on ... : cheaper``; where costs
    were given but a side has none, why there is no cost verdict."""
    lines = []
    for row in decided[decided["cost_finding"].ne("")].itertuples():
        if not math.isfinite(row.cost_ratio):
            lines.append(f"{row.system}'s cost per million samples on {row.workload} at "
                         f"{ranks_text(row.np, row.on_gpu)}: {row.cost_verdict}")
            continue
        lines.append(f"{row.system} costs {row.cost_ratio:.2f}×{_interval_text(row, 'cost_low', 'cost_high')} "
                     f"{row.baseline} per million samples on {row.workload} at {ranks_text(row.np, row.on_gpu)}: "
                     f"{row.cost_verdict}")
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
            mine = set(_tokens(row.args))
            def distance(other: pd.Series) -> tuple[int, int]:
                return abs(int(other["np"]) - int(row.np)), -len(mine & set(_tokens(other["args"])))
            best = min((o for _, o in others.iterrows()), key=distance)
            nearest = f"{best['system']}: {best['model']} {best['args']} at {best['np']} GPU(s)".strip()
            shown = ["args" if name.endswith("_key") else name for name in key]  # the arguments as written
            differs = "; ".join(f"{name} {getattr(row, name)} vs {best[name]}" for name in shown
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


def _weighted_picks(decided: pd.DataFrame, system: str, weights: dict[str, float],
                    draws: dict[int, Resampled]) -> tuple[list[tuple[str, float, Any]], list[str]]:
    """Each weighted workload's rows at the largest size both systems measured with an interval, the workload's share
    split evenly over its configurations there (each named); and what keeps a workload out (unmeasured, or resting
    on too few runs)."""
    total = sum(weights.values())
    mine = decided[(decided["system"] == system) & decided["ratio"].notna()]
    picked: list[tuple[str, float, Any]] = []
    missing: list[str] = []
    for key, weight in weights.items():
        rows = mine[((mine["benchmark"] + " " + mine["model"]) == key) & mine["row"].isin(list(draws))]
        if rows.empty:
            missing.append(f"{key} not measured on both with an interval")
            continue
        rows = rows[rows["np"] == rows["np"].max()]
        unjudged = rows[rows["finding"] == NOT_JUDGED]
        if len(unjudged):
            missing.append(f"{key} at {ranks_text(int(unjudged['np'].iloc[0]), bool(unjudged['on_gpu'].iloc[0]))} "
                           f"{unjudged['verdict'].iloc[0].removeprefix(NOT_JUDGED + ': ')}")
            continue
        picked += [(key, weight / total / len(rows), row) for row in rows.itertuples()]
    return picked, missing


def _parts(picked: list[tuple[str, float, Any]]) -> str:
    """What a weighted figure weighs: ``imagenet resnet50 60% at 8 GPUs (resnet50 b64 fp32 30%, b128 30%)``."""
    out = []
    for key in dict.fromkeys(k for k, _, _ in picked):
        rows = [(share, row) for k, share, row in picked if k == key]
        head = f"{key} {sum(s for s, _ in rows):.0%} at {ranks_text(rows[0][1].np, rows[0][1].on_gpu)}"
        out.append(head + (" (" + ", ".join(f"{r.workload} {s:.0%}" for s, r in rows) + ")" if len(rows) > 1 else ""))
    return ", ".join(out)


@dataclass(frozen=True)
class Weighted:
    """A system's weighted figure against the baseline over the buyer's mix: speed or cost, the weighted geometric
    mean with its interval and verdict, what it weighs; ``missing`` (and a "not judged" verdict) where it cannot be
    had."""

    system: str
    baseline: str
    kind: str  # "speed" or "cost"
    value: float
    low: float
    high: float
    verdict: str
    parts: str
    missing: str = ""
    found: Finding | None = None  # the finding behind the verdict (None where missing)

    @property
    def finding(self) -> str:
        """The finding's word (the JSON field)."""
        return self.found.finding if self.found is not None else NOT_JUDGED

    def line(self) -> str:
        """The sentence: ``DGX against L40S, weighted (imagenet resnet50 100% at 8 GPUs): 1.32× [1.12–1.59]:
        faster (could have caught ×1.10)``."""
        what = "weighted" if self.kind == "speed" else "weighted cost per million samples"
        if self.missing:
            return f"{self.system} against {self.baseline}, {what}: {self.verdict} ({self.missing})"
        parts = f" ({self.parts})" if self.kind == "speed" else ""
        said = self.found.sentence() if self.found is not None else self.verdict
        return (f"{self.system} against {self.baseline}, {what}{parts}: {self.value:.2f}× "
                f"[{self.low:.2f}–{self.high:.2f}]: {said}")


def weighted_figures(decided: pd.DataFrame, draws: dict[int, Resampled], weights: dict[str, float],
                     margin: float) -> list[Weighted]:
    """Per system against the baseline: the weighted geometric mean of its ratios over the buyer's mix (each workload at
    the largest GPU count both systems measured; several configurations there share the workload's weight evenly),
    with the interval of the same mean over the resamples; the same for the cost per sample where costs were given.
    "not judged" naming what is missing where a weighted workload has no judged measurement."""
    out = []
    for system in sorted(set(decided["system"])):
        baseline = str(decided[decided["system"] == system]["baseline"].iloc[0])
        picked, missing = _weighted_picks(decided, system, weights, draws)
        if missing:
            out.append(Weighted(system, baseline, "speed", math.nan, math.nan, math.nan, NOT_JUDGED, "",
                                "; ".join(missing)))
            continue
        mix = combined([(share, draws[row.row]) for _, share, row in picked])  # sum of shares x log ratios
        low, high = mix.interval
        parts = _parts(picked)
        found = judge(mix, margin)
        out.append(Weighted(system, baseline, "speed", mix.value, low, high, found.verdict, parts, found=found))
        if all(math.isfinite(row.cost_ratio) for _, _, row in picked):
            if any(row.cost_finding in ("", NOT_JUDGED) for _, _, row in picked):
                out.append(Weighted(system, baseline, "cost", math.nan, math.nan, math.nan, NOT_JUDGED, parts,
                                    "a weighted workload's cost is not judged"))
                continue
            prices = math.exp(sum(share * math.log(row.cost_ratio * row.ratio) for _, share, row in picked))
            cost = judge(mix, margin, COST, scale=prices, invert=True)
            out.append(Weighted(system, baseline, "cost", prices / mix.value, prices / high, prices / low,
                                cost.verdict, parts, found=cost))
    return out


def weighted_table(weighted: list[Weighted]) -> pd.DataFrame:
    """The weighted figures as a table (weighted.csv, decision.json), each with its finding as a field."""
    return pd.DataFrame([{"system": w.system, "baseline": w.baseline, "kind": w.kind, "ratio": w.value, "low": w.low,
                          "high": w.high, "finding": w.finding, "verdict": w.verdict, "parts": w.parts,
                          "missing": w.missing,
                          "detectable": w.found.detectable if w.found is not None else math.nan,
                          "line": w.line()} for w in weighted])
