"""What a SLURM job's tasks run: the run's ranks (one task per GPU, MPI wired by SLURM's PMI) or, on the
first task only, horovodrun/mpirun over the allocation's hosts; how the run ended recorded in its
status.json, SLURM's signals (cancel, preemption, time limit) included, and a failed or timed-out attempt
requeued while retries are left (launchers/policy.py)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from hvdbench.core.errors import HvdbenchError, LaunchError, UsageError
from hvdbench.core.job_env import job_env
from hvdbench.core.spec import RunFolder, RunSpec, RunStatus, keep_earlier_attempt

from .attempt import Attempt
from .base import LaunchContext, get_launcher, on_cpu, rank_command
from hvdbench.core.containers import preflight
from .executor import launch_environment, placement_refusal, scheduler_chose_gpus
from .policy import as_ended, failed_attempts, requeued, retry_left, tail
from .schedulers import allocation_hosts
from .slurm_queue import REQUEUED_BY_SLURM, job_fields, requeue_said, why_stopped
from .srun_ssh import ssh_through_srun


def run_tasks(runs: Sequence[tuple[dict[str, Any], str]], python: str) -> int:
    """A node's job that holds several runs (screening a node: one allocation, not a job a run): each run in turn,
    one task, a failed run recorded and the next one started; the worst exit status."""
    return max((run_task(spec_data, run_dir, python, alone=False) for spec_data, run_dir in runs), default=0)


def run_task(spec_data: dict[str, Any], run_dir: str, python: str, hosts: Sequence[str] = (), retries: int = 0,
             alone: bool = True) -> int:
    """What a SLURM task runs: its rank (launcher srun: one task per GPU, MPI wired by PMIx) or, on the
    first task only, horovodrun/mpirun over the allocation's hosts. The first task records how the run
    ended in status.json; SIGTERM (scancel, preemption) and SIGUSR2 (the time limit ahead) are recorded.
    A failed attempt with retries left requeues the job (SLURM_RESTART_COUNT counts the attempts). With a
    container (the spec's), its runtime, image and mounts are checked on the node before any rank starts.
    ``alone``: the task's only run, whose failure ends the task (False: other runs follow it in this task)."""
    folder, first, job = Path(run_dir), _task_rank() == 0, job_env().job_id
    try:
        spec = RunSpec.from_dict(spec_data)
        if spec.container is not None:
            preflight(spec.container, folder.parent, [spec.launcher], gpu=not on_cpu(spec))
        returncode = _run_task(spec, LaunchContext(python=python, run_dir=folder), tuple(hosts), first, job, retries)
    except HvdbenchError as exc:  # a run that cannot start says why in its status, in one line
        RunStatus("failed", None, 0.0, str(exc), job_id=job).write(folder)
        print(f"hvdbench: error: {exc}", file=sys.stderr)
        returncode = 2
    return _end_task(returncode) if alone else returncode


def attempt_number() -> int:
    """This job's attempt of its run, from 1 (SLURM counts restarts: requeues, node failures, preemptions)."""
    return (job_env().number("restarts") or 0) + 1


def _task_rank() -> int:
    """This task's rank in its job step (0: the first task)."""
    return job_env().number("task_rank") or 0


def _retried(folder: Path, job: str | None, retries: int, status: RunStatus) -> RunStatus | None:
    """``status`` (a failed or timed-out attempt's) as the run shows it while its job is requeued for a retry, where
    the retry policy leaves one; else None."""
    used = failed_attempts(folder) + 1
    if not job or not retry_left(status.status, used, retries):
        return None
    return requeued(status, attempt_number(), f"; retry {used} of {retries}, job {job} requeued")


def _record_failure(folder: Path, job: str | None, retries: int, status: RunStatus) -> None:
    """Write a failed or timed-out attempt's status and, where the retry policy leaves a retry, requeue the job.
    A retried attempt is written as requeued before the requeue (which stops the other tasks; the first task's
    handler keeps it), so that no reader finds the run ended, to submit it again, while SLURM requeues it; a
    requeue that fails leaves the attempt's own status, saying why, unless SLURM says the job is requeued all the same
    (two tasks that fail at once both ask; the second is refused because the first was heard)."""
    retry = _retried(folder, job, retries, status)
    (retry or status).write(folder)
    if retry is None or job is None:
        return
    try:
        out = subprocess.run(job_env().requeue_command(job), capture_output=True, text=True, timeout=30)
        why = out.stderr.strip()[:200] if out.returncode != 0 else None
    except (OSError, subprocess.SubprocessError, UsageError) as exc:
        why = str(exc)
    if why is not None and not _requeued_anyway(job):
        replace(status, message=f"{status.message}; requeue failed ({why})").write(folder)


def _requeued_anyway(job: str) -> bool:
    """Whether SLURM says the job is requeued past this attempt (another task's requeue was heard first)."""
    if not job_env().controller_says_why:
        return False
    return requeue_said(job_fields(job), attempt_number() - 1) == "requeued"


def _run_task(spec: RunSpec, ctx: LaunchContext, hosts: tuple[str, ...], first: bool, job: str | None,
              retries: int) -> int:
    launcher, folder, python = get_launcher(spec.launcher), ctx.run_dir, ctx.python
    scheduler_gpus = scheduler_chose_gpus()
    if first:
        spec.write(folder)
        _keep_earlier(folder, job)
    refused = placement_refusal(spec, scheduler_gpus) if first or launcher.task_per_rank else None
    if refused:  # before any rank starts, and no requeue: another attempt gets the same GPUs
        raise LaunchError(refused)
    if not first and launcher.task_per_rank:
        _await_first_task(folder, job)
    ctx = replace(ctx, scheduler_gpus=scheduler_gpus)
    if launcher.task_per_rank:
        argv = rank_command(spec, ctx)
    elif first:
        argv = launcher.command(spec, replace(ctx, hosts=hosts or allocation_hosts(), scheduler=job_env().scheduler))
    else:
        return 0  # the launcher on the first node starts every rank
    env = launch_environment(launcher, spec, python, scheduler_gpus)
    if not launcher.task_per_rank:  # mpirun's and hydra's daemons go out with srun inside this task's step, whose
        env["SLURM_OVERLAP"] = "1"  # CPUs are all taken: without --overlap their srun waits for them for ever
    if first and launcher.reaches_hosts_by_ssh and spec.nodes > 1 and job_env().steps_carry_ssh:
        ssh_through_srun(folder, env)  # horovodrun's ssh reaches the allocation's nodes where no sshd runs
    attempt = TaskAttempt(spec, RunFolder(folder), job, first, retries)
    if first:
        attempt.folder.command_file.write_text(shlex.join(argv) + "\n", encoding="utf-8")
        attempt.folder.write_status(RunStatus("running", None, 0.0, _started(job), job_id=job,
                                                        scheduler=job_env().scheduler))
    log = attempt.folder.task_log(_task_rank()) if launcher.task_per_rank else attempt.folder.launcher_log
    status = attempt.run(argv, env, log, write_command=False)
    returncode = attempt.returncode if attempt.returncode is not None else 0 if status.status == "ok" else 1
    return returncode if status.status != "ok" else 0


class TaskAttempt(Attempt):
    """A SLURM task's attempt: its rank (or the first task's launcher) started with srun's PMI descriptor; SIGTERM
    (scancel, preemption) and SIGUSR2 (the time limit ahead) recorded at once by the first task, with SLURM's
    word on why, a warning that comes once every rank has logged its summary keeping the run ok; a failed or
    timed-out attempt requeued while retries are left; the rank logs judged by the first task only, after the others
    have had a minute to write their last record."""

    settle_s = 60.0

    def __init__(self, spec: RunSpec, folder: RunFolder, job: str | None, first: bool, retries: int) -> None:
        super().__init__(spec, folder, job)
        self.first, self.retries, self.judges_logs = first, retries, first
        self.ending: list[tuple[str, str]] = []

    def popen_options(self, env: Mapping[str, str]) -> dict[str, Any]:
        return {"pass_fds": inherited_fds(env)}

    def wait(self, proc: subprocess.Popen[bytes]) -> RunStatus | None:
        def stop(signum: int, _frame: object) -> None:
            if signum == signal.SIGUSR2 and self.measured_whole():  # the limit would end a teardown, nothing measured
                self.ending.append(("ok", f"job {self.job} neared its time limit after every rank had logged its "
                                    "summary; its processes were ended there"))
            elif signum == signal.SIGUSR2:
                self.ending.append(("timeout", f"job {self.job} neared its time limit"))
            elif not self.ending:
                self.ending.append(why_stopped(self.job, attempt_number() - 1, allocation_hosts()))
            recorded = self.folder.status_now()
            if self.first and (recorded is None or recorded.status not in ("failed", "requeued")):  # a failure stands
                now = RunStatus(self.ending[0][0], None, self.seconds(), self.ending[0][1], job_id=self.job,
                                scheduler=job_env().scheduler)
                held = requeued(now, attempt_number()) if now.status in REQUEUED_BY_SLURM else \
                    _retried(self.folder.path, self.job, self.retries, now)  # a time limit with a retry left
                self.folder.write_status(held or now)
            end_process(proc)

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGUSR2, stop)
        self.returncode = proc.wait()
        if not self.ending:
            return None
        status, message = self.ending[0]
        return RunStatus(status, None, self.seconds(), message, tail(self.log), self.job)

    def record(self, status: RunStatus) -> None:
        """The first task keeps a complete run and a timeout; any task a failure (the first may be killed by srun
        before it can say why). A signal's ending was recorded when it came."""
        if status.status == "ok" and self.first:
            self.folder.write_status(status)
        elif status.status == "failed" or (status.status == "timeout" and self.first):
            _record_failure(self.folder.path, self.job, self.retries, status)


