"""``hvdbench accept``: a buyer's criteria judged against measured runs, each with its 95% interval.

A criteria file holds ``[[criterion]]`` tables: a name, a metric, ``min`` or ``max``, and selectors naming
the runs (benchmark, model, precision, batch size, launcher ... ``gpus`` or ``nodes``; for bandwidth the
collective's op, dtype and bytes; for screening the level). A criterion passes where the whole interval
meets its threshold, fails where the whole interval misses it, is undecided where the interval holds the
threshold (with what the measurement could have caught and how much more would decide it, from the spread observed:
the words of analysis/findings.py), is not judged where the
runs behind it are fewer than --min-runs (the spread between runs unknown; a screen's units are judged against their
fleet, whose spread they are), and is not measured where no run matches (with the nearest that exist). Exit status:
0 all pass, 1 any fail, 4 not judged (undecided, too few runs, not measured), 2 a usage error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pandas as pd

from hvdbench.core.collective_ops import bus_factor, figure, slowest_per_iteration
from hvdbench.core.errors import UsageError
from hvdbench.core.metrics import percentile_interval
from hvdbench.readers.nccl_tests import BACKEND as IMPORTED
from hvdbench.core.validate import inert

from ..collect import Collection
from ..findings import UNDECIDED, interval_advice
from .criteria import COLLECTIVE_KEYS, METRICS, QUALITY_KEYS, SCREENING_KEYS, TRAINING_KEYS, Criterion
from .judging import Judging
from ..ratios import MIN_RUNS, config_draws, pooled_spread, too_few_runs
from ..tables.system import system_table
from ..tables.comm import iteration_times
from ..tables.efficiency import on_gpu_name

NOT_JUDGED = 4  # exit status: a verdict could not be reached (undecided, not measured); 2 is a usage error
NOT_JUDGED_VERDICT = "not judged"  # fewer complete runs than --min-runs behind the criterion
ACCEPTANCE_SCHEMA: dict[str, str] = {
    "criterion": "string", "metric": "string", "bound": "string", "threshold": "float64", "value": "float64",
    "low": "float64", "high": "float64", "verdict": "string", "why": "string", "runs": "string",
}


@dataclass
class Measured:
    """What a criterion's runs measured: the value and its 95% interval, the steps or repeats behind it, and
    which runs."""

    value: float
    low: float
    high: float
    count: int
    unit: str  # "timed steps" or "repeats": what more of would narrow the interval
    runs: str
    how: str = ""  # how it was measured, where a verdict depends on it (a bandwidth curve's timing)
    complete: int = 0  # complete runs behind it (0: not counted: a screen's units, judged against their fleet)
    refused: str = ""  # why no verdict may be reached on it (a time to train with no valid score by MLPerf's rule)


def judge(criteria: list[Criterion], tables: dict[str, pd.DataFrame], collection: Collection,
          judging: Judging | None = None) -> pd.DataFrame:
    """One row per criterion: the value, interval and verdict (pass, fail, undecided, not judged: fewer than
    ``judging.min_runs`` complete runs behind it, not measured); with ``judging.borrow_spread`` a throughput
    criterion on fewer runs takes its system's spread between runs (ratios.pooled_spread), said in its why."""
    min_runs, borrow_spread = (judging or Judging()).min_runs, (judging or Judging()).borrow_spread
    rows = []
    for criterion in criteria:
        found = MEASURE[METRICS[criterion.metric][0]](criterion, tables, collection)
        if borrow_spread and isinstance(found, Measured) and 0 < found.complete < min_runs:
            found = _borrowed(criterion, found, tables, min_runs)
        rows.append(verdict(criterion, found, min_runs) if isinstance(found, Measured) else
                    {"criterion": criterion.name, "metric": criterion.metric, "bound": criterion.bound,
                     "threshold": criterion.threshold, "value": math.nan, "low": math.nan, "high": math.nan,
                     "verdict": "not measured", "why": found, "runs": ""})
    return pd.DataFrame(rows, columns=list(ACCEPTANCE_SCHEMA)).astype(ACCEPTANCE_SCHEMA)


