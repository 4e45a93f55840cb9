"""Time to a quality target: how long training took to reach its accuracy, evaluation on the clock, per system,
workload and size, by MLPerf Training's rule (core/time_to_train.py, the one rule of hvdbench): every run to the
target that ended counts, converged or not (the epoch cap, a timeout, a failure, a lost node: did not converge);
MLCommons' score, the olympic mean times the folder's scaling.json factor (void where too many runs did not converge
or an MLPerf folder is not whole); the time to train as every figure here is given, the geometric mean of the runs
that converged with Student's 95% interval over them (the run level); and each system's time against the baseline's
on the same workload and size, judged in the findings every verdict speaks (analysis/findings.py; less time is
faster) only where both sides have a valid score, each side's converged share said."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from hvdbench.core.time_to_train import Score, counts_as_run, not_comparable, score

from ..document import Report, text_table
from ..findings import MARGIN, judge, not_judged
from ..formatting import Rows, fmt, missing
from ..keys import measured_args
from ..ratios import Resampled, config_draws, ratio_draws, too_few_runs
from ..stats import BOOTSTRAP_SAMPLES
from ..sections import Inputs, TableSection, Terminal
from .efficiency import on_cpu_ranks

KEY = ["system", "framework", "benchmark", "model", "work", "np", "nodes"]
QUALITY_SCHEMA: dict[str, str] = {
    "system": "string", "framework": "string", "benchmark": "string", "model": "string", "args": "string",
    "np": "int64", "nodes": "int64", "metric": "string", "target": "float64", "runs": "int64", "converged": "int64",
    "score_s": "float64", "olympic_s": "float64", "scaling_factor": "float64", "valid": "boolean", "void": "boolean",
    "olympic_why": "string", "not_converged": "string", "seconds": "float64", "low": "float64", "high": "float64",
    "spread": "float64", "best": "float64", "epochs": "float64", "global_batch": "Int64", "source": "string",
    "against": "string",
    "ratio": "float64", "ratio_low": "float64", "ratio_high": "float64", "finding": "string", "verdict": "string",
    "base_np": "Int64", "speedup": "float64", "speedup_low": "float64", "speedup_high": "float64",
    "hw_speedup": "float64", "hw_low": "float64", "hw_high": "float64", "stat_eff": "float64", "stat_low": "float64",
    "stat_high": "float64", "split_why": "string", "run_ids": "string", "on_cpu": "boolean", "base_runs": "Int64",
}
SPLIT = ("speedup", "hw", "stat")  # time to target's speedup = throughput's (hardware) x statistical efficiency
WORDS = ("slower", "faster")  # a time ratio above 1 took longer
MLPERF = "MLPerf"  # an imported result's quality source starts so


def _per_run(runs: pd.DataFrame, column: str) -> Resampled | None:
    """Runs' values of ``column`` (each run one value: its time or epochs to target) as a configuration's figure:
    their geometric mean, Student's interval over the runs (the spread between runs is all there is)."""
    ids = list(runs["run_id"])
    values = runs[column].astype(float).to_numpy()
    keep = [i for i, v in enumerate(values) if math.isfinite(v) and v > 0]
    if not keep:
        return None
    draws = {ids[i]: np.full(BOOTSTRAP_SAMPLES, values[i]) for i in keep}
    return config_draws([ids[i] for i in keep], draws, points={ids[i]: values[i] for i in keep})


def _geomean(values: pd.Series) -> float:
    """The geometric mean of the runs' positive values (what statistical efficiency's ratio is of: the figure shown
    beside it multiplies out), NaN where none."""
    logs = np.log(values.astype(float).to_numpy())
    logs = logs[np.isfinite(logs)]
    return float(np.exp(logs.mean())) if len(logs) else math.nan


def _best(group: pd.DataFrame) -> float:
    """The best value any run reached (the highest accuracy, the lowest loss)."""
    best = group["quality_best"].astype(float).dropna()
    if best.empty:
        return math.nan
    return float(best.min() if str(group["quality_metric"].iloc[0]) == "loss" else best.max())


def _first(group: pd.DataFrame, column: str) -> Any:
    given = group[column].dropna() if column in group else pd.Series(dtype=object)
    return given.iloc[0] if len(given) else None


