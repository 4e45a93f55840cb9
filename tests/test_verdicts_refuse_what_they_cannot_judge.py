"""The verdicts a buyer pastes into a contract or a pipeline gate (accept, compare --regressions, project) under
hostile and mistaken input: each judges exactly what it names, refuses a selector or value it cannot use, never
passes having judged nothing ("not judged", exit status 4), never forges a line out of a run's text, and never
prints a figure it could not compute. One test per class of the adversarial pass that found them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from conftest import REPO, write_run
from hvdbench.analysis.verdicts.acceptance import Measured, more_needed
from hvdbench.analysis.verdicts.criteria import load_criteria
from hvdbench.analysis.collect import collect
from hvdbench.analysis.projection.project import efficiency_holds
from hvdbench.cli import main
from hvdbench.launchers.policy import failure_reason
from hvdbench.launchers.slurm_queue import why_stopped
from hvdbench.launchers.sweep import load_sweep
from hvdbench.core.errors import UsageError
from hvdbench.core.records import RecordWriter, rank_log_name
from hvdbench.core.spec import RunSpec

pytestmark = pytest.mark.bad_input
ARGS = ("--model", "resnet20", "--batch-size", "32")


def _lognormal(rng: np.random.Generator, mean: float, n: int, cv: float = 0.02) -> list[float]:
    sigma = np.sqrt(np.log(1 + cv**2))
    return list(rng.lognormal(np.log(mean) - sigma**2 / 2, sigma, n))


def _criteria(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "criteria.toml"
    path.write_text(body)
    return path


def _curve(root: Path, seconds: float, *, pattern: bool = False, launcher: str = "horovodrun") -> RunSpec:
    """A 2-rank allreduce curve through Horovod: 1 MiB in ``seconds`` per call (isolated, or a training pattern)."""
    args = ("--pattern", "training", "--like", "x") if pattern else ("--ops", "allreduce")
    spec = RunSpec(benchmark="collectives", args=args, np=2, launcher=launcher,
                   controller="gloo" if launcher == "horovodrun" else "mpi")
    spec.write(root / spec.id)
    rng = np.random.default_rng(len(args) + len(launcher))
    for rank in range(2):
        with RecordWriter(root / spec.id / rank_log_name(rank), rank=rank, local_rank=rank, size=2) as w:
            w.write("env", benchmark="collectives", model="collectives", unit="GB/s")
            extra = {"pattern": "training", "tensors": 3, "like": "x", "like_workload": "cifar10 resnet20 batch 32"} \
                if pattern else {}
            timing = {} if pattern else {"timing": "batch", "calls": 20}
            w.write("comm", op="allreduce", backend="horovod", dtype="fp32", bytes=2**20, elements=2**18,
                    times=_lognormal(rng, seconds, 20), correct=True, **extra, **timing)
            w.write("summary", cases=1, skipped=0)
    return spec


# 1. accept judged a bandwidth criterion on every run of its system, rank count and placement at once
def test_a_bandwidth_criterion_is_judged_on_exactly_the_runs_of_the_row_it_names(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "r"
    _curve(root, 0.010)  # isolated calls: 1 MiB in 10 ms
    fast = _curve(root, 0.001, pattern=True)  # the training pattern: 1 MiB in 1 ms
    body = "[[criterion]]\nname = '{name}'\nmetric = 'algbw'\ngpus = 2\nmin = 0.5\n{extra}"
    criteria = _criteria(tmp_path, "\n".join(body.format(name=n, extra=e) for n, e in (
        ("training", "pattern = 'training'\n"), ("isolated", "pattern = 'isolated'\n"))))
    assert main(["accept", str(criteria), str(root), "-o", str(tmp_path / "out"), "--min-runs", "1"]) == 1
    table = pd.read_csv(tmp_path / "out" / "acceptance.csv").set_index("criterion")
    assert table.loc["training", "value"] == pytest.approx(2**20 / 0.001 / 1e9, rel=0.05)  # its own runs only
    assert table.loc["training", "runs"] == fast.id and table.loc["training", "verdict"] == "pass"
    assert table.loc["isolated", "value"] == pytest.approx(2**20 / 0.010 / 1e9, rel=0.05)
    both = _criteria(tmp_path, body.format(name="either", extra=""))
    assert main(["accept", str(both), str(root), "-o", str(tmp_path / "out2")]) == 2
    err = capsys.readouterr().err
    assert "matches 2 configurations" in err and "pattern" in err and err.count("\n") == 1
    _curve(root, 0.002, launcher="mpirun")  # another launcher's isolated curve: named, or refused
    named = _criteria(tmp_path, body.format(name="mpirun", extra="launcher = 'mpirun'\n"))
    assert main(["accept", str(named), str(root), "-o", str(tmp_path / "out3"), "--min-runs", "1"]) == 0


# 2. selectors the metric's table lacks were ignored; mistyped values read as "not measured"; usage errors exited 2
@pytest.mark.parametrize("entry, problem", [
    ("metric='throughput'\nop='allgather'\nbytes='1G'\n", "op does not select what metric throughput reads"),
    ("metric='busbw'\nmodel='resnet50'\n", "model does not select what metric busbw reads"),
    ("metric='screen_relative'\ngpus=8\n", "gpus does not select what metric screen_relative reads"),
    ("metric='throughput'\nbatch_size=32.0\n", "batch_size must be a whole number, 1 or more, got 32.0"),
    ("metric='throughput'\nindependent='true'\n", "independent must be true or false, got 'true'"),
    ("metric='throughput'\nmodel=['resnet50']\n", "model must be text"),
    ("metric='busbw'\nop='allreduse'\n", "op 'allreduse' is not one of allreduce"),
    ("metric='throughput'\ngpus=0\n", "gpus must be a whole number, 1 or more"),
])
def test_a_selector_that_cannot_apply_or_is_mistyped_is_refused(tmp_path: Path, entry: str, problem: str) -> None:
    with pytest.raises(UsageError) as err:
        load_criteria(_criteria(tmp_path, f"[[criterion]]\nname='c'\nmin=1\n{entry}"))
    assert problem in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_an_efficiency_threshold_is_a_fraction_and_exit_status_4_says_not_judged(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="efficiency is a fraction"):
        load_criteria(_criteria(tmp_path, "[[criterion]]\nname='c'\nmetric='efficiency'\nmin=80\n"))
    root = tmp_path / "r"
    write_run(root, RunSpec(benchmark="cifar10", args=ARGS), [_lognormal(np.random.default_rng(1), 0.1, 60)])
    unmeasured = _criteria(tmp_path, "[[criterion]]\nname='c'\nmetric='throughput'\ngpus=8\nmin=1\n")
    assert main(["accept", str(unmeasured), str(root), "-o", str(tmp_path / "o")]) == 4


def _sweep_root(root: Path, system: str, scale: float = 1.0, seed: int = 1, steps: int = 60) -> None:
    rng = np.random.default_rng(seed)
    for np_ in (1, 2):
        write_run(root, RunSpec(benchmark="cifar10", args=ARGS, np=np_, system=system),
                  [[d * scale for d in _lognormal(rng, 0.1 * (1 + 0.05 * (np_ - 1)), steps)] for _ in range(np_)])


# 3. OLD and NEW of one sweep share run ids, and their resamples were drawn alike: a point for an interval
def test_the_two_sides_of_a_regression_check_are_resampled_independently(tmp_path: Path) -> None:
    _sweep_root(tmp_path / "old", "lab")
    _sweep_root(tmp_path / "new", "lab", scale=1 / 1.015)  # the same steps, uniformly 1.5% faster: same run ids
    _sweep_root(tmp_path / "relabelled", "elsewhere", scale=1 / 1.015)  # the same data under another label
    widths = []
    for new in ("new", "relabelled"):
        main(["compare", str(tmp_path / "old"), str(tmp_path / new), "--regressions", "-o", str(tmp_path / f"o-{new}")])
        table = pd.read_csv(tmp_path / f"o-{new}" / "regressions.csv")
        assert table["ratio"].to_numpy() == pytest.approx(1.015)
        widths.append(float((table["ratio_high"] - table["ratio_low"]).min()))
    assert widths[0] > 0.005 and 0.5 < widths[0] / widths[1] < 2.0  # an interval, as wide as for other ids


# 4. a gate that drops rows, or could judge nothing, passed
def test_a_regression_gate_that_could_not_judge_says_so_and_does_not_pass(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    for side in ("old", "new"):  # two systems in each root: every configuration paired by system
        _sweep_root(tmp_path / side, "dgx", seed=1)
        _sweep_root(tmp_path / side, "l40s", seed=2)
    assert main(["compare", str(tmp_path / "old"), str(tmp_path / "new"), "--regressions", "--min-runs", "1",
                 "-o", str(tmp_path / "a")]) == 0
    assert len(pd.read_csv(tmp_path / "a" / "regressions.csv")) == 4  # none dropped
    _sweep_root(tmp_path / "other", "h100", seed=3)
    assert main(["compare", str(tmp_path / "old"), str(tmp_path / "other"), "--regressions",
                 "-o", str(tmp_path / "b")]) == 2
    assert "OLD holds systems dgx, l40s and NEW h100" in capsys.readouterr().err
    _sweep_root(tmp_path / "short-old", "x", steps=3)
    _sweep_root(tmp_path / "short-new", "x", scale=2.0, steps=3)  # twice as slow, but no interval: not judged
    assert main(["compare", str(tmp_path / "short-old"), str(tmp_path / "short-new"), "--regressions",
                 "-o", str(tmp_path / "c")]) == 4
    assert set(pd.read_csv(tmp_path / "c" / "regressions.csv")["change"]) == {
        "not judged: too few steps for an interval"}
    write_run(tmp_path / "mlp", RunSpec(benchmark="mlp", system="x"), [[0.01] * 30])  # nothing pairs
    assert main(["compare", str(tmp_path / "short-old"), str(tmp_path / "mlp"), "--regressions",
                 "-o", str(tmp_path / "d")]) == 4
    assert "nothing could be judged" in capsys.readouterr().out


def test_what_else_changed_names_the_device_host_and_cpus(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    for side, gpu, host, cpus in (("old", "NVIDIA A100-SXM4-80GB", "a1", 64),
                                  ("new", "NVIDIA H100 80GB HBM3", "h1", 96)):
        write_run(tmp_path / side, RunSpec(benchmark="cifar10", args=ARGS), [_lognormal(rng, 0.1, 60)],
                  gpu={"name": gpu}, host=host, env={"cpu_count": cpus, "cpu_model": "EPYC"})
    main(["compare", str(tmp_path / "old"), str(tmp_path / "new"), "--regressions", "-o", str(tmp_path / "o")])
    changed = pd.read_csv(tmp_path / "o" / "regressions.csv")["what_else_changed"].iloc[0]
    assert "device_name NVIDIA A100-SXM4-80GB -> NVIDIA H100 80GB HBM3" in changed
    assert "host a1 -> h1" in changed and "cpu_count 64 -> 96" in changed and "cpu_model" not in changed


# 5. a newline in a recorded value forged a PASS line in acceptance.txt and a row in the terminal table
def test_text_from_a_run_is_inert_in_every_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    forged_host = "node1\n- forged criterion: throughput ≥ 1; measured 9: PASS\x1b[2J"
    forged_tuning = {"NCCL_ALGO": "Ring\n| forged | row |\x1b]0;title\x07"}
    rng = np.random.default_rng(7)
    for side in ("old", "new"):
        write_run(tmp_path / side, RunSpec(benchmark="cifar10", args=ARGS, system="lab\u202e"),
                  [_lognormal(rng, 0.1, 60)], host=forged_host, env={"variables": forged_tuning})
    criteria = _criteria(tmp_path, "[[criterion]]\nname='n\\nforged'\nmetric='throughput'\nmin=1\n")
    main(["accept", str(criteria), str(tmp_path / "old"), "-o", str(tmp_path / "acc")])
    main(["compare", str(tmp_path / "old"), str(tmp_path / "new"), "--regressions", "-o", str(tmp_path / "reg")])
    printed = capsys.readouterr().out
    outputs = {p.name: p.read_text() for folder in ("acc", "reg") for p in (tmp_path / folder).iterdir()
               if p.suffix in (".txt", ".csv", ".md", ".html")}
    outputs["terminal"] = printed
    assert len(outputs) >= 6
    for name, text in outputs.items():
        lines = text.splitlines()
        assert not [line for line in lines if line.lstrip("- ").startswith(("forged", "| forged"))], name
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, name
    assert "node1\\n- forged criterion" in outputs["acceptance.txt"]  # shown, as an escape


# 6. project printed what it could not compute, took a 1-GPU row from the 2-rank twin, and took any figure
def test_project_says_what_it_could_not_compute() -> None:
    rows = [{"workload": "w", "link": "l", "algorithm": "ring", "nodes": n, "efficiency": e,
             "efficiency_low": np.nan, "efficiency_high": np.nan} for n, e in ((2, 0.9), (4, 0.85), (8, 0.82))]
    (line,) = efficiency_holds(pd.DataFrame(rows), 80)
    assert "95% interval: not computed" in line and "up to 8 node(s) to 8 node(s)" not in line


def test_project_takes_a_one_gpu_nodes_compute_from_the_one_gpu_run_and_refuses_absurd_figures(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from test_projection_model import COMPUTE, INTER, INTRA, _collectives, _training

    root = tmp_path / "r"
    _training(root, 1, COMPUTE)  # 320 images/s alone
    _training(root, 2, 2.2 * COMPUTE)
    _training(root, 2, 2 * COMPUTE, independent=True)  # two ranks on one node share it: half the speed each
    _collectives(root, INTRA, 1)
    _collectives(root, INTER, 2)
    assert main(["project", str(root), "--gpus-per-node", "1", "--nodes", "1,2", "--algorithm", "ring"]) == 0
    table = pd.read_csv(root / "report" / "projection.csv")
    one = table[table["nodes"] == 1].iloc[0]
    assert one["throughput"] == pytest.approx(32 / COMPUTE, rel=0.02)  # the 1-GPU run's, not the shared node's
    assert main(["project", str(root), "--gpus-per-node", "4", "--nodes", "1,2", "--algorithm", "ring"]) == 0
    assert "4 GPUs per node (measured 2)" in capsys.readouterr().out  # beyond what was measured, said
    for argv, problem in ((["--gpus-per-node", "100000"], "no node holds more than"),
                          (["--link", "slow=1e-300,2us"], "a link has"), (["--link", "far=5,1e300us"], "a link has")):
        assert main(["project", str(root), *argv]) == 2
        err = capsys.readouterr().err
        assert problem in err and err.count("\n") == 1, err


# 8. a FIFO as criteria or peaks blocked for ever; /dev/zero ended in MemoryError
@pytest.mark.slow  # starts hvdbench in a process, in case a read blocks
@pytest.mark.parametrize("flag", ["criteria", "--peaks", "--target"])
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_a_fifo_or_device_where_a_file_belongs_is_one_line(tmp_path: Path, flag: str, kind: str) -> None:
    path = tmp_path / "f.toml"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path = Path("/dev/zero")
    root = tmp_path / "r"
    write_run(root, RunSpec(benchmark="cifar10", args=ARGS), [[0.1] * 20])
    argv = {"criteria": ["accept", str(path), str(root)], "--peaks": ["report", str(root), "--peaks", str(path)],
            "--target": ["project", str(root), "--target", str(path)]}[flag]
    proc = subprocess.run([sys.executable, "-m", "hvdbench.cli", *argv], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "not a regular file" in proc.stderr or "a FIFO" in proc.stderr or "a device" in proc.stderr, proc.stderr


# 9. the README's --like recipe failed after launch (ranks start in the run folder) with Horovod's generic error
@pytest.mark.slow  # starts hvdbench's planner
def test_a_relative_like_is_made_absolute_when_the_run_is_planned(tmp_path: Path) -> None:
    training = tmp_path / "results" / "cifar10-np1-r0-x"
    training.mkdir(parents=True)
    with RecordWriter(training / "rank-0.jsonl", rank=0, local_rank=0, size=1) as w:
        w.write("env", benchmark="cifar10", model="resnet20", gradient_sizes=[10, 20], flags={"batch_size": 32})
    proc = subprocess.run([sys.executable, "-m", "hvdbench.cli", "run", "collectives", "--np", "2",
                           "--dry-run", "-o", "out", "--", "--pattern", "training", "--like",
                           "results/cifar10-np1-r0-x"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"--like {training}" in proc.stdout


def test_a_failed_run_records_the_ranks_own_first_error(tmp_path: Path) -> None:
    log = tmp_path / "launcher.log"
    log.write_text("[1,0]<stderr>:error: collectives: --like results/x: cannot read it (No such file or directory)\n"
                   "[1,1]<stderr>:RuntimeError: Horovod has been shut down. This was caused by an exception on one "
                   "of the ranks or an attempt to allreduce, allgather or broadcast a tensor after one of the ranks "
                   "finished execution.\n")
    assert failure_reason(log).startswith("error: collectives: --like results/x")


# 11. a preempted job read as cancelled when the controller did not answer at once
def test_a_slow_controller_is_asked_again_before_a_signal_is_read_as_a_cancellation() -> None:
    asked: list[str] = []

    def scontrol(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        asked.append(argv[2] if argv[0] == "scontrol" else argv[0])
        if argv[:3] == ["scontrol", "show", "job"] and asked.count("job") < 3:
            raise subprocess.TimeoutExpired(argv, 10)  # busy: no answer the first two times
        text = {"job": "JobId=7 JobState=COMPLETING Restarts=1", "config": "PreemptType = preempt/partition_prio\n"
                "PreemptMode = REQUEUE\nKillWait = 30 sec\n", "sinfo": "node1|mixed"}
        return subprocess.CompletedProcess(argv, 0, text[asked[-1]], "")

    assert why_stopped("7", 0, ("node1",), scontrol, pause=lambda _: None)[0] == "preempted"
    assert asked.count("job") == 3


# 12. copies under new repeat numbers narrowed an interval to nothing; advice in the quadrillions; -N2 passed
def test_copies_of_a_run_under_new_repeat_numbers_are_not_repeats(tmp_path: Path) -> None:
    first = write_run(tmp_path, RunSpec(benchmark="cifar10", args=ARGS),
                      [_lognormal(np.random.default_rng(1), 0.1, 30)])
    for repeat in (1, 2, 3):
        copy = tmp_path / RunSpec(benchmark="cifar10", args=ARGS, repeat=repeat).id
        shutil.copytree(first, copy)
        RunSpec(benchmark="cifar10", args=ARGS, repeat=repeat).write(copy)
    runs = collect([tmp_path]).runs.set_index("repeat")
    assert runs.loc[0, "status"] == "ok" and set(runs.loc[[1, 2, 3], "status"]) == {"inconsistent"}
    assert first.name in runs.loc[2, "reason"] and "(the same root) within 1 part in 1,000,000: a copy, not a " \
        "measurement of its own" in runs.loc[2, "reason"]


def test_advice_stays_within_what_can_be_measured() -> None:
    said = more_needed(Measured(1000.0000001, 990.0, 1010.0, 50, "timed steps", ""), 1000.0)
    assert "no practical amount of measurement decides it" in said and "sits ×1.000 from the threshold" in said
    said = more_needed(Measured(1010.0, 990.0, 1030.0, 50, "timed steps", ""), 1000.0)  # log scale, as the interval
    assert said.startswith("could not tell: a value beyond ×1.03 of the threshold either way (above 1,029 or below "
                           "972.2)")
    assert "about 337 more timed steps (387 in all)" in said  # first n: (t.975 + t.80) x SE x sqrt(50/n) <= ln 1.01


def test_accepts_advice_on_noisy_runs_lives_on_the_intervals_scale() -> None:
    """An estimate 2.46x its threshold with a wide interval from 3 runs: a factor either way (never a percent past
    100 of the threshold, which could read as a negative throughput) and about a dozen runs to decide, not "no
    practical amount"."""
    said = more_needed(Measured(2460.0, 123.0, 49200.0, 3, "repeats", ""), 1000.0)
    assert "×41.86 of the threshold either way" in said and "%" not in said
    assert "about 14 more repeats (17 in all) would likely decide it" in said
    assert more_needed(Measured(0.0, -1.0, 1.0, 3, "repeats", ""), 0.0) == \
        "could not tell: the interval holds the threshold"


@pytest.mark.parametrize("directive, problem", [("-N2", "--N is set by hvdbench"), ("-G8", "--G is set by hvdbench"),
                                                ("-wnode9", "--w is set by hvdbench"), ("-x", "is a short option")])
def test_short_sbatch_options_are_read_as_sbatch_reads_them(tmp_path: Path, directive: str, problem: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"workloads: [cifar10]\naxes: {{np: [1]}}\nslurm: {{directives: ['{directive}']}}\n")
    with pytest.raises(UsageError) as err:
        load_sweep(path)
    assert problem in str(err.value), str(err.value)


def test_this_file_is_named_in_the_bad_input_list() -> None:
    text = (REPO / "docs" / "clusters.md").read_text()
    for command in ("hvdbench accept", "hvdbench compare --regressions", "hvdbench project"):
        assert f"**`{command}`** refuses" in text, command