def verdict(criterion: Criterion, m: Measured, min_runs: int = MIN_RUNS) -> dict[str, Any]:
    """pass, fail or undecided, from where the interval lies against the threshold; not judged on fewer than
    ``min_runs`` complete runs."""
    row = {"criterion": criterion.name, "metric": criterion.metric, "bound": criterion.bound,
           "threshold": criterion.threshold, "value": m.value, "low": m.low, "high": m.high, "runs": m.runs}
    if m.refused:
        return {"verdict": NOT_JUDGED_VERDICT, "why": m.refused} | row
    few = too_few_runs({"the criterion's configuration": m.complete}, min_runs) if m.complete else ""
    if few:
        why = few.replace("of the criterion's configuration", "behind it")
        return {"verdict": NOT_JUDGED_VERDICT, "why": why} | row
    said = verdict_of(criterion, m)
    return {**said, "why": said["why"] + (f"; {m.how}" if m.how else "")} | row


PROPORTIONAL = ("throughput", "throughput_per_gpu", "tflops_per_gpu", "percent_of_peak")  # figures x throughput


def _borrowed(criterion: Criterion, m: Measured, tables: dict[str, pd.DataFrame], min_runs: int) -> Measured:
    """A throughput-proportional figure on fewer than ``min_runs`` runs with its system's spread between runs lent
    (judged as on enough runs, said in ``how``); others as they were (their why says borrowing does not reach them)."""
    stats, scaling = tables.get("run_stats", pd.DataFrame()), tables.get("scaling", pd.DataFrame())
    row = scaling[scaling["runs"] == m.runs]
    if criterion.metric not in PROPORTIONAL:
        return replace(m, how="--borrow-spread lends the spread between runs to throughput figures only")
    spread = pooled_spread(scaling, dict(zip(stats["run_id"], stats["throughput"])), min_runs).get(
        str(row["system"].iloc[0])) if len(row) else None
    draws = config_draws(m.runs.split(","), stats.attrs.get("draws", {}), spread, stats.attrs.get("points")) \
        if spread is not None else None
    if draws is None or spread is None:
        return replace(m, how="no spread between runs to borrow: no configuration of this system has "
                              f"{min_runs} runs")
    low, high = draws.interval
    scale = m.value / float(row["throughput"].iloc[0])
    return replace(m, low=low * scale, high=high * scale, complete=min_runs, how=spread.source)


def verdict_of(criterion: Criterion, m: Measured) -> dict[str, str]:
    """The verdict and why, from where the interval lies against the threshold."""
    if math.isnan(m.low) or math.isnan(m.high):
        return {"verdict": UNDECIDED, "why": "no 95% interval (too few steps): run it longer"}
    if criterion.meets(m.low) and criterion.meets(m.high):
        return {"verdict": "pass", "why": "the whole 95% interval meets it"}
    if not criterion.meets(m.low) and not criterion.meets(m.high):
        return {"verdict": "fail", "why": "the whole 95% interval misses it"}
    return {"verdict": UNDECIDED, "why": more_needed(m, criterion.threshold)}


MAX_ADVISED = 100  # times the measurement taken: beyond it, no practical amount of measurement decides it


def more_needed(m: Measured, threshold: float) -> str:
    """What an interval that holds the threshold could not tell, on the scale the interval lives on (findings.py's
    interval_advice: log, as compare's): the factor of the threshold either way beyond which a value would have
    shown with 80% chance, and how much more measurement would likely (80%) decide it at the value measured; where
    that is more than MAX_ADVISED times what was measured, the estimate sits too close to the threshold to advise.
    A figure that is not positive (or a threshold of 0) has no log scale: it is said without advice."""
    if not (threshold > 0 and m.value > 0 and m.low > 0 and m.high > m.low):
        return "could not tell: the interval holds the threshold"
    caught, total = interval_advice(m.value, m.low, m.high, threshold, max(m.count, 1),
                                    MAX_ADVISED * max(m.count, 1))
    said = (f"could not tell: a value beyond ×{caught:.2f} of the threshold either way (above "
            f"{threshold * caught:,.4g} or below {threshold / caught:,.4g}) would likely have shown; ")
    if total is None:
        off = math.exp(abs(math.log(m.value / threshold)))
        return said + (f"the estimate sits ×{off:.3f} from the threshold: no practical amount of measurement "
                       "decides it")
    return said + (f"the interval holds the threshold; about {max(total - m.count, 1):,} more {m.unit} "
                   f"({total:,} in all) would likely decide it")


