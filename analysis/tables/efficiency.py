"""How well the hardware is used: achieved TFLOP/s per GPU against the device's dense peak at the run's
precision (peaks.toml, extendable), and a collective's busbw against the nominal rate of the links its GPUs
share (NVLink: links x 25 GB/s per direction; PCIe: generation x width). Nothing here fails for a device it
does not know: the cell says so."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from hvdbench.core.errors import ReportError
from hvdbench.core.validate import read_toml

from ..formatting import missing

BUILTIN = Path(__file__).with_name("peaks.toml")
PRECISION_COLUMN = {"fp32": "fp32", "tf32": "tf32", "fp16": "fp16", "amp": "fp16", "mixed_float16": "fp16",
                    "bf16": "bf16", "mixed_bfloat16": "bf16"}
COLUMNS = ("fp32", "tf32", "fp16", "bf16")
MAX_TFLOPS = 100_000.0  # far above any accelerator's dense peak: a larger figure is a unit slip
MIN_TFLOPS = 0.001  # one GFLOP/s, below any device worth a peak: a smaller figure is a unit slip too
NVLINK_GBS_PER_LINK = 25.0  # per direction; NVLink 2, 3 and 4 alike (V100, A100, H100)
PCIE_GBS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}  # per direction, after encoding


@dataclass(frozen=True)
class Peak:
    """One device model's dense peaks (TFLOP/s by precision column) and where they come from."""

    name: str
    match: tuple[str, ...]
    tflops: dict[str, float]
    source: str


def load_peaks(extra: Path | None = None) -> list[Peak]:
    """The peak table: a user's file first (its entries win), then the built-in one. A malformed file is a
    ReportError naming the file and the entry."""
    files = ([extra] if extra is not None else []) + [BUILTIN]
    peaks: list[Peak] = []
    for path in files:
        try:
            data = read_toml(path, "a peak table")
        except ValueError as exc:
            raise ReportError(str(exc)) from None
        devices = data.get("device")
        if not isinstance(devices, list) or not devices:
            raise ReportError(f"{path}: expected [[device]] tables (name, match, source, TFLOP/s per precision), "
                              f"got {'none' if devices is None else type(devices).__name__}")
        for i, entry in enumerate(devices):
            peaks.append(_peak(path, i, entry))
    return peaks


def _peak(path: Path, index: int, entry: Any) -> Peak:
    where = f"{path}: device[{index}]"
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise ReportError(f"{where}: expected a table with name, match, source and TFLOP/s per precision")
    match = entry.get("match", [entry["name"]])
    if isinstance(match, str):
        match = [match]
    if not isinstance(match, list) or not match or not all(isinstance(m, str) and m.strip() for m in match):
        raise ReportError(f"{where}: match must be a non-empty list of device-name substrings")
    unknown = sorted(set(entry) - {"name", "match", "source", *COLUMNS})
    if unknown:
        raise ReportError(f"{where}: unknown key(s) {', '.join(unknown)}; valid: name, match, source, "
                          f"{', '.join(COLUMNS)}")
    tflops = {}
    for column in COLUMNS:
        value = entry.get(column)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ReportError(f"{where}: {column} must be a positive number of TFLOP/s, got {value!r}")
        if value > MAX_TFLOPS:
            raise ReportError(f"{where}: {column} {value:g} TFLOP/s is beyond any device (at most {MAX_TFLOPS:g}); "
                              "peaks are in TFLOP/s, not FLOP/s")
        if value < MIN_TFLOPS:
            raise ReportError(f"{where}: {column} {value:g} TFLOP/s is below any device (at least {MIN_TFLOPS:g}); "
                              "peaks are in TFLOP/s, not PFLOP/s")
        tflops[column] = float(value)
    return Peak(entry["name"], tuple(m.lower() for m in match), tflops, str(entry.get("source", "")))


def find_peak(peaks: Iterable[Peak], device: str | None) -> Peak | None:
    """The first entry whose match is in the device's name (case-insensitive)."""
    if not device:
        return None
    name = device.lower()
    return next((p for p in peaks if any(m in name for m in p.match)), None)


def peak_cell(peaks: list[Peak], device: Any, precision: Any, on_gpu: bool, tf32: Any = False) -> tuple[float, str]:
    """(peak TFLOP/s, what the cell says): the entry and source, or why there is no peak: a GPU model the
    table lacks is "unknown peak", a CPU without an entry "no peak". An fp32 run on a device with a TF32 figure
    is judged against it unless the run recorded that TF32 was off (``tf32`` False): PyTorch's convolutions
    run as TF32 by default, so the fp32 figure would put an fp32 CNN above 100%."""
    device = device if isinstance(device, str) else None
    column = PRECISION_COLUMN.get(str(precision), "fp32")
    peak = find_peak(peaks, device)
    if column == "fp32" and tf32 is not False and peak is not None and "tf32" in peak.tflops:
        column = "tf32"
    if peak is None:
        return math.nan, ("unknown peak" if on_gpu else "no peak") + (f" ({device})" if device else "")
    if column not in peak.tflops:
        return math.nan, f"unknown peak: no {column} figure for {peak.name}"
    return peak.tflops[column], f"{peak.name} {column} {peak.tflops[column]:g} TFLOP/s ({peak.source})"


def with_peaks(table: pd.DataFrame, peaks: list[Peak]) -> pd.DataFrame:
    """The scaling table with achieved TFLOP/s per GPU judged against the peak: peak_tflops, pct_of_peak and
    peak (the entry used, or why none)."""
    if table.empty:
        return table
    tf32 = table["tf32"].astype(object) if "tf32" in table else pd.Series(None, index=table.index, dtype=object)
    cells = [peak_cell(peaks, r.device_name, r.precision, _on_gpu(r.device_name, peaks), False if t is False else t)
             for r, t in zip(table.itertuples(), tf32)]
    out = table.copy()
    out["peak_tflops"] = [c[0] for c in cells]
    out["peak"] = pd.array([c[1] for c in cells], dtype="string")
    out["pct_of_peak"] = out["tflops_per_gpu"] / out["peak_tflops"] * 100.0
    return out