def _scored(group: pd.DataFrame, ok: np.ndarray, imported: bool) -> Score:
    """The configuration's runs scored by MLPerf's rule: an imported result's by its benchmark (the runs it needs,
    the runs dropped) and scaled by its folder's factor; one's own as runs of no fixed number."""
    factor, required = _first(group, "scaling_factor"), _first(group, "required_runs")
    return score(list(group["time_to_target_s"].astype(float)), list(ok),
                 str(group["model"].iloc[0]) if imported else None,
                 float(factor) if factor is not None else 1.0, int(required) if imported and required else None)


def _missed(group: pd.DataFrame, ok: np.ndarray) -> str:
    """The runs that did not converge, by why: ``2 timeout: ...; 1 the epoch cap (4 epochs) came first``."""
    counts = group.loc[~ok, "target_missed"].fillna("it ended before its target").value_counts(sort=False)
    return "; ".join(f"{n} {why}" for why, n in counts.items())


def _row(group: pd.DataFrame) -> dict[str, Any]:
    """One configuration's runs to their target."""
    first = group.iloc[0]
    ok = group["converged"].fillna(False).astype(bool).to_numpy()
    imported = str(_first(group, "quality_source") or "").startswith(MLPERF)
    scored = _scored(group, ok, imported)
    figure = _per_run(group[ok], "time_to_target_s")
    low, high = figure.interval if figure is not None and figure.runs > 1 else (math.nan, math.nan)
    batch = group["global_batch"].dropna()
    return {"system": first["system"], "framework": first["framework"], "benchmark": first["benchmark"],
            "model": first["model"], "args": first["work"], "np": int(first["np"]), "nodes": int(first["nodes"]),
            "metric": _first(group, "quality_metric"), "target": _first(group, "quality_target"), "runs": len(group),
            "converged": int(ok.sum()), "score_s": scored.seconds if scored.valid else math.nan,
            "olympic_s": scored.raw if scored.valid else math.nan, "scaling_factor": scored.factor,
            "valid": scored.valid, "void": scored.void, "olympic_why": scored.why, "not_converged": _missed(group, ok),
            "seconds": figure.value if figure is not None else math.nan, "low": low,
            "high": high, "spread": figure.spread if figure is not None else math.nan,
            "best": _best(group), "epochs": _geomean(group[ok]["epochs_to_target"]),
            "global_batch": int(batch.iloc[0]) if len(batch) else pd.NA,
            "source": "MLPerf result files" if imported else "hvdbench",
            "run_ids": ",".join(group["run_id"]), "_figure": figure, "_score": scored,
            "on_cpu": on_cpu_ranks(group["device_name"]) if "device_name" in group and not imported else False,
            "_epochs": _per_run(group[ok], "epochs_to_target"), "_ids": list(group["run_id"])}


def quality_table(runs: pd.DataFrame, margin: float = MARGIN, min_runs: int = 3, baseline: str | None = None,
                  draws: dict[str, np.ndarray] | None = None, points: dict[str, float] | None = None) -> pd.DataFrame:
    """One row per system, workload and size of the complete runs that went to a quality target; each other system
    set against ``baseline``'s time on the same workload and size (where it has no such runs: the first by name);
    each size against the fewest GPUs of its system and workload, its speedup in time to target split into
    throughput's (``draws``/``points``: each run's throughput resamples and figure, stats.run_stats) and statistical
    efficiency (epochs there over epochs here)."""
    if "quality_target" not in runs:
        return pd.DataFrame(columns=list(QUALITY_SCHEMA)).astype(QUALITY_SCHEMA)
    to_target = runs[runs["quality_target"].notna() & runs["status"].map(counts_as_run).astype(bool)]
    if to_target.empty:
        return pd.DataFrame(columns=list(QUALITY_SCHEMA)).astype(QUALITY_SCHEMA)
    keyed = to_target.assign(work=to_target["args"].map(lambda a: measured_args(str(a))))
    rows = [_row(group) for _, group in keyed.groupby(KEY, sort=True, dropna=False)]
    systems = {r["system"] for r in rows}
    first = baseline if baseline in systems else min(systems)
    same = ("framework", "benchmark", "model", "args")
    for row in rows:
        _against(row, next((r for r in rows if r["system"] == first and all(r[k] == row[k] for k in (
            *same, "np"))), None), margin, min_runs)
        fewest = min((r for r in rows if r["system"] == row["system"] and all(r[k] == row[k] for k in same)),
                     key=lambda r: r["np"])
        _split(row, fewest, draws or {}, points)
    table = pd.DataFrame([{k: v for k, v in r.items() if k in QUALITY_SCHEMA} for r in rows],
                         columns=list(QUALITY_SCHEMA))
    return table.astype(QUALITY_SCHEMA)