def _select(table: pd.DataFrame, criterion: Criterion, keys: dict[str, type]) -> pd.DataFrame:
    """The rows the criterion's selectors, gpus and nodes name (independent replicas only when asked); every
    selector was checked to apply to this table when the criteria were read."""
    picked = table
    selectors = {"independent": False, **criterion.selectors} if "independent" in table else criterion.selectors
    for key, value in selectors.items():
        if key in keys and key in picked:
            picked = picked[picked[key].astype(str) == str(value)]
    if criterion.gpus is not None and "np" in picked:
        picked = picked[picked["np"] == criterion.gpus]
    if criterion.nodes is not None and "nodes" in picked:
        picked = picked[picked["nodes"] == criterion.nodes]
    return picked


def _nearest(table: pd.DataFrame, criterion: Criterion, most: int = 4) -> str:
    """Why no row matches, with the nearest configurations that exist: those matching most of the criterion's
    selectors, then closest in size, each with what differs from what the criterion names."""
    if table.empty:
        return "no run matches; none of its kind was measured"
    wanted = {k: v for k, v in criterion.selectors.items() if k in table}
    if criterion.nodes is not None and "nodes" in table:
        wanted["nodes"] = criterion.nodes
    size = criterion.gpus or 1

    def distance(row: pd.Series) -> tuple[int, float]:
        missed = sum(str(row.get(k)) != str(v) for k, v in wanted.items())
        return missed, abs(math.log2(max(int(row.get("np", 1) or 1), 1) / size))

    said: list[str] = []
    for _, i in sorted((distance(r), i) for i, r in table.head(500).iterrows()):
        row = table.loc[i]
        differ = [f"{k} {inert(row.get(k))}" for k, v in wanted.items() if str(row.get(k)) != str(v)]
        text = f"{row.get('model', row.get('op', ''))} at {row.get('np', '?')} {_ranks_word(row)}" + \
            (f" ({', '.join(differ)})" if differ else "")
        said += [text] if text not in said else []
        if len(said) == most:
            break
    return "no run matches" + (f"; nearest measured: {'; '.join(said)}" if said else "")


def _ranks_word(row: pd.Series) -> str:
    """GPU(s), or CPU rank(s) where the row's device is a CPU."""
    device = row.get("device_name")
    return "CPU rank(s)" if isinstance(device, str) and device and not on_gpu_name(device) else "GPU(s)"


def _refuse_several(picked: pd.DataFrame, criterion: Criterion, keys: list[str]) -> None:
    """A UsageError naming the configurations a criterion matches where it matches more than one."""
    differ = [k for k in keys if k in picked and picked[k].astype(str).nunique() > 1]
    shown = "; ".join(", ".join(f"{k}={inert(r[k])}" for k in differ) for _, r in picked.head(4).iterrows())
    raise UsageError(f"criterion {criterion.name!r} matches {len(picked)} configurations ({shown}): add a "
                     f"selector ({', '.join(differ)}) to name one")


def _one(picked: pd.DataFrame, table: pd.DataFrame, criterion: Criterion, keys: dict[str, type]) -> pd.Series | str:
    """The single row a criterion names, or why none (with the nearest rows that exist); several
    configurations are a UsageError asking for a narrower selector."""
    if picked.empty:
        return _nearest(table, criterion)
    if len(picked) > 1:
        _refuse_several(picked, criterion, [*keys, "np", "nodes"])
    return picked.iloc[0]


