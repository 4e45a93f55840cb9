"""SLURM job states from the results directory and squeue (no sacct): what squeue says is recorded,
a job gone without a record is lost; submitit gets the sweep's resources; SIGTERM and SIGUSR2 stop a
local run in flight and record why; why SLURM stopped a job (cancel, time limit, preemption, a lost node, a
requeue by hand) read as SLURM shows it; an attempt kept as how it ended, only failures using retries."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from hvdbench.launchers.local import LocalExecutor, Stopped
from hvdbench.launchers.slurm_jobs import job_parameters
from hvdbench.launchers.policy import as_ended, failed_attempts, requeued
from hvdbench.launchers.queues import refresh
from hvdbench.launchers.slurm_queue import squeue_states, why_stopped
from hvdbench.launchers.slurm_options import SlurmOptions
from hvdbench.core.errors import LaunchError
from hvdbench.core.spec import RunSpec, RunStatus



class FakeSqueue:
    """Answers squeue like the real one: id|STATE|reason lines for the jobs it knows."""

    def __init__(self, known: dict[str, tuple[str, str]], returncode: int = 0, every: bool = False) -> None:
        self.known, self.returncode, self.every, self.calls = known, returncode, every, []

    def __call__(self, argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        wanted = argv[argv.index("-j") + 1].split(",")
        lines = [f"{j}|{s}|{r}" for j, (s, r) in self.known.items() if self.every or j in wanted]
        return subprocess.CompletedProcess(argv, self.returncode, "\n".join(lines),
                                           "" if not self.returncode else "boom")


def _run(root: Path, name: str, status: RunStatus) -> Path:
    spec = RunSpec(benchmark="mlp", args=("--steps", name))
    spec.write(root / spec.id)
    status.write(root / spec.id)
    return root / spec.id


def test_scheduler_states_are_recorded_and_a_vanished_job_is_lost(tmp_path: Path) -> None:
    runs = {
        "pending": _run(tmp_path, "1", RunStatus("submitted", None, 0.0, job_id="11")),
        "cancelled": _run(tmp_path, "2", RunStatus("submitted", None, 0.0, job_id="12")),
        "preempted": _run(tmp_path, "3", RunStatus("running", None, 0.0, job_id="13")),
        "failed": _run(tmp_path, "4", RunStatus("running", None, 0.0, job_id="14")),
        "lost": _run(tmp_path, "5", RunStatus("running", None, 0.0, job_id="15_3")),
        "ok": _run(tmp_path, "6", RunStatus("ok", 0, 3.0, job_id="16")),
    }
    squeue = FakeSqueue({"11": ("PENDING", "Priority"), "12": ("CANCELLED", "None"),
                         "13": ("PREEMPTED", "None"), "14": ("COMPLETED", "None")})
    states = refresh(tmp_path, run=squeue)
    got = {name: states[path].status for name, path in runs.items()}
    assert got == {"pending": "pending", "cancelled": "cancelled", "preempted": "preempted", "failed": "failed",
                   "lost": "lost", "ok": "ok"}
    assert len(squeue.calls) == 1 and "--states=all" in squeue.calls[0]  # one query for every job; never sacct
    assert states[runs["pending"]].message == "job 11 pending (Priority)"
    # ended states are written down (squeue forgets a job MinJobAge seconds after it ends); pending is not
    assert RunStatus.read(runs["cancelled"]).status == "cancelled"
    assert RunStatus.read(runs["lost"]).message.startswith("job 15_3 left the queue without recording an end")
    assert RunStatus.read(runs["pending"]).status == "submitted"


def test_an_end_the_job_records_while_squeue_is_asked_stands(tmp_path: Path) -> None:
    """A job that writes its own end and leaves the queue between refresh's read and its squeue call keeps
    that end: neither "lost" nor "the run did not record an end" is written over it."""
    runs = [_run(tmp_path, str(n), RunStatus("running", None, 0.0, job_id=job)) for n, job in ((1, "31"), (2, "32"))]
    ended = RunStatus("ok", 0, 3.0, job_id="31")

    def squeue(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        for run in runs:
            replace(ended, job_id=RunStatus.read(run).job_id).write(run)  # type: ignore[union-attr]
        return FakeSqueue({"32": ("COMPLETED", "None")})(argv, **kwargs)  # 31 gone from the queue

    states = refresh(tmp_path, run=squeue)
    assert [states[run] for run in runs] == [ended, replace(ended, job_id="32")]
    assert [RunStatus.read(run) for run in runs] == [ended, replace(ended, job_id="32")]


def test_pending_array_tasks_read_as_single_ids() -> None:
    squeue = FakeSqueue({"21_[2-3,5%2]": ("PENDING", "JobArrayTaskLimit"), "21_0": ("RUNNING", "None")}, every=True)
    states = squeue_states(["21_0", "21_3"], run=squeue)
    assert states == {"21_0": ("running", "None"), "21_2": ("pending", "JobArrayTaskLimit"),
                      "21_3": ("pending", "JobArrayTaskLimit"), "21_5": ("pending", "JobArrayTaskLimit")}


def test_a_failing_squeue_is_one_clear_error() -> None:
    with pytest.raises(LaunchError, match="squeue failed: boom"):
        squeue_states(["1"], run=FakeSqueue({}, returncode=1))


def test_submitit_gets_the_runs_shape_and_the_sweeps_options() -> None:
    options = SlurmOptions(partition="gpu", account="proj", qos="high", time_min=90, constraint="a100",
                           exclusive=True, directives=("--reservation=bench", "--requeue"),
                           setup=("module load cuda",), array_parallelism=4, mpi="pmi2", mem_gb=200)
    spec = RunSpec(benchmark="imagenet", np=16, nodes=2, launcher="srun", controller="mpi")
    params = job_parameters(options, spec, "dgx")
    assert params == {
        "name": "hvdbench-dgx", "timeout_min": 90, "nodes": 2, "tasks_per_node": 8, "gpus_per_node": 8,
        "slurm_srun_args": ["--mpi=pmi2", "--kill-on-bad-exit=1"], "slurm_setup": ["module load cuda"],
        "slurm_additional_parameters": {"reservation": "bench", "requeue": True}, "slurm_partition": "gpu",
        "slurm_account": "proj", "slurm_qos": "high", "slurm_constraint": "a100", "mem_gb": 200,
        "slurm_exclusive": True, "slurm_array_parallelism": 4, "slurm_signal_delay_s": 90}
    inside = job_parameters(SlurmOptions(gpus=False), RunSpec(benchmark="imagenet", np=16, nodes=2), "x")
    assert inside["tasks_per_node"] == 1 and inside["slurm_srun_args"] == [] and "gpus_per_node" not in inside
    assert inside["cpus_per_task"] == 8  # the one task per node holds that node's 8 ranks


@pytest.mark.parametrize("sig, in_job, expected", [
    (signal.SIGUSR2, True, ("timeout", "the job reached its time limit")),
    (signal.SIGTERM, True, ("cancelled", "job cancelled (SIGTERM)")),
    (signal.SIGTERM, False, ("interrupted", "SIGTERM")),
])
@pytest.mark.usefixtures("script_launcher")
def test_signals_stop_the_run_in_flight_and_record_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      sig: int, in_job: bool, expected: tuple[str, str]) -> None:
    if in_job:
        monkeypatch.setenv("SLURM_JOB_ID", "77")
    else:
        monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    spec = RunSpec(benchmark="cifar10", args=("hang",), launcher="script")
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGUSR2)
    timer = threading.Timer(2.0, os.kill, (os.getpid(), sig))
    timer.start()
    with pytest.raises(Stopped):
        LocalExecutor(tmp_path, timeout=60, report=lambda _: None).run_all([spec])
    status = RunStatus.read(tmp_path / spec.id)
    assert status is not None and status.status == expected[0] and status.message.startswith(expected[1])
    assert status.job_id == ("77" if in_job else None)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGUSR2)) == before  # handlers restored


def _answers(restarts: str, state: str, nodes: str, preempt: str) -> Any:
    """scontrol show job / sinfo / scontrol show config as SLURM answers them at a job's SIGTERM."""

    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        text = {"job": f"JobId=7 JobState={state} Restarts={restarts} NodeList=(null)",
                "sinfo": nodes, "config": f"PreemptType = {preempt}\nPreemptMode = REQUEUE\n"}
        key = "sinfo" if argv[0] == "sinfo" else argv[2]
        return subprocess.CompletedProcess(argv, 0, text[key], "")
    return run


