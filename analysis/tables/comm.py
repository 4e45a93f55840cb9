"""Collective bandwidth: algbw and busbw per size from every rank's own times, peaks, Horovod vs MPI, a plot."""

from __future__ import annotations

import math

from typing import Any, Sequence

import numpy as np
import pandas as pd

from hvdbench.core.collective_ops import summarize
from hvdbench.readers.nccl_tests import BACKEND as IMPORTED

from ..keys import COLLECTIVE_RUN
from ..collect import Collection
from .efficiency import link_rate, ranks_title
from ..formatting import Rows, fmt, missing

RUN_KEYS = COLLECTIVE_RUN
CASE_KEYS = ["op", "backend", "dtype", "bytes", "pattern", "timing"]
COMM_TABLE_SCHEMA: dict[str, str] = {
    "system": "string", "placement": "string", "np": "int64", "nodes": "int64", "launcher": "string",
    "controller": "string", "op": "string", "backend": "string", "path": "string", "dtype": "string", "bytes": "int64",
    "time_mean_us": "float64", "time_min_us": "float64", "algbw_gbs": "float64", "busbw_gbs": "float64",
    "busbw_peak_gbs": "float64", "link_gbs": "float64", "link": "string", "pattern": "string", "run_id": "string",
    "timing": "string", "time_us": "float64", "path_cost_us": "float64",
}
RATIO_BYTES = 64 * 2**20
TIMING_WORDS = {"batch": "calls back to back", "each": "each call alone", "steps": "training steps"}
PATHS = {IMPORTED: "nccl-tests (NCCL alone, its own figure)"}  # a backend's path where not Horovod's or MPI's
PATTERN_PATH = ", training pattern of "  # a training-pattern curve's path: "Horovod (mpi), training pattern of ..."


def iteration_times(case: pd.DataFrame) -> np.ndarray:
    """One collective case's (ranks x iterations) times, the iterations every rank recorded."""
    return case.pivot_table(index="iteration", columns="rank", values="time", aggfunc="first").dropna().to_numpy().T


def comm_table(collection: Collection) -> pd.DataFrame:
    """One row per run and case: per iteration (or batch) the slowest rank's time; the figure (a batch-timed
    case's median over batches, else the mean over calls), mean and min over them; the run, its pattern
    (isolated calls, or a training run's), its timing and what a call of its path costs kept with each row. Only
    complete runs: one left out (a copy of another, inconsistent, failed) counts for nothing here either."""
    rows: list[dict[str, Any]] = []
    runs = collection.runs[collection.runs["status"] == "ok"].set_index("run_id")
    pcie = collection.env.groupby("run_id")[["pcie_max_gen", "pcie_max_width"]].min() if len(collection.env) else None
    for (run_id, *case), group in collection.comm.groupby(["run_id", *CASE_KEYS], sort=True):
        per_rank = iteration_times(group)
        if not per_rank.size or run_id not in runs.index:
            continue
        run = runs.loc[run_id]
        op, backend, _, nbytes, pattern, timing = case
        s = summarize(op, int(nbytes), int(run["np"]), per_rank, timing)
        path = f"Horovod ({run['controller']})" if backend == "horovod" else PATHS.get(backend, "raw MPI (mpi4py)")
        if pattern != "isolated":
            path += f"{PATTERN_PATH}{group['like_workload'].iloc[0]}"
        gen, width = pcie.loc[run_id] if pcie is not None and run_id in pcie.index else (np.nan, np.nan)
        link = link_rate(run["placement"] or None, int(run["nodes"]), gen, width) or (np.nan, None)
        cost = run["path_cost_horovod_s" if backend == "horovod" else "path_cost_mpi_s"]
        rows.append({**{k: run[k] for k in RUN_KEYS}, **dict(zip(CASE_KEYS[:4], case)), "path": path,
                     "time_us": s["time_s"] * 1e6, "path_cost_us": cost * 1e6 if pd.notna(cost) else np.nan,
                     "time_mean_us": s["time_mean_s"] * 1e6, "time_min_us": s["time_min_s"] * 1e6,
                     "algbw_gbs": s["algbw_gbs"], "busbw_gbs": s["busbw_gbs"], "busbw_peak_gbs": s["busbw_peak_gbs"],
                     "link_gbs": link[0], "link": link[1], "pattern": pattern, "run_id": run_id, "timing": timing})
    out = pd.DataFrame(rows, columns=list(COMM_TABLE_SCHEMA)).astype(COMM_TABLE_SCHEMA)
    # the devices its runs ran on, beside the table (not a column): its sizes read CPU ranks where all were CPUs
    out.attrs["devices"] = [runs.loc[r, "device_name"] for r in dict.fromkeys(out["run_id"])] \
        if "device_name" in runs else []
    return out


def peak_table(table: pd.DataFrame) -> pd.DataFrame:
    """The highest busbw (from each size's figure) of each configuration, the size that reached it, and the
    cost of a call of its path (where the run measured it)."""
    keys = ["system", "placement", "np", "op", "path", "dtype", "timing"]
    best = table.loc[table.groupby(keys, sort=True)["busbw_gbs"].idxmax()] if len(table) else table
    return best[keys + ["busbw_gbs", "bytes", "link_gbs", "link", "path_cost_us"]].rename(
        columns={"busbw_gbs": "peak_busbw_gbs", "bytes": "at_bytes"})


