"""The data path: how training with real data (``--data files``) compares with the same training on synthetic
batches, and why. Per workload and size: files against synthetic throughput with the ratio's interval; the share of
step time spent waiting for input; what the input pipeline gives a rank alone (``--data-only``) against what training
asks; the CPU cores a GPU needs at the measured decode rate; the storage bandwidth a node and 16 nodes need at the
GPUs' rate; and the accelerator utilization as MLPerf Storage defines it (time computing over time, 90% its line)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from hvdbench.core.loaders import loaders_of
from hvdbench.core.pagecache import FROM_MEMORY
from hvdbench.core.run_flags import flags_key, run_flags

from ..keys import WORKLOAD
from .efficiency import on_gpu_name
from ..findings import EQUIVALENT, MARGIN, NOT_JUDGED, SPEED, UNDECIDED, Finding, judge, margin_text
from ..ratios import MIN_RUNS, config_draws, ratio_draws
from ..formatting import Rows, fmt, missing, pct, ratio, text
from ..sections import Inputs, TableSection

DATA_FLAGS = {"--data": 1, "--data-dir": 1, "--data-layout": 1, "--data-only": 0, "--loader-workers": 1, "--loader": 1,
              "--data-cache": 1}
AU_LINE = 0.90  # MLPerf Storage's pass mark: the accelerators busy at least 90% of the time
NODES_SHOWN = 16  # the storage a cluster of this many nodes needs, beside one node's
PARTLY = 0.5  # a dataset at least this resident at the start is read mostly from memory, not from storage
DATAPATH_SCHEMA: dict[str, str] = {
    "system": "string", "framework": "string", "benchmark": "string", "model": "string", "np": "int64",
    "nodes": "int64", "loader": "string", "workers": "Int64", "layout": "string", "cache": "string",
    "synthetic": "float64",
    "files": "float64",
    "ratio": "float64", "ratio_low": "float64", "ratio_high": "float64", "wait_share": "float64",
    "alone_per_rank": "float64", "asked_per_rank": "float64", "verdict": "string", "finding": "string",
    "damaged": "Int64", "damaged_named": "string",
    "cores_per_gpu": "float64", "per_core": "float64", "gpu_need": "string",
    "node_mb_s": "float64", "cluster_mb_s": "float64", "au": "float64", "unit": "string", "runs": "string",
}


def _key(row: pd.Series, leave_out: dict[str, int]) -> str:
    """The run's flags less ``leave_out``, as its benchmark's parser reads them (core/run_flags.py)."""
    return flags_key(str(row["benchmark"]), str(row["args"]).split(), leave_out)


def _sums(runs: pd.DataFrame, ids: str) -> dict[str, float]:
    """A configuration's runs' input wait, step time and bytes, summed."""
    mine = runs[runs["run_id"].isin(str(ids).split(","))]
    return {name: float(mine[name].astype("float64").sum(min_count=1)) if name in mine else math.nan
            for name in ("input_wait_s", "step_time_s", "bytes_read", "dataset_bytes", "dataset_samples")}


def datapath_table(table: pd.DataFrame, runs: pd.DataFrame, draws: dict[str, np.ndarray],
                   points: dict[str, float] | None = None, margin: float = MARGIN, min_runs: int = MIN_RUNS,
                   pipelines: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per files configuration of ``table`` (training, ``data`` files) with its synthetic twin and its
    pipeline alone (``pipelines``: the --data-only runs' rows, else --data-only rows of ``table``) where they were
    measured; a verdict on fewer than ``min_runs`` runs a side says it is within-run only."""
    rows: list[dict[str, Any]] = []
    gpus = table
    if pipelines is not None:
        table = pd.concat([table, pipelines], ignore_index=True)
    if table.empty or "data" not in table or not (table["data"] == "files").any():
        return pd.DataFrame(columns=list(DATAPATH_SCHEMA)).astype(DATAPATH_SCHEMA)
    keyed = table.assign(_base=table.apply(_key, axis=1, leave_out=DATA_FLAGS),
                         _own=table.apply(_key, axis=1, leave_out={"--data-only": 0}))
    only = table.apply(lambda row: bool(run_flags(str(row["benchmark"]), str(row["args"]).split()).get("data_only")),
                       axis=1)
    paired: set[str] = set()
    for _, files in keyed[(keyed["data"] == "files") & ~only].iterrows():
        same = (keyed["_base"] == files["_base"]) & (keyed["np"] == files["np"]) & np.logical_and.reduce(
            [keyed[k] == files[k] for k in WORKLOAD])
        synthetic = keyed[same & (keyed["data"] != "files")].sort_values("data", key=lambda s: s != "device")
        alone = keyed[same & only & (keyed["_own"] == files["_own"])]
        paired.update(alone["runs"])
        row = _row(files, synthetic.iloc[0] if len(synthetic) else None, alone.iloc[0] if len(alone) else None,
                   runs, draws, points, margin)
        row["gpu_need"] = gpu_need(row["per_core"], gpu_rate(gpus, files), str(files["unit"]))
        counts = [int(r["repeats"]) for r in (files, *(x.iloc[0] for x in (synthetic, alone) if len(x)))]
        if min(counts) < min_runs and not row["verdict"].startswith("not judged"):
            row["verdict"] += f" (within-run only: {min(counts)} run(s) of a side, fewer than {min_runs})"
            row["finding"] = NOT_JUDGED  # the field says what the words hedge
        rows.append(row)
    rows += [_alone_row(alone, runs) for _, alone in keyed[only & ~keyed["runs"].isin(paired)].iterrows()]
    return pd.DataFrame(rows, columns=list(DATAPATH_SCHEMA)).astype(DATAPATH_SCHEMA)


