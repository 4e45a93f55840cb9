"""Rounds until decided pool every run; where the early rounds spread differently from the late ones (a loaded hour,
then a quiet one), the last word says so, with the F test of the two spreads (its p-value checked against scipy's F
distribution), and until-decided.json keeps it; equal spreads say nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import write_run
from hvdbench.analysis.spread_change import f_test, spread_change
from hvdbench.core.spec import RunSpec


@pytest.mark.parametrize("seed", range(6))
def test_the_f_tests_p_value_is_scipys(seed: int) -> None:
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(seed)
    a, b = rng.normal(0, 0.05 * (1 + seed % 3), 4 + seed), rng.normal(0, 0.05, 6)
    ratio = np.var(a, ddof=1) / np.var(b, ddof=1)
    upper = stats.f.sf(ratio, len(a) - 1, len(b) - 1)
    assert f_test(a, b) == pytest.approx(min(1.0, 2 * min(upper, 1 - upper)), abs=0.004)


def test_a_loud_first_half_is_said_and_equal_halves_are_not() -> None:
    rng = np.random.default_rng(1)
    loud = list(np.exp(np.r_[rng.normal(0, 0.15, 6), rng.normal(0, 0.01, 6)]) * 100)
    changed = spread_change(loud)
    assert changed is not None and changed.early == changed.late == 6 and changed.early_factor > changed.late_factor
    assert changed.line().startswith("the first 6 runs spread ×1.") and "the early runs were the noisier" in \
        changed.line()
    calls = sum(spread_change(list(np.exp(np.random.default_rng(s).normal(0, 0.03, 12)) * 100)) is not None
                for s in range(200))
    assert calls <= 20  # equal spreads: about one in twenty at the 5% level, never a habit
    assert spread_change([100.0] * 7) is None  # too few runs a half


def test_rounds_until_decided_say_and_keep_a_spread_that_changed(tmp_path: Path) -> None:
    from hvdbench.workflows.until_decided import _spreads, configurations

    rng = np.random.default_rng(4)
    specs = [RunSpec(benchmark="cifar10", args=("--model", "resnet20"), repeat=r) for r in range(12)]
    for spec in specs:
        scale = 0.2 if spec.repeat < 6 else 0.005  # the first six rounds in a loaded hour
        step = 0.1 * float(np.exp(rng.normal(0, scale)))
        write_run(tmp_path, spec, [[step] * 20], env={"time": 1_795_000_000.0 + 600 * spec.repeat})
    todo = configurations(specs)
    _spreads(tmp_path, todo, 12)
    assert "the first 6 runs spread" in todo[0].spread and "the early runs were the noisier" in todo[0].spread
    # and the way to judge the quiet runs alone: from the seventh run's start (repeat 6, 11:06:40 UTC + 1 h)
    assert todo[0].spread.endswith(f"; to judge the last 6 alone: hvdbench report {tmp_path} --runs-since "
                                   "2026-11-18T12:06:40")