def on_gpu_name(device: Any) -> bool:
    """Whether a recorded device name is an NVIDIA GPU's (a CPU run records its CPU's model name)."""
    return isinstance(device, str) and bool(re.search(r"nvidia|tesla|quadro|geforce|rtx", device, re.I))


CPU_NAME = re.compile(r"\bcpu\b|processor|xeon|epyc|opteron|ryzen|threadripper|core\(tm\)|neoverse|graviton|"
                      r"kunpeng|power\d|apple m\d", re.I)  # how CPUs name themselves (a run's cpu_model)


def on_cpu_ranks(devices: Any) -> bool:
    """Whether every device a table's rows record is a CPU (so its sizes count CPU ranks, never GPUs): each known,
    none a GPU's name and each a CPU's; False where any is unknown or neither (an imported result's "H100")."""
    names = pd.Series(list(devices), dtype=object)
    return len(names) > 0 and bool(names.notna().all()) and not names.map(on_gpu_name).any() and \
        bool(names.map(lambda name: bool(CPU_NAME.search(str(name)))).all())


def ranks_title(devices: Any) -> str:
    """A size column's title: ``GPUs``, or ``CPU ranks`` where every row trained on CPUs."""
    return "CPU ranks" if on_cpu_ranks(devices) else "GPUs"


def _on_gpu(device: Any, peaks: list[Peak]) -> bool:
    """Whether a device name is a GPU's (NVIDIA's names, or any the table knows) rather than a CPU's."""
    return on_gpu_name(device) or (isinstance(device, str) and find_peak(peaks, device) is not None)


def link_rate(placement: Any, nodes: int, pcie_gen: Any, pcie_width: Any) -> tuple[float, str] | None:
    """The nominal per-direction rate (GB/s) of the links a single-node placement's GPUs share, and its name:
    NV# is # NVLinks x 25 GB/s; PIX, PXB, PHB, NODE and SYS go over PCIe (generation x width, from the GPUs'
    own link); None for several nodes or a mixed placement ("all", "auto")."""
    if nodes != 1 or not isinstance(placement, str):
        return None
    if match := re.fullmatch(r"NV(\d+)", placement):
        links = int(match.group(1))
        return links * NVLINK_GBS_PER_LINK, f"{links} NVLinks, {links * NVLINK_GBS_PER_LINK:g} GB/s"
    if placement in ("PIX", "PXB", "PHB", "NODE", "SYS") and not pd.isna(pcie_gen) and not pd.isna(pcie_width):
        lane = PCIE_GBS_PER_LANE.get(int(pcie_gen))
        if lane:
            rate = lane * int(pcie_width)
            return rate, f"PCIe gen{int(pcie_gen)} x{int(pcie_width)}, {rate:.1f} GB/s"
    return None


NEAR_LINEAR = "†"  # above linear, its interval covering linear: noise
SUPERLINEAR = "‡"  # above linear beyond the noise


def efficiency_mark(value: Any, low: Any) -> str:
    """The mark every table and the summary put on an efficiency above linear (none at or below it)."""
    if value is None or pd.isna(value) or value <= 1.0 or low is None or pd.isna(low):
        return ""
    return NEAR_LINEAR if low <= 1.0 else SUPERLINEAR


MARK_MEANING = {NEAR_LINEAR: f"{NEAR_LINEAR} above linear, but its interval covers linear: within the noise.",
                SUPERLINEAR: f"{SUPERLINEAR} above linear beyond the noise (cache effects, a smaller per-GPU problem, "
                             "or a slow 1-GPU run)."}


def efficiency_cell(value: Any, low: Any, high: Any) -> str:
    """``93% [90–96%]``, marked where above linear: † when its interval still covers linear (noise, often
    in the 1-GPU run, can do that), ‡ when it lies wholly above."""
    if missing(value):
        return "n/a"
    mark = efficiency_mark(value, low)
    if missing(low) or missing(high) or np.isclose(low, high):
        return f"{value:.0%}{mark}"
    return f"{value:.0%}{mark} [{low:.0%}–{high:.0%}]"


DISTURBED_CV = 0.5  # a 1-rank run whose steps vary this much (coefficient of variation), and 3x its peers' or more
DISTURBED_RATIO = 3.0


def disturbed_baselines(table: pd.DataFrame) -> list[str]:
    """A line for each 1-rank run whose steps varied far more than the runs whose efficiency rests on it (a busy
    machine stalled it): every efficiency against it is then the disturbance's, not the scaling's."""
    if table.empty or "cv" not in table:
        return []
    lines = []
    keys = [k for k in ("system", "framework", "benchmark", "model", "args") if k in table]
    for _, group in table.groupby(keys, sort=True, dropna=False):
        base = group[group["np"] == 1]
        others = group[(group["np"] > 1) & group["cv"].notna()]
        if base.empty or others.empty or pd.isna(base["cv"].iloc[0]):
            continue
        cv, peers = float(base["cv"].iloc[0]), float(others["cv"].median())
        if cv >= DISTURBED_CV and cv >= DISTURBED_RATIO * peers:
            first = base.iloc[0]
            lines.append(f"The 1-rank run of {first['model']} that these efficiencies rest on was disturbed: its steps "
                         f"vary {cv:.0%} (CV) against {peers:.0%} in the runs beside it, so its speedups and "
                         "efficiencies are the disturbance's: rerun it (--repeats 3 alternates the runs).")
    return lines
