"""A dry run says how many node-hours its plan will take: each run's steps times the step time an earlier run
of the same work measured (plus that run's start-up), else a given step time, and says which runs it could
not time."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import hvdbench_exe, write_run
from hvdbench.analysis.projection.hours import plan_hours
from hvdbench.core.errors import UsageError
from hvdbench.core.spec import RunSpec, RunStatus

ARGS = ("--model", "resnet20", "--device", "cpu")


def _measured(root: Path) -> None:
    """A finished 1-rank run of 10 timed steps of 0.2 s after 2 warm-up steps of 5 s, 30 s in all."""
    spec = RunSpec(benchmark="cifar10", args=(*ARGS, "--steps", "10", "--warmup-steps", "2"), np=1)
    run_dir = write_run(root, spec, [[0.2] * 10])
    RunStatus("ok", 0, 30.0).write(run_dir)


def test_a_plan_is_timed_by_the_same_work_measured_before(tmp_path: Path) -> None:
    _measured(tmp_path)
    planned = [RunSpec(benchmark="cifar10", args=(*ARGS, "--steps", "1000", "--warmup-steps", "5"), np=1),
               RunSpec(benchmark="cifar10", args=(*ARGS, "--steps", "100"), np=4, nodes=2),
               RunSpec(benchmark="cifar10", args=("--model", "resnet56", "--device", "cpu"), np=1)]
    hours = plan_hours(planned, [tmp_path], None)
    start = 30.0 - 2 * 5.0 - 10 * 0.2  # what the measured run spent outside its steps
    same = start + 5 * 5.0 + 1000 * 0.2
    other = 2 * (start + 5 * 5.0 + 100 * 0.2)  # the nearest size's timing, on each of its 2 nodes (default warm-up 5)
    assert hours.node_hours == pytest.approx((same + other) / 3600)
    assert (hours.same_size, hours.other_size, hours.given, hours.unknown) == (1, 1, 0, 1)
    assert "1 not estimated" in hours.text(None)
    given = plan_hours(planned[2:], [tmp_path], 0.5)
    assert given.given == 1 and given.node_hours == pytest.approx((5 + 50) * 0.5 / 3600)
    assert "from --step-time 0.5 s (start-up not counted)" in given.text(0.5)


def test_adaptive_runs_are_counted_at_their_most_steps_and_said_so(tmp_path: Path) -> None:
    spec = RunSpec(benchmark="cifar10", args=(*ARGS, "--steps", "20", "--target-ci", "2", "--max-steps", "400"), np=1)
    hours = plan_hours([spec], [], 1.0)
    assert hours.node_hours == pytest.approx((5 + 400) / 3600) and "upper bound" in hours.text(1.0)
    with pytest.raises(UsageError, match="--step-time"):
        plan_hours([spec], [], float("nan"))


def test_the_dry_run_prints_the_estimate_beside_the_limit(tmp_path: Path) -> None:
    import subprocess

    _measured(tmp_path / "before")
    out = subprocess.run([str(hvdbench_exe()), "run", "cifar10", "--np", "1", *ARGS, "--steps", "100", "--dry-run",
                          "-o", str(tmp_path / "new"), "--estimate-from", str(tmp_path / "before")],
                         capture_output=True, text=True, check=True).stdout
    assert "node-hours: at most" in out  # 18 s start-up + 5 x 5 s warm-up + 100 x 0.2 s: 63 s
    assert "node-hours from step times: about 0.02 (1 from a finished run of the same work and size)" in out
