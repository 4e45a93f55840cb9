"""A report a purchase is decided from never prints a number its records cannot support: a run found twice
is one run (the copy used is said, with why); records that cannot be true (a step index repeated, a step
shorter than a microsecond, a step counting other than its batch) make the run inconsistent, naming the
rank; records of the wrong type never drop a run without a word (every run read is in the tables or left
out with its reason); and fewer steady steps than an interval needs give "n/a (too few steps)"."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import write_run
from hvdbench.analysis.collect import collect
from hvdbench.analysis.report.build import build_report
from hvdbench.analysis.stats import MIN_INTERVAL_STEPS
from hvdbench.core.records import RecordWriter, rank_log_name
from hvdbench.core.spec import RunSpec, RunStatus

pytestmark = pytest.mark.bad_input


def _complete(tmp_path: Path, spec: RunSpec, steps: int = 25) -> Path:
    run = write_run(tmp_path, spec, [[0.1 + 0.001 * (i % 3) for i in range(steps)]] * spec.np)
    RunStatus("ok", 0, 3.0).write(run)
    return run


@pytest.mark.parametrize("copy", ["backup folder", "run.json alone", "two backups"])
def test_a_run_found_twice_is_one_run_and_the_copy_used_is_said(tmp_path: Path, copy: str) -> None:
    run = _complete(tmp_path, RunSpec(benchmark="cifar10", np=1))
    if copy in ("backup folder", "two backups"):
        shutil.copytree(run, tmp_path / f"{run.name}.bak")
    if copy == "two backups":
        shutil.copytree(run, tmp_path / "old" / "x")
    if copy == "run.json alone":
        (tmp_path / "copied").mkdir()
        shutil.copy(run / "run.json", tmp_path / "copied" / "run.json")
    collection = collect([tmp_path])
    assert collection.runs["run_id"].tolist() == [run.name]  # one run, never a second repeat
    assert collection.runs["root"].tolist() == [str(tmp_path)]
    copies = [e for e in collection.spec_errors if "a copy of run" in e]
    assert len(copies) == (2 if copy == "two backups" else 1)
    assert all(f"{run} is used (its folder is named by the run id" in e for e in copies), copies
    text, paths = build_report([tmp_path], tmp_path / "out")
    table = (paths["markdown"]).read_text()
    assert "| 1 |" in table and "a copy of run" in table
    assert "repeats" not in json.dumps(collection.runs["repeat"].tolist()) or collection.runs["repeat"].tolist() == [0]


def _log(run: Path, rank: int, np_: int, steps: list[dict], batch: int = 32) -> None:
    with RecordWriter(run / rank_log_name(rank), rank=rank, local_rank=rank, size=np_) as w:
        w.write("env", benchmark="cifar10", model="resnet20", unit="images", flags={"batch_size": batch})
        for step in steps:
            w.write("step", **step)
        w.write("summary", steps=len(steps))


def _steps(n: int = 25, samples: float = 32, duration: float = 0.1) -> list[dict]:
    return [{"step": i, "warmup": i < 2, "duration": duration, "samples": samples, "loss": 1.0} for i in range(n)]


@pytest.mark.parametrize("rank1, why", [
    ([{**s, "duration": 0.001} for s in _steps()] + _steps(), "rank-1.jsonl repeats step numbers (25 record(s))"),
    (_steps(samples=32_000), "rank-1.jsonl: step 2 counts 32000 images but its batch is 32"),
    (_steps()[:10] + [{**_steps()[10], "duration": 1e-300}] + _steps()[11:], "shorter than 1 us"),
    (_steps()[:5] + [{**s, "step": 4} for s in _steps()[5:7]] + _steps()[7:], "repeats step numbers (2 record(s))"),
])
def test_records_that_cannot_be_true_make_the_run_inconsistent_naming_the_rank(tmp_path: Path, rank1: list[dict],
                                                                                why: str) -> None:
    spec = RunSpec(benchmark="cifar10", np=2)
    run = tmp_path / spec.id
    spec.write(run)
    _log(run, 0, 2, _steps())
    _log(run, 1, 2, rank1)
    RunStatus("ok", 0, 3.0).write(run)
    runs = collect([tmp_path]).runs
    assert runs["status"].tolist() == ["inconsistent"] and why in runs["reason"].iloc[0], runs["reason"].iloc[0]


@pytest.mark.parametrize("field, value", [("warmup", "false"), ("warmup", 0), ("duration", "0.1"),
                                          ("samples", None), ("step", "3")])
def test_records_of_the_wrong_type_leave_the_run_out_with_its_reason(tmp_path: Path, field: str, value: object) -> None:
    good = _complete(tmp_path, RunSpec(benchmark="cifar10", np=1))
    spec = RunSpec(benchmark="cifar10", np=2)
    run = tmp_path / spec.id
    spec.write(run)
    for rank in (0, 1):
        _log(run, rank, 2, [{**s, field: value} for s in _steps()])
    RunStatus("ok", 0, 3.0).write(run)
    collection = collect([tmp_path])
    statuses = dict(zip(collection.runs["run_id"], collection.runs["status"]))
    assert statuses == {good.name: "ok", spec.id: "incomplete"}
    text, paths = build_report([tmp_path], tmp_path / "out")
    md = paths["markdown"].read_text()
    assert "2 run(s) read, 1 complete" in md and "no valid timed step in its logs" in md  # the counts add up


@pytest.mark.parametrize("steady, interval", [(1, False), (MIN_INTERVAL_STEPS - 1, False), (MIN_INTERVAL_STEPS, True)])
def test_too_few_steady_steps_give_no_interval(tmp_path: Path, steady: int, interval: bool) -> None:
    """--warmup N leaving ``steady`` of the 27 steps (2 warm-up, 25 timed) each run recorded."""
    _complete(tmp_path, RunSpec(benchmark="cifar10", np=1))
    _complete(tmp_path, RunSpec(benchmark="cifar10", np=2))
    text, paths = build_report([tmp_path], tmp_path / "out", warmup=27 - steady)
    import pandas as pd

    scaling = pd.read_csv(paths["scaling"])
    two = scaling[scaling["np"] == 2].iloc[0]
    assert bool(scaling["ci_low"].notna().all()) is interval and bool(pd.notna(two["speedup_low"])) is interval
    assert ("n/a (too few steps)" in paths["markdown"].read_text()) is not interval


def test_two_repeats_give_an_interval_wider_than_both_runs_not_a_bootstrap_of_two_values(tmp_path: Path) -> None:
    """Two runs bootstrap to almost nothing: the interval over them is Student's at one degree of freedom (their
    geometric mean ± 12.7 standard errors), wider than either run's own interval."""
    rng = np.random.default_rng(3)
    for repeat, mean in ((0, 0.10), (1, 0.11)):
        spec = RunSpec(benchmark="cifar10", np=1, repeat=repeat)
        write_run(tmp_path, spec, [list(rng.normal(mean, 0.002, 30))])
    from hvdbench.analysis.tables.scaling import run_stats_table, scaling_table

    collection = collect([tmp_path])
    stats = run_stats_table(collection)
    row = scaling_table(collection, stats).iloc[0]
    assert row["ci_method"] == "2 runs resampled, blocks of steps within each (Student's t over runs)"
    assert row["ci_low"] < stats["ci_low"].min() and row["ci_high"] > stats["ci_high"].max()  # wider than both runs
    assert row["throughput"] == pytest.approx(float(np.exp(np.log(stats["throughput"]).mean())))
