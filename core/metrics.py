"""The definitions every figure of hvdbench rests on, in one place: a run's throughput, and how a run
ended judged from its rank logs. Used by the ranks' own summaries, the executors and the report.
Importable without any framework; works on plain numbers and on NumPy arrays alike.
"""

from __future__ import annotations

import math
import reprlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, TypeVar

import numpy as np

from .records import rank_log_name, read_records

N = TypeVar("N")


def rank_throughput(samples: N, step_seconds: N) -> N:
    """One rank's throughput: the samples of its timed steps over the sum of those steps' own durations
    (each bounded by a device sync). A run's throughput is the sum of this over its ranks, from every
    rank's own timings, never rank 0 x N; the report computes it over the steady-state steps only."""
    return samples / step_seconds  # type: ignore[operator]


def total_throughput(per_rank: Iterable[Any]) -> float:
    """The run's throughput from each rank's ``rank_throughput`` (a NumPy array is summed by NumPy)."""
    return float(per_rank.sum()) if hasattr(per_rank, "sum") else float(sum(per_rank))


CONFIDENCE = 0.95  # every interval the suite prints
MIN_RUNS = 3  # complete runs of a configuration a verdict needs on each side by default (--min-runs)
MARGIN_PCT = 2.0  # the smallest change that counts unless --margin says: a verdict's margin, in percent