def _training(criterion: Criterion, tables: dict[str, pd.DataFrame], collection: Collection) -> Measured | str:
    table = tables.get("scaling", pd.DataFrame())
    if table.empty:
        return "no training run in the results"
    row = _one(_select(table, criterion, TRAINING_KEYS), table, criterion, TRAINING_KEYS)
    if isinstance(row, str):
        return row
    value, low, high = _interval_of(criterion.metric, row, tables)
    if math.isnan(value):
        return f"{criterion.metric} was not measured for these runs ({_why_missing(criterion.metric)})"
    stats = tables.get("run_stats", pd.DataFrame())
    runs = str(row["runs"]).split(",")
    steps = int(stats[stats["run_id"].isin(runs)]["steps"].sum()) if len(stats) else 0
    repeats = int(row["repeats"]) > 1
    return Measured(value, low, high, int(row["repeats"]) if repeats else steps,
                    "repeats" if repeats else "timed steps", str(row["runs"]), complete=int(row["repeats"]))


def _interval_of(metric: str, row: pd.Series, tables: dict[str, pd.DataFrame]) -> tuple[float, float, float]:
    """A scaling row's metric with its interval; figures proportional to throughput carry its interval."""
    thr, low, high = float(row["throughput"]), float(row["ci_low"]), float(row["ci_high"])
    if metric in ("speedup", "efficiency", "comm_cost"):
        return float(row[metric]), float(row[f"{metric}_low"]), float(row[f"{metric}_high"])
    scale = {"throughput": 1.0, "throughput_per_gpu": 1.0 / int(row["np"]),
             "tflops_per_gpu": float(row["tflops_per_gpu"]) / thr, "percent_of_peak": float(row["pct_of_peak"]) / thr}
    if metric in scale:
        return thr * scale[metric], low * scale[metric], high * scale[metric]
    details = tables.get("details", pd.DataFrame())
    energy = details[details["run_id"].isin(str(row["runs"]).split(","))]["energy_j_per_sample"].median() \
        if len(details) else math.nan
    return float(energy), float(energy) * thr / high, float(energy) * thr / low  # energy per sample ~ 1/throughput


def _why_missing(metric: str) -> str:
    return {"tflops_per_gpu": "no FLOP count", "percent_of_peak": "no peak for this device",
            "speedup": "no 1-GPU run", "efficiency": "no 1-GPU run", "comm_cost": "no --independent twin",
            "energy_per_sample": "no power telemetry in the timed window"}.get(metric, "not recorded")


# what makes a collectives row one configuration: everything but the size and the run (repeats are one)
COLLECTIVE_CONFIG = ["system", "placement", "np", "nodes", "launcher", "controller", "op", "backend", "path", "dtype",
                     "pattern", "timing"]


