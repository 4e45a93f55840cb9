"""A benchmark job that SLURM stops mid-run on the two-node test cluster (tests/gpu_cluster.py, which
preempts the gpu partition's jobs for the urgent partition's by requeue): preempted by a higher-priority
job, warned of its time limit while a rank hangs, or losing node2 (every process there killed, slurmd
included, until SLURM finds it not responding). Each time the run is started again, its first attempt is kept
in attempt-1/ with how it ended and what it had logged, the second completes, and the report counts one
measurement and names the earlier attempt."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import pytest

from hvdbench.core.records import rank_log_name

from slurm_runs import cli, envs, mlp_args, rank_host, running_run, settled_ok, status_of, sweep_file, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.mpi, pytest.mark.timeout(600)]


def _submit(tmp_path: Path, nodes: int, time_min: int, slurm: str = "") -> Path:
    """A one-run sweep of about 5 s of steps on ``nodes`` nodes (one rank each), one retry, submitted; ``slurm``:
    more keys of its slurm: block."""
    body = (f"launcher: srun\nretries: 1\nworkloads: [{{benchmark: mlp, args: {mlp_args(10000)}}}]\n"
            f"axes: {{nodes: [{nodes}], gpus_per_node: [1]}}\nslurm: {{time: {time_min}{slurm}}}")
    tmp_path.mkdir(parents=True, exist_ok=True)
    root = tmp_path / "results"
    out = cli("submit", str(sweep_file(tmp_path, "stopped", body)), "-o", str(root))
    assert out.returncode == 0, out.stderr
    return root


def _stopped(root: Path, stop: Callable[[Path, int], None], rank: int = 0) -> tuple[Path, str]:
    """Stop the run under ``root`` once ``rank`` is timing steps; the run and what rank 0 had logged by then."""
    run_dir, pid = running_run(root, rank)
    measured = (run_dir / rank_log_name(0)).read_text()
    stop(run_dir, pid)
    return run_dir, measured


def _requeued(root: Path, cluster: Any, ended: str, run_dir: Path, measured: str) -> str:
    """The stopped run completes on its second attempt and its first is kept as ``ended``, counted once by the
    report; the earlier attempt's message."""
    settled_ok(root, 1, cluster)
    first = run_dir / "attempt-1"
    status = status_of(first)
    assert status["status"] == ended, status
    assert (first / rank_log_name(0)).read_text().startswith(measured)  # what attempt 1 had logged is kept
    assert len(envs(run_dir)) == len(list(first.glob("rank-*.jsonl")))  # every rank ran again, whole
    report = cli("report", str(root))
    assert report.returncode == 0, report.stderr
    text = (root / "report" / "report.md").read_text()
    assert "Retried runs" in text and f"attempt-1: {ended}" in text
    runs = (root / "report" / "runs.csv").read_text().splitlines()
    assert len(runs) == 2, runs  # a header and one run: attempt 1's steps are not counted
    return str(status["message"])


def _requeued_once(root: Path, cluster: Any, ended: str, stop: Callable[[Path, int], None], rank: int = 0) -> str:
    """Stop the run once ``rank`` is timing steps; then as ``_requeued``."""
    return _requeued(root, cluster, ended, *_stopped(root, stop, rank))


def _room_for_the_retry(run_dir: Path, cluster: Any, minutes: int = 10) -> None:
    """Once the hung attempt is requeued at its time limit's warning, its job's limit raised as an operator may: the
    retry measures however loaded the machine, never racing the clock that stopped the first (a 2-minute job's retry,
    warned a minute in, once was)."""
    wait_for(lambda: status_of(run_dir)["status"] == "requeued" or (run_dir / "attempt-1").is_dir(),
             "the hung run's job requeued at its time limit's warning", cluster)
    job = status_of(run_dir / "attempt-1" if (run_dir / "attempt-1").is_dir() else run_dir)["job_id"]
    out = subprocess.run(["scontrol", "update", f"JobId={job}", f"TimeLimit={minutes}"], capture_output=True,
                         text=True, env={**os.environ, **cluster.env})
    assert out.returncode == 0, out.stderr


@pytest.mark.timing
def test_a_preempted_run_is_requeued_and_counted_once(gpu_cluster: Any, tmp_path: Path) -> None:
    started = time.monotonic()
    root = _submit(tmp_path, nodes=1, time_min=10)

    def preempt(run_dir: Path, _pid: int) -> None:
        out = subprocess.run(["sbatch", "--parsable", "-p", "urgent", "--exclusive", "-w", rank_host(run_dir, 0),
                              "-o", "/dev/null",
                              "--wrap", "sleep 2"], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr

    message = _requeued_once(root, gpu_cluster, "preempted", preempt)
    assert "was preempted and SLURM requeued it" in message
    print(f"\n[two-node cluster] preempted run requeued: {time.monotonic() - started:.0f} s")


@pytest.mark.timeout(1500)  # the events' own bounds (slurm_runs.EVENT_S and settled's), never a guess of their pace
def test_a_hung_rank_at_its_time_limit_and_a_run_that_loses_a_node_are_each_requeued(gpu_cluster: Any,
                                                                                       tmp_path: Path) -> None:
    """Both wait on SLURM's clocks (the time limit's warning, the node timeout), so they run side by side: the hung
    run on node1, where node2's loss does not reach it, the other across both nodes (one CPU a rank: node1 holds
    both jobs)."""
    started = time.monotonic()
    one_cpu = ", cpus_per_task: 1"
    hung_root = _submit(tmp_path / "hung", nodes=1, time_min=2,  # SLURM warns 30 s ahead, and up to 60 s earlier
                        slurm=f"{one_cpu}, directives: [--exclude=node2]")
    hung = _stopped(hung_root, lambda _run, pid: os.kill(pid, signal.SIGSTOP))
    room = ThreadPoolExecutor(1).submit(_room_for_the_retry, hung[0], gpu_cluster)
    lost_root = _submit(tmp_path / "lost", nodes=2, time_min=10, slurm=one_cpu)

    def lose_node2(run_dir: Path, _pid: int) -> None:
        gpu_cluster.kill_node("node2")
        # each event waited on, in order, however slow the machine: node2 back before SLURM requeued would leave
        # the job running on a node that came back (what a wall-clock guess did on a loaded machine)
        wait_for(lambda: gpu_cluster.not_responding("node2"), "SLURM finding node2 not responding", gpu_cluster)
        wait_for(lambda: status_of(run_dir)["status"] == "requeued", "the run's job requeued after node2's loss",
                 gpu_cluster)
        gpu_cluster.start_node("node2")  # the node comes back; the requeued job runs on it again

    try:
        message = _requeued_once(lost_root, gpu_cluster, "node-failure", lose_node2, rank=1)
    finally:
        gpu_cluster.await_nodes()
    assert "lost node(s) node2" in message
    print(f"\n[two-node cluster] run on a lost node requeued: {time.monotonic() - started:.0f} s")
    room.result()
    message = _requeued(hung_root, gpu_cluster, "timeout", *hung)
    assert "neared its time limit" in message and "retry 1 of 1" in message
    print(f"[two-node cluster] hung run timed out and requeued, beside it: {time.monotonic() - started:.0f} s")