def percentile_interval(values: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The central ``confidence`` interval of bootstrap values (the 2.5th and 97.5th percentiles at 95%)."""
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return float(low), float(high)


def block_length(series: np.ndarray) -> int:
    """Steps per block for a circular block bootstrap of this step-time series: Politis and White's automatic
    choice (2004, with Patton, Politis and White's 2009 correction). The flat-top lag window's bandwidth is twice
    the last lag whose autocorrelation stands out (|rho| above 2 sqrt(log10(n) / n), none of the next K_N
    standing out), and the block grows with the series' long-run variance and its autocorrelations' weighted
    sum, as n^(1/3). 1 (single steps: the i.i.d. bootstrap) for a series without autocorrelation or under 8
    steps; never above min(3 sqrt(n), n / 3)."""
    values = np.asarray(series, dtype=float)
    n = len(values)
    if n < 8 or not np.isfinite(values).all():
        return 1
    centered = values - values.mean()
    runs = max(5, math.ceil(math.sqrt(math.log10(n))))  # K_N: lags that must all look insignificant
    last = min(math.ceil(math.sqrt(n)) + runs, n - 1)  # the largest lag looked at
    acv = np.array([centered[k:] @ centered[:n - k] / n for k in range(last + 1)])
    if acv[0] <= (1e-9 * abs(float(values.mean()))) ** 2:  # steady to the last digits: nothing to keep together
        return 1
    significant = np.abs(acv[1:] / acv[0]) >= 2.0 * math.sqrt(math.log10(n) / n)  # lag k at index k - 1
    quiet = next((m for m in range(last - runs + 1) if not significant[m:m + runs].any()), last)
    bandwidth = min(2 * quiet, last)
    if bandwidth == 0:
        return 1
    lags = np.arange(1, bandwidth + 1)
    window = np.where(lags / bandwidth <= 0.5, 1.0, 2.0 * (1.0 - lags / bandwidth))  # the flat-top window
    weighted = 2.0 * float((window * lags * acv[1:bandwidth + 1]).sum())
    long_run = float(acv[0] + 2.0 * (window * acv[1:bandwidth + 1]).sum())
    if long_run <= 0:
        return 1
    block = (2.0 * weighted ** 2 / (4.0 / 3.0 * long_run ** 2)) ** (1.0 / 3.0) * n ** (1.0 / 3.0)
    return int(max(1, min(math.ceil(block), math.ceil(min(3.0 * math.sqrt(n), n / 3.0)))))


def throughput_resamples(durations: np.ndarray, samples: np.ndarray, n: int, seed: int, block: int = 1) -> np.ndarray:
    """``n`` bootstrap resamples of a run's throughput from (steps x ranks) matrices of step durations and
    samples, resampling whole steps (all ranks together, as a synchronous step is shared) in circular blocks of
    ``block`` consecutive steps (Politis and Romano's circular block bootstrap: autocorrelated step times, from
    clocks, heat or a neighbour's load, keep their runs; ``block_length`` chooses it; 1 is the i.i.d.
    bootstrap). A resample is a vector of step counts, so every resample's per-rank sums are one matrix
    product: cheap for 1,024 ranks x 1,000 steps. The report's intervals and an adaptive run's stopping rule
    both come from here."""
    rows = durations.shape[0]
    rng = np.random.default_rng(seed)
    if block <= 1:
        picked = rng.integers(0, rows, size=(n, rows))
    else:
        starts = rng.integers(0, rows, size=(n, math.ceil(rows / block)))
        picked = ((starts[:, :, None] + np.arange(block)) % rows).reshape(n, -1)[:, :rows]
    idx = picked + (np.arange(n) * rows)[:, None]
    counts = np.bincount(idx.ravel(), minlength=n * rows).reshape(n, rows).astype(float)
    return rank_throughput(counts @ samples, counts @ durations).sum(axis=1)


@dataclass(frozen=True)
class Outcome:
    """How a run ended as its records tell it: ok, failed (a rank's error or the launcher's recorded
    end) or incomplete (some rank wrote no summary), with a one-line reason."""

    status: str
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def run_outcome(np: int, summary_ranks: Iterable[int], errors: Iterable[str], recorded: Any = None,
                foreign: Iterable[str] = ()) -> Outcome:
    """The one judgement of a run, used by the local and SLURM executors and by the report.

    ``recorded`` is the launcher's RunStatus (or None); a recorded end other than ok wins, then records
    that belong to another run (inconsistent: never ok), then a rank's error record, then ranks without
    a summary."""
    if recorded is not None and recorded.status != "ok":
        return Outcome(recorded.status,
                       f"{recorded.status}: {recorded.message}" if recorded.message else recorded.status)
    foreign = list(foreign)
    if foreign:
        return Outcome("inconsistent", "inconsistent: " + "; ".join(foreign[:2])
                       + (f"; and {len(foreign) - 2} more" if len(foreign) > 2 else ""))
    errors = list(errors)
    if errors:
        return Outcome("failed", errors[0])
    missing = sorted(set(range(np)) - set(summary_ranks))
    if missing:
        return Outcome("incomplete", f"incomplete: no summary from rank(s) {reprlib.repr(missing)}")
    return Outcome("ok")


def logged_outcome(run_dir: Path, np: int, recorded: Any = None) -> Outcome:
    """``run_outcome`` from the rank logs on disk: what an executor checks once the launcher has ended, and what
    an ending that comes before then (a time limit's warning) asks of a run measured whole."""
    summaries: set[int] = set()
    errors: list[str] = []
    foreign: list[str] = []
    for rank in range(np):
        path = run_dir / rank_log_name(rank)
        try:
            records = read_records(path) if path.exists() or path.is_symlink() else []
        except OSError as exc:  # no regular file (a FIFO, a device), or unreadable
            foreign.append(str(exc).replace(str(run_dir) + "/", ""))
            continue
        for rec in records:
            if rec["rank"] != rank or rec["size"] != np:
                foreign.append(f"{path.name} holds records of rank {rec['rank']} of {rec['size']}")
            elif rec["kind"] == "summary":
                summaries.add(rec["rank"])
                if rec.get("loss_finite") is False:  # the rank's own exit fails it too; its log says so alone
                    errors.append(f"rank {rec['rank']}: a loss was not finite")
            elif rec["kind"] == "error":
                errors.append(f"rank {rec['rank']}: {rec.get('message', '')}")
    return run_outcome(np, summaries, errors, recorded, foreign[:1])
