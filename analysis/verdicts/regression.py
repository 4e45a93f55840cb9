"""``hvdbench compare OLD NEW --regressions``: last month's cluster against today's. Configurations are
paired by what they ran (workload, arguments, launcher, placement, knobs, size; not the system label),
and each pair's throughput ratio new / old gets a 95% interval from both runs' own resamples. A change
whose interval lies wholly below 1 / (1 + margin) is a regression, wholly above 1 + margin an improvement, wholly
inside the margin equivalent; anything else is undecided, with what the runs could have caught and the runs a side
that would decide it (analysis/findings.py). Beside each, what else changed between the two
(driver, CUDA, NCCL, cuDNN, frameworks, Horovod, the exchange's tuning variables, clocks, the container image, the
network NCCL used). A configuration measured on one side only is listed, never dropped. Each side's resamples are
drawn on their own (the two sides of one sweep share run ids), and a comparison that could not judge a configuration
(too few steps for an interval, fewer complete runs a side than --min-runs, a configuration on one side only, nothing
paired) says so: it is "not judged", never a pass; nor is an undecided one (exit status 4)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from hvdbench.core.errors import UsageError
from hvdbench.core.validate import inert

from ..collect import Collection
from ..keys import CONFIG, SIZE
from ..findings import CHANGE, NOT_JUDGED, UNDECIDED, judge
from ..ratios import MIN_RUNS, Spread, pooled_spread, ratio_draws, too_few_runs
from .versus import differences, side as side_of, verdict_inputs

PAIR = [k for k in CONFIG if k != "system"] + SIZE + ["independent"]  # what two runs of one configuration share
FACTS = ("device_name", "host", "cpu_model", "cpu_count", "driver", "cuda", "nccl", "horovod_nccl", "cudnn", "torch",
         "tensorflow", "horovod_version", "mpi", "tuning", "container_image", "container_image_id", "nccl_network")
REGRESSION_SCHEMA: dict[str, str] = {
    "workload": "string", "np": "Int64", "nodes": "Int64", "old": "float64", "new": "float64", "ratio": "float64",
    "ratio_low": "float64", "ratio_high": "float64", "change": "string", "finding": "string", "why": "string",
    "detectable": "float64", "runs_to_decide": "Int64", "what_else_changed": "string", "old_runs": "string",
    "new_runs": "string",
}


def regression_table(old: pd.DataFrame, new: pd.DataFrame, old_draws: dict[str, np.ndarray],
                     new_draws: dict[str, np.ndarray], old_runs: pd.DataFrame, new_runs: pd.DataFrame,
                     old_clocks: dict[str, float], new_clocks: dict[str, float], margin: float,
                     min_runs: int = MIN_RUNS, spreads: tuple[dict[str, Spread], dict[str, Spread]] | None = None,
                     points: tuple[dict[str, float], dict[str, float]] = ({}, {}),
                     executions: tuple[dict[str, str], dict[str, str]] = ({}, {})) -> pd.DataFrame:
    """One row per configuration of either side: the ratio new / old with its interval and the verdict; a side of
    fewer than ``min_runs`` complete runs is not judged unless ``spreads`` (old's and new's, per system) lends it
    the spread between runs of its system's other configurations. ``executions``: each side's run rows' execution
    keys, by which its ``draws`` and ``points`` are kept (analysis/verdicts/versus.py)."""
    rows = []
    pair = pairing(old, new)
    keyed_old = {tuple(str(r[k]) for k in pair): r for _, r in old.iterrows()}
    keyed_new = {tuple(str(r[k]) for k in pair): r for _, r in new.iterrows()}
    for key in sorted(set(keyed_old) | set(keyed_new)):
        a, b = keyed_old.get(key), keyed_new.get(key)
        some = b if b is not None else a
        assert some is not None
        label = f"{some['framework']} {some['benchmark']} {some['model']} {some['args']}".strip()
        if "system" in pair:
            label = f"{some['system']}: {label}"
        base = {"workload": label, "np": int(some["np"]), "nodes": int(some["nodes"]),
                "old_runs": "" if a is None else str(a["runs"]), "new_runs": "" if b is None else str(b["runs"])}
        if a is None or b is None:
            rows.append({**base, "old": math.nan if a is None else a["throughput"],
                         "new": math.nan if b is None else b["throughput"], "ratio": math.nan, "ratio_low": math.nan,
                         "ratio_high": math.nan, "change": f"{NOT_JUDGED}: only in " + ("new" if a is None else "old"),
                         "finding": NOT_JUDGED, "why": "", "detectable": math.nan, "runs_to_decide": None,
                         "what_else_changed": ""})
            continue
        sides = [_side(row, draws, lent, min_runs, mine, keyed) for row, draws, lent, mine, keyed in
                 ((b, new_draws, spreads[1] if spreads else {}, points[1], executions[1]),
                  (a, old_draws, spreads[0] if spreads else {}, points[0], executions[0]))]
        resampled = ratio_draws(*sides)
        low, high = resampled.interval if resampled is not None else (math.nan, math.nan)
        borrowed = resampled.borrowed if resampled is not None else ""
        few = "" if borrowed else too_few_runs({"old": int(a["repeats"]), "new": int(b["repeats"])}, min_runs,
                                               "hvdbench run … --repeats")
        if resampled is None or not all(map(math.isfinite, (low, high))):
            few = ""  # no interval (too few steps) is said first
        found = judge(resampled, margin, CHANGE, ("new", "old"), few)
        if found.verdict.startswith(f"{NOT_JUDGED} (no interval"):
            found = replace(found, verdict=f"{NOT_JUDGED}: too few steps for an interval")
        change = found.verdict + (f" ({borrowed})" if borrowed and found.judged else "")
        rows.append({**base, "old": float(a["throughput"]), "new": float(b["throughput"]),
                     "ratio": float(b["throughput"]) / float(a["throughput"]), "ratio_low": low, "ratio_high": high,
                     "change": change, "finding": found.finding, "why": found.why, "detectable": found.detectable,
                     "runs_to_decide": found.runs_to_decide,
                     "what_else_changed": _differences(a, b, old_runs, new_runs, old_clocks, new_clocks)})
    return pd.DataFrame(rows, columns=list(REGRESSION_SCHEMA)).astype(REGRESSION_SCHEMA)


def pairing(old: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    """The columns two configurations are paired by: what they ran (PAIR), and the system label too where a
    side holds several labels (each side's own are then paired by name); a UsageError where a side holds
    several labels and the other other labels, which no pairing can tell apart."""
    a, b = sorted(set(old["system"])), sorted(set(new["system"]))
    if len(a) == 1 and len(b) == 1:
        return PAIR
    if a == b:
        return ["system", *PAIR]
    raise UsageError(f"compare --regressions: OLD holds systems {', '.join(map(inert, a))} and NEW "
                     f"{', '.join(map(inert, b))}: with several on a side, configurations are paired by system label "
                     "and these differ; compare one system per root, or give both sides the same labels")


def _side(row: pd.Series, draws: dict[str, np.ndarray], spreads: dict[str, Spread], min_runs: int,
          points: dict[str, float] | None, executions: dict[str, str]) -> Any:
    """A configuration's hierarchical resamples, with its system's spread between runs lent where it has fewer than
    ``min_runs`` runs and one is given (``points``: each of its side's runs' own throughput)."""
    lent = spreads.get(str(row["system"])) if int(row["repeats"]) < min_runs else None
    return side_of([executions.get(r, r) for r in str(row["runs"]).split(",")], draws, points, lent)


def _facts(runs: pd.DataFrame, ids: str, clocks: dict[str, float]) -> tuple[dict[str, list[Any]], list[float]]:
    """The facts of a configuration's runs (each recorded fact's values), and their SM clocks in the window."""
    mine = runs[runs["run_id"].isin(ids.split(","))]
    sm = [clocks[r] for r in ids.split(",") if r in clocks and not math.isnan(clocks[r])]
    return {name: list(mine[name].dropna()) for name in FACTS}, sm


def _differences(a: pd.Series, b: pd.Series, old_runs: pd.DataFrame, new_runs: pd.DataFrame,
                 old_clocks: dict[str, float], new_clocks: dict[str, float]) -> str:
    """What differs between the two sides besides the code (versus.differences: versions, tuning variables), and
    their mean SM clock where it moved more than 2%."""
    (before, x), (after, y) = _facts(old_runs, str(a["runs"]), old_clocks), _facts(new_runs, str(b["runs"]), new_clocks)
    said = [differences(before, after)]
    if x and y and abs(np.mean(y) / np.mean(x) - 1.0) > 0.02:
        said.append(f"SM clock {np.mean(x):.0f} -> {np.mean(y):.0f} MHz")
    return "; ".join(filter(None, said))


def clocks_of(collection: Collection, window: pd.DataFrame) -> dict[str, float]:
    """Each run's mean SM clock over its timed window (NaN where none was sampled)."""
    if window.empty or "sm_clock_mhz" not in window:
        return {}
    return window.groupby("run_id")["sm_clock_mhz"].mean().to_dict()


def rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """The regression table for the report and the terminal."""
    def num(x: Any, digits: int = 1) -> str:
        return "-" if pd.isna(x) else f"{x:,.{digits}f}"

    return (["workload", "GPUs", "old", "new", "new / old [95% CI]", "change", "could have caught", "runs to decide",
             "what else changed"],
            [[r.workload, str(r.np), num(r.old), num(r.new),
              f"{num(r.ratio, 3)} [{num(r.ratio_low, 3)}–{num(r.ratio_high, 3)}]" if not pd.isna(r.ratio) else "-",
              r.change, f"×{r.detectable:.2f}" if not pd.isna(r.detectable) else "-",
              f"~{int(r.runs_to_decide):,} a side" if not pd.isna(r.runs_to_decide) else "-",
              r.what_else_changed or "-"] for r in table.itertuples()])


def compare_results(old_dir: Any, new_dir: Any, out: Any, margin: float, warmup: int | None = None,
                    min_runs: int = MIN_RUNS, borrow_spread: bool = False) -> tuple[str, dict[str, Any], pd.DataFrame]:
    """Both result sets read on their own, paired, judged; regressions.md, regressions.csv and regressions.json (each
    configuration's finding a field) written."""
    from pathlib import Path

    from hvdbench.core.errors import ReportError

    from ..collect import collect
    from ..tables.details import window_telemetry
    from ..document import Section, csv_safe, section_markdown, text_table
    from ..tables.scaling import run_stats_table, scaling_table

    sides = []
    for side, root in (("old", old_dir), ("new", new_dir)):
        collection = collect([Path(root)])
        stats = run_stats_table(collection, warmup, salt=f"{side} ")  # each side resampled on its own
        table = scaling_table(collection, stats)
        if table.empty:
            raise ReportError(f"{root}: no complete training run to compare")
        sides.append((collection, stats, table))
    (old_c, old_s, old_t), (new_c, new_s, new_t) = sides
    spreads = tuple(pooled_spread(t, dict(zip(s["run_id"], s["throughput"])), min_runs)
                    for _, s, t in sides) if borrow_spread else None
    (old_keys, old_draws, old_points), (new_keys, new_draws, new_points) = (verdict_inputs(c, s) for c, s, _ in sides)
    table = regression_table(old_t, new_t, old_draws, new_draws, old_c.runs, new_c.runs,
                             clocks_of(old_c, window_telemetry(old_c)), clocks_of(new_c, window_telemetry(new_c)),
                             margin, min_runs, spreads,  # type: ignore[arg-type]
                             (old_points, new_points), (old_keys, new_keys))
    table.attrs["runs"] = [(side, str(run_id)) for side, (collection, _, _) in zip(("old", "new"), sides)
                           for run_id in collection.runs["run_id"]]
    header, body = rows(table)
    section = Section("Regressions", f"{new_dir} against {old_dir}: throughput new / old per configuration with its "
                      f"95% interval (runs and blocks of their steps resampled): a regression or an improvement where "
                      f"the whole interval lies beyond {margin:.0%}, equivalent where it lies inside it, undecided "
                      "otherwise (with what the runs could have caught and the runs a side that would decide it); a "
                      f"side of fewer than {min_runs} complete runs is not judged.", header, body)
    section.notes = [f"{r.workload} at {r.np}: {r.why}" for r in table.itertuples() if r.finding == UNDECIDED]
    out = Path(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
        paths = {"markdown": out / "regressions.md", "csv": out / "regressions.csv", "json": out / "regressions.json"}
        paths["markdown"].write_text("\n".join(section_markdown(section)) + "\n", encoding="utf-8")
        csv_safe(table).to_csv(paths["csv"], index=False)
        paths["json"].write_text(table.to_json(orient="records", indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise ReportError(f"cannot write the comparison into {out}: {exc.strerror}") from None
    counts = table["finding"].value_counts()
    summary = ", ".join(f"{n} {finding}" for finding, n in counts.items())
    if (table["finding"] == NOT_JUDGED).all():
        summary += "; nothing could be judged: no configuration is on both sides with an interval"
    elif (table["finding"] == UNDECIDED).any():
        summary += ("; undecided is not unchanged: the runs could not tell (see what each could have caught and "
                    "the runs that would decide it)")
    return f"{text_table(header, body)}\n\n{summary}", paths, table


def exit_status(table: pd.DataFrame) -> int:
    """1 on any regression; 4 (not judged) where any configuration could not be judged or is undecided; else 0."""
    if (table["finding"] == "regression").any():
        return 1
    return 4 if table.empty or table["finding"].isin([NOT_JUDGED, UNDECIDED]).any() else 0
