"""The definitions every figure of hvdbench rests on, in one place: a run's throughput, and how a run
ended judged from its rank logs. Used by the ranks' own summaries, the executors and the report.
Importable without any framework; works on plain numbers and on NumPy arrays alike.
"""

from __future__ import annotations

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


def percentile_interval(values: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The central ``confidence`` interval of bootstrap values (the 2.5th and 97.5th percentiles at 95%)."""
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(values, [tail, 1.0 - tail])
    return float(low), float(high)


def throughput_resamples(durations: np.ndarray, samples: np.ndarray, n: int, seed: int) -> np.ndarray:
    """``n`` bootstrap resamples of a run's throughput from (steps x ranks) matrices of step durations and
    samples, resampling whole steps (all ranks together, as a synchronous step is shared). A resample is a
    vector of step counts, so every resample's per-rank sums are one matrix product: cheap for 1,024 ranks
    x 1,000 steps. The report's intervals and an adaptive run's stopping rule both come from here."""
    rows = durations.shape[0]
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, rows, size=(n, rows)) + (np.arange(n) * rows)[:, None]
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
    """``run_outcome`` from the rank logs on disk: what an executor checks once the launcher has ended."""
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
            elif rec["kind"] == "error":
                errors.append(f"rank {rec['rank']}: {rec.get('message', '')}")
    return run_outcome(np, summaries, errors, recorded, foreign[:1])