@pytest.mark.parametrize("restarts, state, nodes, preempt, ended", [
    ("0", "COMPLETING", "node1|mixed\nnode2|mixed", "preempt/partition_prio", "cancelled"),  # scancel
    ("0", "TIMEOUT", "node1|mixed", "preempt/none", "timeout"),
    ("1", "COMPLETING", "node1|idle\nnode2|down*", "preempt/partition_prio", "node-failure"),
    ("1", "PENDING", "node1|idle\nnode2|idle", "preempt/partition_prio", "preempted"),
    ("1", "PENDING", "node1|idle\nnode2|idle", "preempt/none", "requeued"),  # scontrol requeue by hand
])
def test_why_slurm_stopped_a_job_is_read_from_its_restart_count_and_nodes(restarts: str, state: str, nodes: str,
                                                                          preempt: str, ended: str) -> None:
    status, message = why_stopped("7", 0, ("node1", "node2"), _answers(restarts, state, nodes, preempt))
    assert status == ended and "job 7" in message
    if ended == "node-failure":
        assert "node2" in message and "node1" not in message


def test_an_attempt_is_kept_as_how_it_ended_and_only_failures_use_retries(tmp_path: Path) -> None:
    ending = RunStatus("preempted", None, 9.0, "job 7 was preempted and SLURM requeued it", job_id="7")
    held = requeued(ending, 1)
    assert held.status == "requeued" and as_ended(held) == ending  # queued while SLURM holds it, kept as preempted
    assert as_ended(RunStatus("running", None, 0.0, "job 7 started (attempt 2)")).status == "lost"
    for number, kept in enumerate((ending, RunStatus("failed", 1, 2.0, "rank 1: error"),
                                   RunStatus("node-failure", None, 3.0, "lost node2")), start=1):
        kept.write(tmp_path / f"attempt-{number}")
    assert failed_attempts(tmp_path) == 1
    assert job_parameters(SlurmOptions(time_min=2), RunSpec(benchmark="mlp"), "t")["slurm_signal_delay_s"] == 30
    assert job_parameters(SlurmOptions(time_min=600), RunSpec(benchmark="mlp"), "t")["slurm_signal_delay_s"] == 90