def _against(row: dict[str, Any], base: dict[str, Any] | None, margin: float, min_runs: int) -> None:
    """The row's time against the baseline system's on the same workload and size, with its finding: judged where
    both have a valid score by MLPerf's rule (each side's converged share said where a run did not converge), not
    judged where either has none."""
    row.update(against="", ratio=math.nan, ratio_low=math.nan, ratio_high=math.nan, finding="", verdict="")
    if base is None or base is row:
        return
    names = (row["system"], base["system"])
    void = not_comparable(row["_score"], base["_score"], names)
    mine, theirs = row["_figure"], base["_figure"]
    ratio = ratio_draws(mine, theirs) if mine is not None and theirs is not None and not void else None
    few = too_few_runs({row["system"]: row["converged"], base["system"]: base["converged"]}, min_runs)
    found = not_judged(void) if void else judge(ratio, margin, WORDS, names, few)
    low, high = ratio.interval if ratio is not None else (math.nan, math.nan)
    shares = "" if void or row["converged"] == row["runs"] and base["converged"] == base["runs"] else \
        f" ({names[0]}: {row['_score'].share()}; {names[1]}: {base['_score'].share()})"
    row.update(against=base["system"], ratio=math.exp(ratio.center) if ratio is not None else math.nan,
               ratio_low=low, ratio_high=high, finding=found.finding, verdict=found.sentence() + shares)


def _split(row: dict[str, Any], base: dict[str, Any], draws: dict[str, np.ndarray],
           points: dict[str, float] | None) -> None:
    """The row's speedup in time to target over the fewest GPUs' (their time over its), and its two factors:
    throughput's (its over theirs: the hardware) and statistical efficiency (their epochs over its); none where
    either side has no valid score by MLPerf's rule (``split_why`` says which)."""
    row.update({name: math.nan for name in QUALITY_SCHEMA if name.startswith(SPLIT)}, base_np=pd.NA, base_runs=pd.NA,
               split_why="")
    if base is row:
        return
    row["base_np"], row["base_runs"] = base["np"], base["runs"]
    each = "CPU ranks" if row["on_cpu"] else "GPUs"
    void = not_comparable(row["_score"], base["_score"], (f"{row['np']} {each}", f"{base['np']} {each}"))
    if void:
        row["split_why"] = void
        return
    ids = {side: [i for i in side_row["_ids"] if i in draws] for side, side_row in (("row", row), ("base", base))}
    ratios = {"speedup": ratio_draws(base["_figure"], row["_figure"]) if row["_figure"] and base["_figure"] else None,
              "hw": ratio_draws(config_draws(ids["row"], draws, points=points),
                                config_draws(ids["base"], draws, points=points)),
              "stat": ratio_draws(base["_epochs"], row["_epochs"]) if row["_epochs"] and base["_epochs"] else None}
    for name, ratio in ratios.items():
        if ratio is None:
            continue
        low, high = ratio.interval
        value = "speedup" if name == "speedup" else f"{name}_speedup" if name == "hw" else "stat_eff"
        row.update({value: math.exp(ratio.center), f"{name}_low": low, f"{name}_high": high})


def _seconds(value: Any, low: Any = None, high: Any = None) -> str:
    """A time to train: seconds (its interval beside it, in seconds too), with minutes after them from a minute on."""
    if missing(value):
        return "n/a"
    interval = "" if low is None or missing(low) or missing(high) else f" [{low:,.1f}–{high:,.1f} s]"
    return f"{value:,.1f} s{interval}" + (f" ({value / 60:,.2f} min)" if value >= 60 else "")