def _reader(mine: pd.DataFrame, framework: str) -> dict[str, Any]:
    """What read a configuration's files: the loader, its workers, the layout."""
    workers, layout = mine["loader_workers"].dropna(), mine["data_layout"].dropna()
    return {"loader": str(mine["data_loader"].dropna().iloc[0]) if mine["data_loader"].notna().any() else
            loaders_of(framework)[0],
            "workers": int(workers.iloc[0]) if len(workers) else pd.NA,
            "layout": str(layout.iloc[0]) if len(layout) else None}


def _alone_row(alone: pd.Series, runs: pd.DataFrame) -> dict[str, Any]:
    """A pipeline measured alone (--data-only) with no training of it to set against: what it gives a rank."""
    mine = runs[runs["run_id"].isin(str(alone["runs"]).split(","))]
    rate = float(alone["throughput"]) / int(alone["np"])
    damaged, named, said = _damaged(mine, f"not judged: the pipeline alone gives {rate:,.1f}/s a rank; no training "
                                          "of it was measured to set against")
    return {**{k: alone[k] for k in ("system", "framework", "benchmark", "model", "np", "nodes", "unit", "runs")},
            **_reader(mine, str(alone["framework"])), "cache": page_cache(mine, int(alone["nodes"])),
            "damaged": damaged, "damaged_named": named, "alone_per_rank": rate, "verdict": said,
            "finding": NOT_JUDGED}


def _damaged(mine: pd.DataFrame, said: str) -> tuple[int, str, str]:
    """The corrupt or vanished samples the runs met, the first named, and the verdict led by what was damaged."""
    damaged, named = _damage(mine)
    if not damaged:
        return damaged, named, said
    read_count = float(mine["data_read"].astype("float64").sum()) if "data_read" in mine else math.nan
    return damaged, named, (f"damaged: {damaged:,} of {damaged + read_count:,.0f} samples read were corrupt or "
                            f"vanished (first: {named}); " + said) if math.isfinite(read_count) else \
        f"damaged: {damaged:,}; {said}"