def test_a_requeued_runs_next_attempt_never_shows_it_ended_or_missing_while_it_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While the next attempt moves the first's files aside, a reader (``status``, ``resume``, a test waiting for the
    run to settle) finds the run requeued, then running: never without a status, never ended (it would be submitted
    a second time); attempt-1 keeps how it ended and every file."""
    from hvdbench.launchers import slurm_task

    run_dir = tmp_path / "run"
    ending = RunStatus("node-failure", None, 4.0, "job 7 lost node(s) node2 and SLURM requeued it", job_id="7")
    requeued(ending, 1).write(run_dir)
    files = ("rank-0.jsonl", "rank-1.jsonl", "launcher.log", "task-1.log", "command.sh")
    for name in files:
        (run_dir / name).write_text(name)
    seen: list[str | None] = []
    rename = Path.rename

    def watched(path: Path, target: Any) -> Path:
        seen.append(getattr(RunStatus.read(run_dir), "status", None))
        return rename(path, target)

    monkeypatch.setattr(Path, "rename", watched)
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    slurm_task._keep_earlier(run_dir, "7")
    now = RunStatus.read(run_dir)
    assert seen == ["requeued"] * len(files) and now is not None and now.status == "running", (seen, now)
    assert now.message == "job 7 started (attempt 2)" and now.job_id == "7"
    assert RunStatus.read(run_dir / "attempt-1") == ending
    assert sorted(p.name for p in (run_dir / "attempt-1").iterdir()) == sorted((*files, "status.json"))


def test_a_task_hands_its_pmi2_descriptor_to_the_rank_and_nothing_else() -> None:
    from hvdbench.launchers.slurm_task import inherited_fds

    read, write = os.pipe()
    try:
        assert inherited_fds({"PMI_FD": str(write)}) == (write,)
    finally:
        os.close(read)
        os.close(write)
    assert inherited_fds({"PMI_FD": str(write)}) == ()  # closed: not handed on
    assert inherited_fds({"PMI_FD": "x"}) == () and inherited_fds({}) == ()