def _collective(criterion: Criterion, tables: dict[str, pd.DataFrame], collection: Collection) -> Measured | str:
    """A bandwidth criterion judged on exactly the runs of the one configuration it names (every repeat of
    it, and nothing else: not another launcher's, controller's, node count's or pattern's runs), at the size it
    names or, where it names none, the largest that configuration measured."""
    table = tables.get("collectives", pd.DataFrame())
    if table.empty:
        return "no collectives run in the results"
    selectors = {"op": "allreduce", "dtype": "fp32", **criterion.selectors}
    picked = _select(table, replace(criterion, selectors=selectors), COLLECTIVE_KEYS)
    if "timing" not in criterion.selectors:  # nccl-tests' convention, the one vendors quote, unless named
        each = picked[picked["timing"] == "each"]
        picked = picked[picked["timing"] != "each"]
        if picked.empty and len(each):
            return ("its curve was timed call by call (--timing each), not as nccl-tests times (calls back to "
                    "back): name timing = 'each' to judge that curve, or measure with --timing batch")
    if picked.empty:
        return _nearest(table, criterion)
    configurations = picked.drop_duplicates(COLLECTIVE_CONFIG)
    if len(configurations) > 1:
        _refuse_several(configurations, criterion, COLLECTIVE_CONFIG)
    if "bytes" not in criterion.selectors:
        picked = picked[picked["bytes"] == picked["bytes"].max()]  # the largest message measured
    row = picked.iloc[0]
    runs = sorted(set(picked["run_id"]))
    if row["backend"] == IMPORTED and len(runs) < MIN_RUNS:  # one figure a run: the spread is between runs
        return (f"{len(runs)} imported run(s) of nccl-tests, one figure each: fewer than {MIN_RUNS} runs to judge "
                "on (run the test again and import each)")
    comm = collection.comm
    case = comm[comm["run_id"].isin(runs) & (comm["op"] == row["op"]) & (comm["dtype"] == row["dtype"])
                & (comm["bytes"] == row["bytes"]) & (comm["backend"] == row["backend"])
                & (comm["pattern"] == row["pattern"]) & (comm["timing"] == row["timing"])]
    times = np.concatenate([slowest_per_iteration(iteration_times(one)) for _, one in case.groupby("run_id")]
                           or [np.array([])])
    if len(times) < 2:
        return "too few timed iterations for an interval"
    timing = str(row["timing"])
    rng = np.random.default_rng(0)
    draws = times[rng.integers(0, len(times), size=(2000, len(times)))]
    stats = np.median(draws, axis=1) if timing == "batch" else draws.mean(axis=1)  # the figure's own statistic
    factor = 1.0 if criterion.metric == "algbw" else bus_factor(str(row["op"]), int(row["np"]))
    value = int(row["bytes"]) / figure(times, timing) / 1e9 * factor
    slow, fast = percentile_interval(stats)
    unit = {"batch": "batches of calls back to back", "each": "calls, each timed alone"}.get(timing, "training steps")
    how = {"batch": "timed as nccl-tests times: calls back to back, the median over batches",
           "each": "timed call by call (--timing each: each call's cost of getting there included)"}.get(
               timing, "timed as a training run's steps exchange")
    return Measured(value, int(row["bytes"]) / fast / 1e9 * factor, int(row["bytes"]) / slow / 1e9 * factor,
                    len(times), unit, ",".join(runs), how, complete=len(runs))


def _screening(criterion: Criterion, tables: dict[str, pd.DataFrame], collection: Collection) -> Measured | str:
    """Every unit (GPU, or node with level = "node") against its fleet's median: the worst one judged."""
    table = tables.get("screening", pd.DataFrame())
    if table.empty:
        return "no screening runs in the results (hvdbench screen)"
    picked = _select(table, replace(criterion, selectors={"level": "gpu", **criterion.selectors}), SCREENING_KEYS)
    if picked.empty:
        return "no screened unit matches"
    lows, highs = picked["ci_low"] / picked["fleet_high"], picked["ci_high"] / picked["fleet_low"]
    # every unit must meet it: the interval judged is the worst unit's bounds (pass: every low meets the
    # threshold; fail: some unit's whole interval misses it)
    pick = min if criterion.bound == "min" else max
    worst = picked.iloc[int(np.argmin(picked["vs_fleet"].to_numpy()) if criterion.bound == "min"
                            else np.argmax(picked["vs_fleet"].to_numpy()))]
    return Measured(float(pick(picked["vs_fleet"])), float(pick(lows)), float(pick(highs)), 1, "repeats",
                    f"worst: {worst['host']} {worst['unit']}")


def _time_to_train(criterion: Criterion, tables: dict[str, pd.DataFrame], collection: Collection) -> Measured | str:
    """A time-to-train criterion on the one configuration of runs to a target it names: the geometric mean of the
    runs that converged with Student's interval over them, MLCommons' score said beside it; not judged where MLPerf's
    rule leaves no valid score (too many runs that did not converge), whatever the converged runs' times."""
    table = tables.get("quality", pd.DataFrame())
    if table.empty:
        return "no run to a quality target in the results"
    row = _one(_select(table, criterion, QUALITY_KEYS), table, criterion, QUALITY_KEYS)
    if isinstance(row, str):
        return row
    share = f"{int(row['converged'])} of {int(row['runs'])} runs converged"
    refused = f"no valid score by MLPerf's rule: {row['olympic_why']}" if bool(row["void"]) else ""
    score = f"MLCommons' score {float(row['score_s']):,.1f} s; " if bool(row["valid"]) else ""
    return Measured(float(row["seconds"]), float(row["low"]), float(row["high"]), int(row["converged"]), "repeats",
                    str(row["run_ids"]), f"{score}{share}", int(row["converged"]), refused)