QUALITY_TEXT = ("Runs to a quality target (evaluation on the clock, from the run's start), by MLPerf Training's rule: "
                "every run to the target that ended counts, and one that ended without reaching it (the epoch cap, a "
                "timeout, a failure, a lost node) is a run that did not converge, said with why. The score is "
                "MLCommons': the olympic mean of the times (the fastest and the slowest dropped, a run that did not "
                "converge taking a slowest's place; more than one such run, or an MLPerf result folder without the "
                "runs its benchmark needs, leaves no valid score) times the folder's scaling.json factor, the raw "
                "olympic mean beside it where the factor is not 1. The time to train as every figure here is given "
                "is the geometric mean of the runs that converged with Student's 95% interval over them; the speedup "
                "in time to target against the fewest GPUs of the same system and workload is split into the speedup "
                "in throughput (the hardware: every step's samples over its time, evaluation left out) and "
                "statistical efficiency (epochs to the target there over epochs here, as the evaluations fell: a "
                "larger global batch that needs more epochs is below 1), each with its 95% interval over the runs "
                "(the two factors' product leaves out evaluation and start-up, so it is near the speedup, not "
                "equal). Each system is set against the baseline (--baseline, else the first results root's system) "
                "on the same workload and size (a ratio of times: below 1 is faster), judged only where both have a "
                "valid score: a side with none is never called faster, and each side's converged share is said.")


def _factor(value: float, low: float, high: float) -> str:
    return "n/a" if missing(value) else f"{value:.2f}" + ("" if missing(low) else f" [{low:.2f}–{high:.2f}]")


def _cpu(r: Any) -> bool:
    """Whether a row's ranks trained on CPUs (its on_cpu, unknown as not)."""
    return not missing(r.on_cpu) and bool(r.on_cpu)


def split_text(r: Any) -> str:
    """``×1.62 [1.50–1.75] = throughput ×1.90 [1.85–1.95] × statistical 0.85 [0.78–0.93] (against 1 GPU)``."""
    if missing(r.base_np):
        return "-"
    if not missing(getattr(r, "split_why", None)) and r.split_why:
        return f"not judged: {r.split_why}"
    each = f"{'CPU rank' if _cpu(r) else 'GPU'}{'s' if int(r.base_np) != 1 else ''}"
    fewest = min(int(r.runs), int(r.base_runs)) if not missing(r.base_runs) else int(r.runs)
    alone = f"; within-run only: {fewest} run a side, the spread between runs unknown" if fewest < 2 else ""
    return (f"×{_factor(r.speedup, r.speedup_low, r.speedup_high)} = throughput ×"
            f"{_factor(r.hw_speedup, r.hw_low, r.hw_high)} × statistical {_factor(r.stat_eff, r.stat_low, r.stat_high)}"
            f" (against {int(r.base_np)} {each}{alone})")


def _time_text(r: Any) -> str:
    """The time to train with its interval (in the unit of its figure), or why there is none; over the runs that
    converged, said where some did not."""
    if r.converged == 0:
        best = f"best {r.metric} {fmt(r.best, 4)}" if not missing(r.best) else "no evaluation"
        return f"none converged ({best})"
    some = f" over the {r.converged} of {r.runs} that converged" if r.converged < r.runs else ""
    return _seconds(r.seconds, r.low, r.high) + (" (one run)" if missing(r.low) else "") + some


def score_text(r: Any) -> str:
    """MLCommons' score (the raw olympic mean and the factor beside it where the factor is not 1), or why none."""
    if missing(r.score_s):
        return f"none: {r.olympic_why}"
    scaled = "" if missing(r.scaling_factor) or r.scaling_factor == 1 else \
        f"; olympic mean {r.olympic_s:,.1f} s × {r.scaling_factor:.4f} (scaling.json)"
    return _seconds(r.score_s) + scaled


def _runs_text(r: Any) -> str:
    """``5 (3): 2 timeout: ...``: the runs, those that converged, and why the others did not."""
    return f"{r.runs} ({r.converged})" + (f": {r.not_converged}" if r.converged < r.runs and r.not_converged else "")


TERMINAL = ("system", "GPUs", "target", "runs (converged)", "score (MLPerf's rule)", "time to train [95% CI]", "epochs",
            "global batch", "speedup in time to target")


