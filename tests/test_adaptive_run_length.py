"""--target-ci: a run times its --steps, then chunks until the 95% interval of throughput is within the target
(or --max-steps); a quiet series stops before a noisy one and both meet the target; bad values are one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import REPO
from hvdbench.analysis.stats import bootstrap_interval
from hvdbench.launchers.plan import plan
from hvdbench.launchers.sweep import SweepError, load_sweep
from hvdbench.suite import timing
from hvdbench.core.catalog import get_benchmark
from hvdbench.core.errors import UsageError
from hvdbench.core.records import RecordWriter, read_records


class Clock:
    """perf_counter of the timed loop, moved by the planted step durations only."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class OneRank:
    rank, local_rank, size, local_size = 0, 0, 1, 1

    def barrier(self) -> None: ...

    def sync(self) -> None: ...

    def allgather_object(self, obj: Any) -> list[Any]:
        return [obj]

    def broadcast_object(self, obj: Any) -> Any:
        return obj


def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sigma: float, target: float | None,
        steps: int = 20, max_steps: int | None = 5000) -> tuple[dict[str, Any], np.ndarray]:
    clock = Clock()
    monkeypatch.setattr(timing, "time", clock)
    rng = np.random.default_rng(7)

    def step() -> timing.StepOutcome:
        clock.now += 0.1 * rng.lognormal(0.0, sigma)
        return timing.StepOutcome(loss=1.0, counts={"samples": 32.0})

    path = tmp_path / f"rank-{sigma}.jsonl"
    with RecordWriter(path, rank=0, local_rank=0, size=1) as writer:
        summary = timing.timed_loop(OneRank(), writer, step, float, warmup_steps=2, steps=steps, target_ci=target,
                                    max_steps=max_steps)
    timed = [r["duration"] for r in read_records(path) if r["kind"] == "step" and not r["warmup"]]
    return summary, np.array(timed)


def half_width_pct(durations: np.ndarray) -> float:
    matrix = durations[:, None]
    low, high = bootstrap_interval(matrix, np.array([32.0]))
    return (high - low) / 2 / (32 * len(durations) / durations.sum()) * 100


