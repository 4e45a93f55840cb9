"""How often ``history check``'s change detection calls a change that is not there, and finds one that is, on the
noise machines have: independent runs and a pace that wanders (AR(1), φ 0.7: one night resembles the one before),
flat or with a planted 7% slowdown, for the shuffles it uses (circular blocks as long as the runs' autocorrelation
asks) against shuffling runs one by one and against prewhitening (detecting on x_t - ρ x_{t-1}). A history is
30 runs at a 2.5% spread; a call is a regression or improvement verdict (analysis/history/changes.py).

    python benchmarks/change_detection.py                  # 400 histories a case
    python benchmarks/change_detection.py --histories 2000
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Callable

import numpy as np

from hvdbench.analysis.history import changes
from hvdbench.analysis.history.changes import judge_history

RUNS, SPREAD, PHI, SLOWDOWN, AT = 30, 0.025, 0.7, 0.07, 19


def ar1(n: int, phi: float, sd: float, rng: np.random.Generator) -> np.ndarray:
    """An AR(1) series of n values with marginal standard deviation sd."""
    e = rng.normal(0.0, sd * math.sqrt(1 - phi * phi), n)
    x = np.empty(n)
    x[0] = rng.normal(0.0, sd)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + e[i]
    return x


CASES: dict[str, Callable[[np.random.Generator], np.ndarray]] = {
    "independent, flat": lambda rng: rng.normal(0.0, SPREAD, RUNS),
    "AR(1) 0.7, flat": lambda rng: ar1(RUNS, PHI, SPREAD, rng),
    "independent, 7% slower from run 20": lambda rng: rng.normal(0.0, SPREAD, RUNS) +
    np.r_[np.zeros(AT), np.full(RUNS - AT, math.log(1 - SLOWDOWN))],
    "AR(1) 0.7, 7% slower from run 20": lambda rng: ar1(RUNS, PHI, SPREAD, rng) +
    np.r_[np.zeros(AT), np.full(RUNS - AT, math.log(1 - SLOWDOWN))],
}


def _one_by_one() -> None:
    changes.block_length = lambda x, cuts=(): 1  # type: ignore[assignment]


def _prewhitened() -> None:
    found = changes.change_points

    def whitened(x: np.ndarray, *args: object, **kwargs: object) -> list[int]:
        rho = changes.shown_rho(x, found(x, *args, **kwargs))  # type: ignore[arg-type]
        return [c + 1 for c in found(x[1:] - rho * x[:-1], *args, **kwargs)]  # type: ignore[arg-type]
    changes.block_length = lambda x, cuts=(): 1  # type: ignore[assignment]
    changes.change_points = whitened  # type: ignore[assignment]


def rates(histories: int, seed: int = 7) -> dict[str, float]:
    """Each case's share of histories called a regression or improvement."""
    out = {}
    for name, make in CASES.items():
        rng = np.random.default_rng(seed)
        called = sum(judge_history(np.exp(7.0 + make(rng)), 0.02).finding.finding in ("regression", "improvement")
                     for _ in range(histories))
        out[name] = called / histories
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--histories", type=int, default=400)
    args = parser.parse_args()
    kept = (changes.block_length, changes.change_points)
    for label, prepare in (("blocks (hvdbench)", None), ("one by one", _one_by_one), ("prewhitened", _prewhitened)):
        changes.block_length, changes.change_points = kept
        if prepare is not None:
            prepare()
        start = time.perf_counter()
        found = rates(args.histories)
        took = (time.perf_counter() - start) / (args.histories * len(CASES))
        print(f"{label}: " + "; ".join(f"{name}: {share:.1%}" for name, share in found.items())
              + f" ({took * 1e3:.0f} ms a history)")
    changes.block_length, changes.change_points = kept


if __name__ == "__main__":
    main()