def horovod_over_mpi(table: pd.DataFrame, nbytes: int = RATIO_BYTES) -> pd.DataFrame:
    """busbw through Horovod (each controller) / through raw MPI, at the size both measured closest to nbytes;
    isolated calls only (a training pattern's step of many tensors is not one call's peer)."""
    keys = ["system", "placement", "np", "op", "dtype", "timing"]
    rows = []
    table = table[~table["path"].str.contains(PATTERN_PATH, regex=False)]
    for key, group in table.groupby(keys, sort=True):
        both = group.pivot_table(index="bytes", columns="path", values="busbw_gbs", aggfunc="first")
        raw = "raw MPI (mpi4py)"
        for path in [c for c in both.columns if c.startswith("Horovod")] if raw in both.columns else []:
            pair = both[[path, raw]].dropna()
            if pair.empty:
                continue
            size = int(pair.index[np.argmin(np.abs(np.log2(pair.index.to_numpy()) - np.log2(nbytes)))])
            rows.append({**dict(zip(keys, key)), "path": path, "bytes": size, "horovod_gbs": pair.loc[size, path],
                         "mpi_gbs": pair.loc[size, raw], "ratio": pair.loc[size, path] / pair.loc[size, raw]})
    return pd.DataFrame(rows, columns=keys + ["path", "bytes", "horovod_gbs", "mpi_gbs", "ratio"])


def plot_bandwidth(table: pd.DataFrame) -> str | None:
    """busbw against message size as SVG: one panel per operation, a line per backend, dtype and placement."""
    from ..drawing import figure, plain, svg_text

    ops = list(dict.fromkeys(table["op"]))
    if not ops:
        return None
    fig, axes = figure(5 * len(ops), 4, cols=len(ops))
    for ax, op in zip(np.atleast_1d(axes), ops):
        for key, group in table[table["op"] == op].groupby(["path", "dtype", "placement", "np", "timing"], sort=True):
            backend, dtype, placement, np_, timing = key
            group = group.sort_values("bytes")
            ax.plot(group["bytes"], group["busbw_gbs"], marker="o", markersize=3,
                    label=plain(f"{backend} {dtype} {placement or ''} {np_} ranks, "
                                f"{TIMING_WORDS[timing]}".replace("  ", " ")))
        ax.set_xscale("log", base=2)
        ax.set_title(op)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("bus bandwidth (GB/s)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    return svg_text(fig)


COMM_TEXT = ("Timed calls back to back (nccl-tests' way: after a barrier and a device sync, the calls, one sync, the "
             "time / calls; per batch the slowest rank's; the figure the median over batches) or each call alone "
             "(bounded by a barrier and a sync; per call the slowest rank's; the figure their mean, which holds each "
             "call's cost of getting there). algbw = bytes / time per call; busbw as nccl-tests defines it "
             "(allreduce × 2(n−1)/n, allgather and alltoall × (n−1)/n, broadcast × 1). Every result was checked. "
             "A call's cost before any byte moves is shown beside (raw MPI: the same call on MPI_COMM_SELF with one "
             "element; Horovod: a one-element allreduce, its background cycle included): small messages stand on it. "
             "Beside each, the share of the nominal per-direction rate of the link the placement's GPUs share "
             "(NV#: # NVLinks × 25 GB/s; PCIe classes: the GPUs' PCIe generation × width; unknown across nodes "
             "or for mixed placements) and the training efficiency measured on the same placement and GPU count.")


def peak_rows(peaks: pd.DataFrame, scaling: pd.DataFrame, devices: Sequence[Any] = ()) -> Rows:
    """The peaks, each beside the training efficiency measured at its size; its sizes CPU ranks where ``devices``
    (those its runs ran on) are all CPUs."""
    rows = []
    for r in peaks.itertuples():
        same = scaling[(scaling["system"] == r.system) & (scaling["placement"] == r.placement)
                       & (scaling["np"] == r.np)]
        training = ", ".join(f"{t.model} {t.efficiency:.0%}" for t in same.itertuples() if not math.isnan(t.efficiency))
        link = (f"{r.peak_busbw_gbs / r.link_gbs:.0%} of {r.link}" if not missing(r.link_gbs)
                else "unknown link rate")
        rows.append([r.system, r.placement or "-", str(r.np), r.op, r.path, r.dtype, TIMED[r.timing],
                     f"{r.peak_busbw_gbs:.3f}", f"{r.at_bytes:,}", link, fmt(r.path_cost_us, 1), training or "-"])
    return (["system", "placement", ranks_title(devices), "op", "through", "dtype", "timed", "peak busbw (GB/s)",
             "at bytes",
             "of the link's nominal rate", "a call's own cost (µs)", "training efficiency here"], rows)


TIMED = {"batch": "back to back", "each": "each call", "steps": "training steps"}


def ratio_rows(ratio: pd.DataFrame, devices: Sequence[Any] = ()) -> Rows:
    return (["system", "placement", ranks_title(devices), "op", "dtype", "timed", "Horovod over", "bytes",
             "Horovod GB/s", "MPI GB/s", "ratio"],
            [[r.system, r.placement or "-", str(r.np), r.op, r.dtype, TIMED[r.timing], r.path, f"{r.bytes:,}",
              f"{r.horovod_gbs:.3f}", f"{r.mpi_gbs:.3f}", f"{r.ratio:.2f}"] for r in ratio.itertuples()])