def _row(files: pd.Series, synthetic: pd.Series | None, alone: pd.Series | None, runs: pd.DataFrame,
         draws: dict[str, np.ndarray], points: dict[str, float] | None, margin: float) -> dict[str, Any]:
    np_, nodes = int(files["np"]), int(files["nodes"])
    sums = _sums(runs, files["runs"])
    wait = sums["input_wait_s"] / sums["step_time_s"] if sums["step_time_s"] > 0 else math.nan
    mine = runs[runs["run_id"].isin(str(files["runs"]).split(","))]
    reader = _reader(mine, str(files["framework"]))
    workers = mine["loader_workers"].dropna()
    synth = float(synthetic["throughput"]) if synthetic is not None else math.nan
    drawn = (ratio_draws(config_draws(str(files["runs"]).split(","), draws, points=points),
                         config_draws(str(synthetic["runs"]).split(","), draws, points=points))
             if synthetic is not None else None)
    low, high = drawn.interval if drawn is not None else (math.nan, math.nan)
    found = judge(drawn, margin, SPEED, ("files", "synthetic"))
    alone_rate = float(alone["throughput"]) / np_ if alone is not None else math.nan
    asked = synth / np_ if synthetic is not None else math.nan
    read = float(files["throughput"]) * sums["step_time_s"] / np_  # samples the runs read in their timed steps
    per_sample = sums["dataset_bytes"] / sums["dataset_samples"] if sums["dataset_samples"] > 0 else \
        sums["bytes_read"] / read if read > 0 else math.nan
    per_worker = alone_rate / max(int(workers.iloc[0]), 1) if len(workers) and math.isfinite(alone_rate) else math.nan
    damaged, named, said = _damaged(mine, _verdict(found, alone_rate, asked, wait, margin,
                                                   float(files["throughput"]) / synth if synth else math.nan))
    return {"system": files["system"], "framework": files["framework"], "benchmark": files["benchmark"],
            "model": files["model"], "np": np_, "nodes": nodes, **reader, "cache": page_cache(mine, nodes),
            "damaged": damaged, "damaged_named": named,
            "synthetic": synth,
            "files": float(files["throughput"]), "ratio": float(files["throughput"]) / synth if synth else math.nan,
            "ratio_low": low, "ratio_high": high, "wait_share": wait, "alone_per_rank": alone_rate,
            "asked_per_rank": asked, "verdict": said, "finding": found.finding,
            "cores_per_gpu": asked / per_worker if per_worker > 0 else math.nan, "per_core": per_worker,
            "node_mb_s": per_sample * synth / nodes / 1e6 if synthetic is not None else math.nan,
            "cluster_mb_s": per_sample * synth / nodes * NODES_SHOWN / 1e6 if synthetic is not None else math.nan,
            "au": 1.0 - wait if math.isfinite(wait) else math.nan, "unit": files["unit"], "runs": files["runs"]}


def gpu_rate(table: pd.DataFrame, files: pd.Series) -> tuple[float, str] | None:
    """The fastest synthetic rate a GPU rank trained this workload at in these results (any system; its device's
    name), for what a GPU would ask of the loader; None where no GPU ran it."""
    if "device_name" not in table:
        return None
    same = table[(table["benchmark"] == files["benchmark"]) & (table["model"] == files["model"])
                 & (table["data"] != "files") & table["device_name"].map(on_gpu_name)]
    if same.empty:
        return None
    rates = same["throughput"].astype(float) / same["np"].astype(float)
    best = same.loc[rates.idxmax()]
    return float(rates.max()), str(best["device_name"])


def gpu_need(per_core: float, rate: tuple[float, str] | None, unit: str) -> str:
    """What a GPU rank would need of the CPU at the decode rate measured: cores at a GPU's rate from these results,
    else the rule to work it out (a core's rate)."""
    if not math.isfinite(per_core) or per_core <= 0:
        return "n/a (measure the pipeline alone: --data-only)"
    if rate is None:
        return f"a core decodes {per_core:,.0f} {unit}/s: a GPU asking R/s needs R / {per_core:,.0f} cores"
    return f"{rate[1]} at {rate[0]:,.0f} {unit}/s a rank needs about {rate[0] / per_core:,.1f} cores"