def terminal_rows(table: pd.DataFrame) -> Rows:
    """The table's columns a terminal has room for (the size column whichever its title)."""
    header, rows = quality_rows(table)
    keep = [header.index(name) if name != "GPUs" else 2 for name in TERMINAL]
    return [header[i] for i in keep], [[row[i] for i in keep] for row in rows]


def quality_rows(table: pd.DataFrame) -> Rows:
    return (["system", "workload", "CPU ranks" if len(table) and bool(table["on_cpu"].fillna(False).all()) else "GPUs",
             "target", "runs (converged)", "score (MLPerf's rule)",
             "time to train [95% CI]", "epochs", "global batch", "speedup in time to target", "against the baseline",
             "source"],
            [[r.system, f"{r.benchmark} {r.model}", str(r.np),
              "-" if missing(r.target) else f"{r.metric} {r.target:g}", _runs_text(r), score_text(r),
              _time_text(r),
              fmt(r.epochs, 2), "-" if missing(r.global_batch) else f"{int(r.global_batch):,}", split_text(r),
              f"{r.ratio:.2f}× [{r.ratio_low:.2f}–{r.ratio_high:.2f}] {r.against}: {r.verdict}"
              if not missing(r.ratio) and not missing(r.ratio_low) else (r.verdict or "-"), r.source]
             for r in table.itertuples()])


def report_quality(inputs: Inputs) -> pd.DataFrame:
    """The report's one time-to-target table (its section and the decision read the same)."""
    return inputs.once("quality", lambda i: quality_table(i.collection.runs, i.margin, i.min_runs, i.baseline,
                                                          i.draws, i.points))


def terminal_said(report: Report) -> Terminal:
    """The runs to a quality target on the terminal, in the columns it has room for."""
    table = report.tables.get("quality")
    return Terminal([f"Time to a quality target\n{text_table(*terminal_rows(table))}"] if table is not None
                    and len(table) else [])


QUALITY_SECTION = TableSection("quality", "Time to a quality target", QUALITY_TEXT, quality_rows, report_quality,
                               terminal=terminal_said)


def decision_lines(table: pd.DataFrame) -> list[str]:
    """The decision page's lines on time to train: each workload and size measured to its target on the baseline
    and another system, with the ratio of times, its interval and the finding."""
    out = []
    for r in table[table["against"].fillna("") != ""].itertuples():
        ratio = (f"{r.ratio:.2f}× [{r.ratio_low:.2f}–{r.ratio_high:.2f}] the time of {r.against}"
                 if not missing(r.ratio) and not missing(r.ratio_low) else f"against {r.against}")
        out.append(f"time to train, {r.benchmark} {r.model} at {r.np} {'CPU rank(s)' if _cpu(r) else 'GPU(s)'}"
                   f" to {r.metric} {r.target:g}: {r.system} "
                   f"{ratio}: {r.verdict}")
    return out


def quality_summary(table: pd.DataFrame) -> list[str]:
    """The executive summary's lines on time to train: per system and workload run to a target at several sizes or
    batches, the configuration fastest to the target (what "best" means where runs were made to one: the highest
    throughput may need more epochs), beside the slowest; one line where a single configuration was run."""
    lines = []
    timed = table[table["seconds"].notna()] if len(table) else table
    for (system, model), group in timed.groupby(["system", "model"], sort=True):
        ordered = group.sort_values("seconds")
        fast, slow = ordered.iloc[0], ordered.iloc[-1]
        ranks = "CPU rank(s)" if bool(fast.get("on_cpu")) else "GPU(s)"

        def said(r: Any) -> str:
            batch = "" if missing(r["global_batch"]) else f" at global batch {int(r['global_batch']):,}"
            return (f"{int(r['np'])} {ranks}{batch}: {_seconds(r['seconds'], r['low'], r['high'])} to "
                    f"{r['metric']} {r['target']:g} ({int(r['converged'])} of {int(r['runs'])} converged)")

        if len(ordered) == 1:
            lines.append(f"Time to target: {system} {model} on {said(fast)}.")
            continue
        lines.append(f"Time to target: {system} {model} fastest on {said(fast)}; slowest on {said(slow)} "
                     "(best here means fastest to the target, not highest throughput).")
    return lines