def test_a_quiet_series_stops_earlier_than_a_noisy_one_and_both_meet_the_target(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    quiet, quiet_steps = run(tmp_path, monkeypatch, sigma=0.02, target=1.0)
    noisy, noisy_steps = run(tmp_path, monkeypatch, sigma=0.20, target=1.0)
    assert quiet["stopped_by"] == noisy["stopped_by"] == "target"
    assert quiet["steps"] == len(quiet_steps) == 20  # judged after the first --steps: already narrow enough
    assert noisy["steps"] == len(noisy_steps) and noisy["steps"] > 10 * quiet["steps"]
    assert (noisy["steps"] - 20) % timing.ADAPTIVE_CHUNK == 0
    for summary, durations in ((quiet, quiet_steps), (noisy, noisy_steps)):
        assert summary["ci_reached_pct"] <= 1.0 and summary["target_ci_pct"] == 1.0
        assert half_width_pct(durations) <= 1.1  # the report's own interval (more resamples) agrees
    print(f"steps to +-1%: quiet (sigma 2%) {quiet['steps']}, noisy (sigma 20%) {noisy['steps']}")


def test_the_step_budget_ends_a_run_that_cannot_reach_its_target(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    summary, durations = run(tmp_path, monkeypatch, sigma=0.5, target=0.1, max_steps=75)
    assert summary["stopped_by"] == "max_steps" and summary["steps"] == len(durations) == 75
    assert summary["ci_reached_pct"] > 0.1


def test_without_a_target_the_run_is_as_long_as_steps_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary, durations = run(tmp_path, monkeypatch, sigma=0.5, target=None, steps=13, max_steps=None)
    assert summary["steps"] == len(durations) == 13 and "stopped_by" not in summary


@pytest.mark.parametrize(("args", "message"), [
    (["--target-ci", "0"], "--target-ci: must be a percentage above 0 and below 100, got 0"),
    (["--target-ci", "-2"], "--target-ci: must be a percentage above 0 and below 100, got -2"),
    (["--target-ci", "nan"], "not a finite number"),
    (["--target-ci", "2", "--steps", "20", "--max-steps", "5"],
     "--max-steps 5 is below the minimum: an adaptive run times at least --steps (20) steps"),
    (["--target-ci", "2", "--steps", "4"], "--target-ci needs --steps >= 10"),
    (["--max-steps", "50"], "--max-steps applies with --target-ci"),
])
def test_bad_adaptive_flags_are_one_line(args: list[str], message: str) -> None:
    with pytest.raises(UsageError) as caught:
        get_benchmark("mlp").check(args)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_max_steps_defaults_to_ten_times_steps() -> None:
    assert get_benchmark("mlp").check(["--target-ci", "2", "--steps", "30"]).max_steps == 300


def sweep_file(tmp_path: Path, extra: str) -> Path:
    path = tmp_path / "adaptive.yaml"
    path.write_text(f"name: adaptive\n{extra}\nworkloads:\n  - benchmark: mlp\n    args: [--steps, '20']\n"
                    "  - collectives\naxes:\n  np: [2]\n")
    return path


def test_a_sweep_target_reaches_every_training_run_and_no_collective(tmp_path: Path) -> None:
    specs = plan(load_sweep(sweep_file(tmp_path, "target_ci: 2.5\nmax_steps: 400"))).specs
    for spec in specs:
        adaptive = "--target-ci" in spec.args
        assert adaptive == (spec.benchmark == "mlp"), spec.args
        if adaptive:
            assert spec.args[spec.args.index("--target-ci") + 1] == "2.5" and "400" in spec.args


@pytest.mark.parametrize(("extra", "message"), [
    ("target_ci: 0", "target_ci: expected a percentage above 0 and below 100, got 0"),
    ("target_ci: 100", "target_ci: expected a percentage above 0 and below 100, got 100"),
    ("target_ci: 2\nmax_steps: 5", "--max-steps 5 is below the minimum"),
    ("max_steps: 50", "max_steps: applies with target_ci"),
])
def test_bad_sweep_targets_are_one_line(tmp_path: Path, extra: str, message: str) -> None:
    with pytest.raises(SweepError) as caught:
        plan(load_sweep(sweep_file(tmp_path, extra)))
    assert message in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.slow
def test_two_ranks_stop_after_the_same_step(tmp_path: Path, hvd_env: dict) -> None:
    """A model small enough to take ~10 s, steady enough to stop by its target (60 steps here; the default MLP took
    140 s in CI)."""
    proc = subprocess.run(["horovodrun", "-np", "2", "-H", "localhost:2", "--gloo", sys.executable,
                           str(REPO / "suite" / "mlp.py"), "--mlp-input", "512", "--mlp-widths", "512,512",
                           "--threads", "1", "--steps", "10", "--warmup-steps", "2", "--target-ci", "5",
                           "--max-steps", "200", "--log-dir", str(tmp_path)],
                          capture_output=True, text=True, env=hvd_env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    logs = [read_records(tmp_path / f"rank-{rank}.jsonl") for rank in (0, 1)]
    steps = [[r["step"] for r in log if r["kind"] == "step"] for log in logs]
    summaries = [log[-1] for log in logs]
    assert steps[0] == steps[1] and summaries[0]["steps"] == summaries[1]["steps"] == len(steps[0]) - 2
    assert summaries[0]["stopped_by"] == summaries[1]["stopped_by"] in ("target", "max_steps")
    assert summaries[0]["ci_reached_pct"] == summaries[1]["ci_reached_pct"]
    if summaries[0]["stopped_by"] == "target":
        assert summaries[0]["ci_reached_pct"] <= 5


def test_the_demo_sweeps_documented_adaptive_lines_plan(tmp_path: Path) -> None:
    demo = (REPO / "launchers" / "sweeps" / "demo.yaml").read_text()
    lines = [line.removeprefix("#   ").split("#")[0].rstrip() for line in demo.splitlines()
             if line.startswith(("#   target_ci:", "#   max_steps:"))]
    assert lines == ["target_ci: 2", "max_steps: 200"]
    path = tmp_path / "demo.yaml"
    path.write_text("\n".join(lines) + "\n" + demo)
    for spec in plan(load_sweep(path)).specs:
        at = spec.args.index("--target-ci")
        assert spec.args[at:at + 4] == ("--target-ci", "2", "--max-steps", "200")