def _damage(runs: pd.DataFrame) -> tuple[int, str]:
    """The corrupt or vanished samples a configuration's runs met (summed over their ranks and runs) and the first
    named."""
    if "data_corrupt" not in runs:
        return 0, ""
    count = int(runs["data_corrupt"].astype("Int64").fillna(0).sum())
    named = next((str(n).split(";")[0][:160] for n in runs.get("data_named", pd.Series(dtype=str)).dropna() if n), "")
    return count, named


def _first(runs: pd.DataFrame, column: str) -> Any:
    given = runs[column].dropna() if column in runs else pd.Series(dtype=object)
    return given.iloc[0] if len(given) else None


def page_cache(runs: pd.DataFrame, nodes: int) -> str | None:
    """Where a configuration's runs read their dataset from: served from memory (resident at the start, or read
    more than once on one node with the dataset smaller than its free memory), a cold start, or storage."""
    if runs.empty or "data_cache" not in runs or runs["data_cache"].isna().all():
        return None
    mode = str(_first(runs, "data_cache"))
    resident = float(runs["data_resident"].astype("float64").min()) if "data_resident" in runs else math.nan
    fits = _first(runs, "data_fits")
    samples = runs["dataset_samples"].astype("float64") if "dataset_samples" in runs else None
    passes = float((runs["data_read"].astype("float64") / samples).median()) if samples is not None else math.nan
    start = f"{resident:.0%} resident at the start" if math.isfinite(resident) else "residency unknown"
    read = f", {passes:.1f} passes" if math.isfinite(passes) else ""
    if mode == "cold":
        first = "cold start (its pages dropped)"
        if bool(fits) and nodes == 1 and passes >= 2:
            return f"{first}; served from memory after its first pass{read}"
        return f"{first}{read}"
    if math.isfinite(resident) and resident >= FROM_MEMORY:
        return f"served from memory ({start}{read}, {mode})"
    if math.isfinite(resident) and resident >= PARTLY:
        return (f"mostly from memory ({start}{read}, {mode}): not a storage figure (--data-cache cold for one)")
    if bool(fits) and nodes == 1 and passes >= 2:
        return f"served from memory after its first pass ({start}{read}, {mode})"
    if fits is not None and not bool(fits):
        return f"from storage: larger than free memory ({start}{read})"
    return f"from storage ({start}{read}, {mode})"


def _verdict(found: Finding, alone: float, asked: float, wait: float, margin: float, ratio: float) -> str:
    """Whether the input sets the pace: the pipeline alone against what training asks where both were measured,
    else files against synthetic throughput with its finding (analysis/findings.py); where files are slower though
    steps hardly wait, the loader's workers take the CPU training needs."""
    side = {"slower": "below", "faster": "above"}.get(found.finding, None if found.finding == NOT_JUDGED else "within")
    if math.isfinite(alone) and math.isfinite(asked) and alone < asked / (1.0 + margin):
        return f"input-bound: the loader gives {alone:,.1f}/s a rank, training asks {asked:,.1f}: " \
               f"{asked / alone:.1f}× short"
    if side == "below" and math.isfinite(wait) and wait < 0.05:
        return f"slower with files ({ratio:.2f}×) though steps waited {wait:.0%} on input: the loader's workers take " \
               "CPU time from training (give it more cores a GPU)"
    if math.isfinite(alone) and math.isfinite(asked):
        return f"the loader keeps up: {alone:,.1f}/s a rank alone against {asked:,.1f} asked"
    if side == "below":
        return "slower with files than synthetic: the input path costs throughput (measure --data-only to see why)"
    if side is None:
        return "not judged: no synthetic run of the same training to compare with"
    waited = f" ({wait:.0%} of step time waited on input)" if math.isfinite(wait) else ""
    if found.finding == EQUIVALENT:
        return f"no cost of reading files beyond {margin_text(margin)}{waited}"
    if found.finding == UNDECIDED:
        return (f"undecided: could not tell whether reading files costs throughput (a cost under {found.caught()} "
                f"would likely not have shown){waited}")
    return f"faster with files than synthetic ({ratio:.2f}×){waited}"