MEASURE: dict[str, Callable[[Criterion, dict[str, pd.DataFrame], Collection], Measured | str]] = {
    "scaling": _training, "details": _training, "collectives": _collective, "screening": _screening,
    "quality": _time_to_train,
}


def exit_status(table: pd.DataFrame) -> int:
    """0 when every criterion passes, 1 when any fails, NOT_JUDGED (4) when only undecided, not judged (too few
    runs) or unmeasured ones remain besides passes (2 stays a usage error's, as for every command)."""
    verdicts = set(table["verdict"])
    return 0 if verdicts == {"pass"} else 1 if "fail" in verdicts else NOT_JUDGED


def rows(table: pd.DataFrame) -> tuple[list[str], list[list[str]]]:
    """The acceptance table for the report and the terminal."""
    def num(x: float) -> str:
        return "n/a" if math.isnan(x) else f"{x:,.4g}"

    return (["criterion", "metric", "threshold", "measured", "95% interval", "verdict", "why"],
            [[r.criterion, r.metric, f"{'≥' if r.bound == 'min' else '≤'} {r.threshold:,.4g}", num(r.value),
              "n/a" if math.isnan(r.low) else f"{num(r.low)} – {num(r.high)}", r.verdict, r.why]
             for r in table.itertuples()])


SECTION_TEXT = ("Each criterion judged with the measurement's 95% interval (runs and blocks of their steps "
                "resampled): pass where the whole interval meets the threshold, fail where the whole interval misses "
                "it, undecided where the interval holds it (with what the measurement could have caught and how much "
                "more would likely decide it), not "
                "judged where fewer complete runs than --min-runs stand behind it, not measured where no run matches.")


def facts(collection: Collection) -> list[str]:
    """The system's facts the runs recorded, for an acceptance protocol: the report's system-under-test table
    (tables/system.py), each fact with its values on every system."""
    table = system_table(collection)
    systems = [c for c in table.columns if c != "fact"]
    lines = [f"systems: {', '.join(inert(s) for s in systems) or '-'}"]
    for row in table.itertuples(index=False):
        values = list(dict.fromkeys(str(v) for v in row[1:]))
        said = values[0] if len(values) == 1 else "; ".join(f"{s}: {v}" for s, v in zip(systems, row[1:]))
        lines.append(f"{row[0]}: {said}")
    return lines


def protocol(path: Path, table: pd.DataFrame, collection: Collection, today: str) -> str:
    """A short text a buyer can paste into an acceptance protocol: criteria, verdicts, the system's facts."""
    counts = table["verdict"].value_counts()
    lines = [f"Acceptance against {inert(path.name)}, judged {today} by hvdbench accept",
             "Verdicts: " + ", ".join(f"{counts.get(v, 0)} {v}" for v in ("pass", "fail", UNDECIDED,
                                                                          NOT_JUDGED_VERDICT, "not measured")), ""]
    devices = collection.runs["device_name"].dropna() if "device_name" in collection.runs else pd.Series(dtype=str)
    if len(devices) and not devices.map(on_gpu_name).all():
        lines[-1:-1] = ["These results are CPU stand-ins: ranks trained on CPUs, not GPUs. They show how hvdbench "
                        "judges, not what any GPU system does; no GPU system is accepted on them."]
    for r in table.itertuples():
        measured = "nothing measured" if math.isnan(r.value) else \
            f"measured {r.value:,.4g} [{r.low:,.4g}, {r.high:,.4g}]" if not math.isnan(r.low) else \
            f"measured {r.value:,.4g}"
        lines.append(f"- {inert(r.criterion)}: {r.metric} {'≥' if r.bound == 'min' else '≤'} {r.threshold:,.4g}; "
                     f"{measured}: {r.verdict.upper()} ({inert(r.why)})")
    return "\n".join([*lines, "", "System as the runs recorded it:", *[f"- {f}" for f in facts(collection)], ""])