def _keep_earlier(folder: Path, job: str | None) -> None:
    """A resubmitted or requeued run keeps its earlier attempt's files in attempt-N/, its status saying how
    that attempt ended, while the run's own status goes straight to this attempt's ``running`` (never missing nor
    showing the earlier ending, which ``resume`` would submit again). An attempt of this very job recorded as
    cancelled was not (SLURM does not start a cancelled job again): its controller did not answer in time at its
    SIGTERM; it is kept as requeued."""
    earlier = RunStatus.read(folder)
    if earlier is not None and earlier.status == "cancelled" and job and earlier.job_id == job and attempt_number() > 1:
        earlier = replace(earlier, status="requeued", message=f"{earlier.message}; but SLURM started job {job} again "
                          f"(attempt {attempt_number()}): it was requeued, not cancelled")
    keep_earlier_attempt(folder, now=RunStatus("running", None, 0.0, _started(job), job_id=job,
                                               scheduler=job_env().scheduler),
                         ended=as_ended(earlier) if earlier is not None else None)


def inherited_fds(env: Mapping[str, str]) -> tuple[int, ...]:
    """The descriptors the rank must inherit from this task: srun --mpi=pmi2 hands each task its PMI
    connection as an open descriptor named by PMI_FD (MPICH's and Intel MPI's PMI client write to it), which
    a child started with Python's default close_fds would not get."""
    try:
        fd = int(env.get("PMI_FD", ""))
        os.fstat(fd)
    except (ValueError, OSError):
        return ()
    return (fd,)


def end_process(proc: subprocess.Popen[Any], grace: float = 10.0) -> None:
    """SIGTERM to a task's process, continued if it was stopped (a hung or suspended rank), and SIGKILL
    if it is still there after ``grace`` seconds."""
    proc.terminate()
    try:
        os.kill(proc.pid, signal.SIGCONT)
    except OSError:
        pass
    timer = threading.Timer(grace, lambda: None if proc.poll() is not None else proc.kill())
    timer.daemon = True
    timer.start()


def _started(job: str | None) -> str:
    return f"job {job} started (attempt {attempt_number()})"


def _await_first_task(folder: Path, job: str | None, limit: float = 120.0) -> None:
    """The other tasks start their ranks once the first has moved an earlier attempt's files aside (else
    a fast task's new log would be moved with them)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        status = RunStatus.read(folder)
        if status is not None and status.job_id == job and status.message == _started(job):
            return
        time.sleep(0.2)


def _end_task(returncode: int) -> int:
    """A failed rank ends its task with a failing status, so srun (--kill-on-bad-exit) stops the others
    rather than leaving them blocked in a collective; submitit would report a returned value as success."""
    if returncode != 0:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(returncode if 0 < returncode < 256 else 1)
    return returncode