DATAPATH_TEXT = ("Training that reads a dataset (--data files: read, decoded and augmented by the loader's workers) "
                 "against the same training on synthetic batches: the ratio with its 95% interval; the share of step "
                 "time spent waiting for a batch; what the pipeline gives a rank alone (--data-only) against what "
                 "training asks (the synthetic rate a rank); the CPU cores a rank needs at the measured decode rate "
                 "(what training asks over one worker's rate), and what a GPU would need at that rate (at the fastest "
                 "GPU rank of this workload in these results, else the rule); the storage a node and 16 nodes need "
                 "at the ranks' rate (the dataset's bytes a sample × the synthetic rate: a requirement, not a "
                 "measurement of the storage); and the accelerator utilization as MLPerf "
                 "Storage defines it (1 − the share waiting; its pass mark 90%). The page cache says where the "
                 "bytes came from: a dataset served from memory says nothing of the storage (measure that with "
                 "--data-cache cold on a dataset larger than a node's memory).")


def cores(value: float) -> str:
    """CPU cores as they matter: two significant digits below 10 (0.03, not 0.0), whole ones above."""
    if missing(value):
        return "n/a"
    return f"{value:.2g}" if value < 10 else f"{value:,.0f}"


def datapath_rows(table: pd.DataFrame) -> Rows:
    """The data path table."""
    return (["workload", "ranks", "loader", "workers", "layout", "page cache", "synthetic", "files",
             "files / synthetic [95% CI]",
             "waited on input", "alone a rank", "asked a rank", "verdict", "CPU cores a rank", "what a GPU would need",
             "storage a node needs (MB/s)", "16 nodes need (MB/s)", "accelerator utilization"],
            [[f"{r.system} {r.framework} {r.benchmark} {r.model}", str(r.np), text(r.loader), text(r.workers),
              text(r.layout), text(r.cache),
              fmt(r.synthetic), fmt(r.files), ratio(r.ratio, r.ratio_low, r.ratio_high), pct(r.wait_share),
              fmt(r.alone_per_rank), fmt(r.asked_per_rank), r.verdict, cores(r.cores_per_gpu), text(r.gpu_need),
              fmt(r.node_mb_s),
              fmt(r.cluster_mb_s), (pct(r.au) + (" (≥ 90%)" if r.au >= 0.9 else " (below 90%)"))
              if not missing(r.au) else "n/a"] for r in table.itertuples()])


def _datapath(inputs: Inputs) -> pd.DataFrame:
    return datapath_table(inputs.table, inputs.collection.runs, inputs.draws, inputs.points, inputs.margin,
                          inputs.min_runs, inputs.pipelines)


def datapath_summary(table: pd.DataFrame, most: int = 3) -> list[str]:
    """The executive summary's lines on reading real data: each files configuration's ratio to synthetic and its
    verdict (the worst first), a pipeline alone's rate; counted past ``most``."""
    ordered = table.assign(_r=table["ratio"].fillna(np.inf)).sort_values("_r")
    lines = []
    for r in ordered.head(most).itertuples():
        against = f"{ratio(r.ratio, r.ratio_low, r.ratio_high)}× synthetic; " if not missing(r.ratio) else ""
        lines.append(f"  Data path: {r.system} {r.benchmark} {r.model} at {r.np} rank(s) reading files: {against}"
                     f"{r.verdict} (see Data path).")
    if len(table) > most:
        lines.append(f"  Data path: {len(table) - most} more configuration(s) reading files (see Data path).")
    return lines


def damage_banner(table: pd.DataFrame) -> list[str]:
    """A line for each configuration whose runs met corrupt or vanished samples: damage stands before the table."""
    hit = table[table["damaged"].fillna(0) > 0] if "damaged" in table else table.iloc[0:0]
    return [f"{r.system} {r.benchmark} {r.model} at {r.np} rank(s) met {int(r.damaged):,} corrupt or vanished "
            f"sample(s) reading its files (first: {r.damaged_named}): its figures rest on what could be read"
            for r in hit.itertuples()]


DATAPATH_SECTION = TableSection("datapath", "Data path: real data against synthetic", DATAPATH_TEXT, datapath_rows,
                                _datapath, banner=damage_banner)
