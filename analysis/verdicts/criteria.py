"""A buyer's criteria file (``[[criterion]]`` tables: a name, a metric, ``min`` or ``max``, selectors naming the
runs), read and checked in one line a problem: each metric with the table it is read from, each selector with its
type and the tables it applies to. ``hvdbench accept`` judges them (analysis/verdicts/acceptance.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hvdbench.core.collective_ops import OPS, TIMINGS
from hvdbench.core.errors import UsageError
from hvdbench.core.flags import byte_size
from hvdbench.core.run_table import PYTHON_TYPES, RUNS_SCHEMA
from hvdbench.core.validate import read_toml

from .. import keys

# metric -> (table it is read from, what it is, a higher value is better)
METRICS: dict[str, tuple[str, str, bool]] = {
    "throughput": ("scaling", "samples/s, all ranks", True),
    "throughput_per_gpu": ("scaling", "samples/s per GPU", True),
    "speedup": ("scaling", "throughput against 1 GPU", True),
    "efficiency": ("scaling", "speedup / GPUs", True),
    "tflops_per_gpu": ("scaling", "achieved TFLOP/s per GPU", True),
    "percent_of_peak": ("scaling", "% of the device's dense peak", True),
    "comm_cost": ("scaling", "share of throughput lost to the gradient exchange", False),
    "energy_per_sample": ("details", "J per sample", False),
    "busbw": ("collectives", "bus bandwidth, GB/s", True),
    "algbw": ("collectives", "algorithm bandwidth, GB/s", True),
    "screen_relative": ("screening", "each GPU or node against the fleet's median", True),
    "time_to_train": ("quality", "seconds to the quality target, evaluation on the clock (MLPerf's rule: every run "
                                 "that ended counts; no valid score, not judged)", False),
}
# Each selector a criterion may give, with the type of its value (bool and int exact: 32.0 is no batch size) and
# the metrics' tables it applies to. A selector that does not apply to its criterion's metric is refused.
_TEXT, _WHOLE = str, int
# a training run is selected by its configuration and its swept knobs: run-table columns, typed as the table is
TRAINING_KEYS: dict[str, type] = {name: PYTHON_TYPES[RUNS_SCHEMA[name]]
                                  for name in (*keys.CONFIG, *keys.KNOBS, "independent")}
COLLECTIVE_KEYS: dict[str, type] = {"system": _TEXT, "placement": _TEXT, "launcher": _TEXT, "controller": _TEXT,
                                    "op": _TEXT, "dtype": _TEXT, "bytes": _WHOLE, "path": _TEXT, "backend": _TEXT,
                                    "pattern": _TEXT, "timing": _TEXT}
SCREENING_KEYS: dict[str, type] = {"system": _TEXT, "framework": _TEXT, "benchmark": _TEXT, "model": _TEXT,
                                   "level": _TEXT}
QUALITY_KEYS: dict[str, type] = {"system": _TEXT, "framework": _TEXT, "benchmark": _TEXT, "model": _TEXT}
SELECTORS = {"scaling": TRAINING_KEYS, "details": TRAINING_KEYS, "collectives": COLLECTIVE_KEYS,
             "screening": SCREENING_KEYS, "quality": QUALITY_KEYS}
SIZES = ("gpus", "nodes")  # of every table but screening's (each GPU or node of a screen is one unit)
CHOICES = {"op": tuple(OPS), "dtype": ("fp32", "fp16", "bf16"), "level": ("gpu", "node"),
           "pattern": ("isolated", "training"), "timing": TIMINGS}
KEYS = ("name", "metric", "min", "max", *SIZES, *dict.fromkeys([*TRAINING_KEYS, *COLLECTIVE_KEYS, *SCREENING_KEYS]))


@dataclass(frozen=True)
class Criterion:
    """One promise: ``metric`` at least ``threshold`` (``bound`` min) or at most (max), on the runs the
    selectors name."""

    name: str
    metric: str
    bound: str
    threshold: float
    selectors: dict[str, Any]
    gpus: int | None
    nodes: int | None

    def meets(self, value: float) -> bool:
        return value >= self.threshold if self.bound == "min" else value <= self.threshold


def load_criteria(path: Path) -> list[Criterion]:
    """The criteria of a TOML file; a malformed one is a UsageError in one line naming the file and entry."""
    try:
        data = read_toml(Path(path), "a criteria file")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    entries = data.get("criterion")
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise UsageError(f"{path}: expected [[criterion]] tables (name, metric, min or max, selectors)")
    criteria = [_criterion(path, i, entry) for i, entry in enumerate(entries)]
    names = [c.name for c in criteria]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(f"{path}: criterion name {twice[0]!r} is used twice; each needs its own")
    return criteria


def _criterion(path: Path, index: int, entry: dict[str, Any]) -> Criterion:
    where = f"{path}: criterion[{index}]"
    unknown = sorted(set(entry) - set(KEYS))
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(unknown)}; valid: {', '.join(KEYS)}")
    name, metric = entry.get("name"), entry.get("metric")
    if not isinstance(name, str) or not name.strip():
        raise UsageError(f"{where}: give it a name")
    where = f"{where} ({name})"
    if metric not in METRICS:
        raise UsageError(f"{where}: metric {metric!r} is unknown; valid: {', '.join(METRICS)}")
    bounds = [b for b in ("min", "max") if b in entry]
    if len(bounds) != 1:
        raise UsageError(f"{where}: give exactly one of min or max")
    threshold = entry[bounds[0]]
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
        raise UsageError(f"{where}: {bounds[0]} must be a finite number, got {threshold!r}")
    if metric in FRACTIONS and not -1.0 <= threshold <= 2.0:
        raise UsageError(f"{where}: {metric} is a fraction (0.8 is 80%), got {bounds[0]} = {threshold:g}")
    table = METRICS[metric][0]
    allowed = SELECTORS[table]
    selectors = {k: v for k, v in entry.items() if k not in ("name", "metric", "min", "max", *SIZES)}
    for key, value in {**selectors, **{k: entry[k] for k in SIZES if k in entry}}.items():
        if key not in allowed and not (key in SIZES and table != "screening"):
            valid = ", ".join([*allowed, *(SIZES if table != "screening" else ())])
            raise UsageError(f"{where}: {key} does not select what metric {metric} reads (the {table} table); "
                             f"its selectors: {valid}")
        _check_value(where, key, value, int if key in SIZES else allowed[key])
    if "bytes" in selectors:
        selectors["bytes"] = _bytes(selectors["bytes"], where)
    return Criterion(name, metric, bounds[0], float(threshold), selectors, entry.get("gpus"), entry.get("nodes"))


FRACTIONS = ("efficiency", "comm_cost", "screen_relative")  # written as fractions (0.8), as the tables hold them


def _check_value(where: str, key: str, value: Any, kind: type) -> None:
    """A selector's value of its type: text, a whole number (no 32.0, no "32"), true or false; one of the
    choices where it has them; a size also as text (1G)."""
    if key == "bytes" and isinstance(value, str):
        return  # a size such as 1G: _bytes reads it
    ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
    if kind is int and ok and (value < 1 if key in (*SIZES, "batch_size", "threads", "bytes") else False):
        ok = False
    if not ok:
        said = {str: "text", int: "a whole number, 1 or more", bool: "true or false"}[kind]
        raise UsageError(f"{where}: {key} must be {said}, got {value!r}")
    if key in CHOICES and value not in CHOICES[key]:
        raise UsageError(f"{where}: {key} {value!r} is not one of {', '.join(CHOICES[key])}")


def _bytes(value: Any, where: str) -> int:
    try:
        return value if isinstance(value, int) and not isinstance(value, bool) else byte_size(str(value))
    except Exception:  # noqa: BLE001 - argparse's type error: one line below
        raise UsageError(f"{where}: bytes must be a size such as 1G or 1073741824, got {value!r}") from None
