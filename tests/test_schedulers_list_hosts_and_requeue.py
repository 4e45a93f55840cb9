"""Each scheduler's in-job side is one class (core/job_env.py): its job id, its hosts and the command that requeues
its job. PBS is tried against a stand-in: a node file as PBS writes it (a host per slot) and a ``qrerun`` on PATH
that records what it was asked; a failed attempt with a retry left is requeued through it."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from hvdbench.core.errors import LaunchError, UsageError
from hvdbench.core.job_env import SCHEDULERS, job_env
from hvdbench.core.spec import RunStatus
from hvdbench.launchers import slurm_task
from hvdbench.launchers.schedulers import allocation_hosts


def _pbs(tmp_path: Path, nodes: str) -> dict[str, str]:
    nodefile = tmp_path / "nodefile"
    nodefile.write_text(nodes)
    return {"PBS_JOBID": "4242.pbs01", "PBS_NODEFILE": str(nodefile)}


def test_pbs_hosts_come_from_its_node_file_once_each_in_order(tmp_path: Path) -> None:
    env = job_env(_pbs(tmp_path, "gpu07\ngpu07\ngpu03\n\ngpu07\ngpu03\n"))
    assert (env.scheduler, env.job_id, env.hosts()) == ("pbs", "4242.pbs01", ("gpu07", "gpu03"))
    assert env.requeue_command() == ["qrerun", "4242.pbs01"]


def test_slurm_hosts_and_requeue_come_from_its_own_row() -> None:
    env = job_env({"SLURM_JOB_ID": "77", "SLURM_JOB_NODELIST": "node[01-02]"})
    assert (env.hosts(), env.requeue_command()) == (("node01", "node02"), ["scontrol", "requeue", "77"])
    assert sorted(SCHEDULERS) == ["flux", "pbs", "slurm"]


@pytest.mark.bad_input
@pytest.mark.parametrize("environ, says", [
    ({}, "not inside a job allocation (SLURM, PBS or Flux)"),
    ({"PBS_JOBID": "1"}, "not inside a PBS job: PBS_NODEFILE is not set"),
    ({"PBS_JOBID": "1", "PBS_NODEFILE": "/nonexistent/nodefile"}, "PBS_NODEFILE=/nonexistent/nodefile cannot be read"),
    ({"FLUX_JOB_ID": "f1"}, "flux gives its jobs no host list hvdbench reads"),
])
def test_a_job_without_a_host_list_says_so_in_one_line(environ: dict[str, str], says: str) -> None:
    with pytest.raises(UsageError, match=None) as raised:
        job_env(environ).hosts()
    assert says in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.bad_input
@pytest.mark.parametrize("content", ["", "gpu01\n$(reboot)\n", "-oProxyCommand=x\n"])
def test_a_node_file_without_host_names_is_refused(tmp_path: Path, content: str) -> None:
    with pytest.raises(UsageError, match="PBS_NODEFILE="):
        job_env(_pbs(tmp_path, content)).hosts()


@pytest.mark.bad_input
def test_a_node_file_that_is_a_fifo_is_never_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UsageError, match="cannot be read"):
        job_env({"PBS_JOBID": "1", "PBS_NODEFILE": str(fifo)}).hosts()


def test_under_pbs_a_failed_attempt_is_requeued_with_qrerun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """qrerun requeues a failed attempt with a retry left; the run shows requeued before it is asked (no reader finds
    the run ended meanwhile, to submit it again), and a requeue that fails leaves the failure, saying why."""
    asked, run = tmp_path / "asked", tmp_path / "run"
    stand_in = tmp_path / "bin"
    stand_in.mkdir()
    run.mkdir()
    status_now = f"""$(grep -o '"status": "[a-z]*"' {run}/status.json)"""
    (stand_in / "qrerun").write_text(f'#!/bin/sh\necho "$@" {status_now} >> {asked}\n'
                                     f'[ ! -e {tmp_path}/refuse ] || {{ echo "qrerun: finishing" >&2; exit 1; }}\n')
    (stand_in / "qrerun").chmod(0o755)
    for name, value in _pbs(tmp_path, "gpu01\n").items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PATH", f"{stand_in}{os.pathsep}{os.environ['PATH']}")
    assert allocation_hosts() == ("gpu01",)
    failed = RunStatus("failed", 1, 3.0, "rank 0 exited with 1")
    slurm_task._record_failure(run, "4242.pbs01", 1, failed)
    assert asked.read_text() == '4242.pbs01 "status": "requeued"\n'
    status = RunStatus.read(run)
    assert status is not None and status.status == "requeued" and "retry 1 of 1, job 4242.pbs01 requeued" in \
        status.message
    (tmp_path / "refuse").touch()
    slurm_task._record_failure(run, "4242.pbs01", 1, failed)
    assert RunStatus.read(run) == replace(failed, message="rank 0 exited with 1; requeue failed (qrerun: finishing)")
    slurm_task._record_failure(run, "4242.pbs01", 0, failed)  # no retry asked: the failure, and qrerun not asked
    assert RunStatus.read(run) == failed and len(asked.read_text().splitlines()) == 2


def test_outside_any_job_the_allocation_has_no_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith(("SLURM_", "PBS_", "FLUX_"))]:
        monkeypatch.delenv(name)
    with pytest.raises(LaunchError, match="not inside a job allocation"):
        allocation_hosts()


def test_a_second_task_refused_its_requeue_leaves_the_run_requeued(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Two tasks of a SLURM job fail at once and both ask for the requeue: SLURM hears the first and refuses the
    second; the second must not write the failure over the requeue SLURM is making (it asks SLURM first), while a
    requeue refused with the job not requeued still leaves the failure, saying why."""
    stand_in, run, state = tmp_path / "bin", tmp_path / "run", tmp_path / "state"
    stand_in.mkdir()
    run.mkdir()
    (stand_in / "scontrol").write_text(
        '#!/bin/sh\nif [ "$1" = requeue ]; then echo "scontrol: error: Job has already been requeued" >&2; exit 1; fi\n'
        f'echo "JobId=77 JobName=x JobState=$(cat {state}) Restarts=$(cat {state}.count)"\n')
    (stand_in / "scontrol").chmod(0o755)
    for name in [n for n in os.environ if n.startswith(("SLURM_", "PBS_", "FLUX_"))]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "0")
    monkeypatch.setenv("PATH", f"{stand_in}{os.pathsep}{os.environ['PATH']}")
    failed = RunStatus("failed", 1, 3.0, "rank 1 exited with 1")
    state.write_text("REQUEUED")
    (tmp_path / "state.count").write_text("1")
    slurm_task._record_failure(run, "77", 1, failed)
    status = RunStatus.read(run)
    assert status is not None and status.status == "requeued", status
    state.write_text("RUNNING")
    (tmp_path / "state.count").write_text("0")
    slurm_task._record_failure(run, "77", 1, failed)
    assert RunStatus.read(run) == replace(failed, message="rank 1 exited with 1; requeue failed (scontrol: error: "
                                                          "Job has already been requeued)")
