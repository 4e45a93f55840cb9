"""The local executor: runs each RunSpec's command on this machine, one at a time, with a timeout."""

from __future__ import annotations

import ctypes
import os
import shlex
import signal
import subprocess
import sys
import threading
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

from hvdbench.core.job_env import job_env
from hvdbench.core.spec import RunFolder, RunSpec, RunStatus

from .attempt import Attempt
from .base import LaunchContext, get_launcher
from .executor import Executor, launch_environment, placement_refusal, results_lock, scheduler_chose_gpus
from .policy import completed, retry_left, tail

SKIPPED = "already complete, skipped"  # the message of a run resume found complete


class Stopped(BaseException):
    """The executor was told to stop (SIGTERM, or SIGUSR2 ahead of a SLURM time limit)."""

    def __init__(self, status: str, message: str, signum: int) -> None:
        super().__init__(message)
        self.status, self.message, self.signum = status, message, signum


@contextmanager
def stop_signals() -> Iterator[None]:
    """SIGTERM (a cancelled job, a killed sweep) and SIGUSR2 (SLURM's warning before its time limit)
    stop the run in flight cleanly, as SIGINT (Ctrl-C) does; the previous handlers come back afterwards."""
    in_job = job_env().job_id is not None

    def on_term(signum: int, _frame: object) -> None:
        raise Stopped("cancelled" if in_job else "interrupted", "job cancelled (SIGTERM)" if in_job else "SIGTERM",
                      signum)

    def on_usr2(signum: int, _frame: object) -> None:
        raise Stopped("timeout", "the job reached its time limit (SIGUSR2 before SLURM's end)", signum)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # SIGINT interrupts the sweep however it was started: a shell starts a background command with SIGINT
    # ignored, and Python then leaves it ignored, so `kill -INT` would not reach a sweep started with `&`
    handlers = ((signal.SIGTERM, on_term), (signal.SIGUSR2, on_usr2), (signal.SIGINT, signal.default_int_handler))
    previous = {sig: signal.signal(sig, handler) for sig, handler in handlers}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def progress_line(index: int, total: int, done: Counter[str], now: str, width: int = 20) -> str:
    """``[3/12] [#####...............] now: <what> | 1 ok, 1 failed | 10 left``."""
    finished = sum(done.values())
    filled = round(width * finished / total) if total else width
    counts = ", ".join(f"{n} {state}" for state, n in sorted(done.items())) or "none finished"
    return f"[{index}/{total}] [{'#' * filled}{'.' * (width - filled)}] now: {now} | {counts} | {total - finished} left"


class LocalExecutor(Executor):
    """Runs specs in order under one results root, each with its own launcher (by the spec's name);
    finished runs are kept and skipped on resume; a failure is recorded and the next run starts."""

    def __init__(self, root: Path, *, python: str = sys.executable, timeout: float = 1800.0, resume: bool = True,
                 hosts: tuple[str, ...] = ("localhost",), ssh_port: int | None = None,
                 ssh_identity_file: Path | None = None, pmi: str = "pmix", retries: int = 0,
                 scheduler_gpus: bool | None = None, environment: Mapping[str, str] | None = None,
                 report: Callable[[str], None] = lambda line: print(line, flush=True)) -> None:
        super().__init__(root, python=python, resume=resume, retries=retries, report=report)
        self.timeout = timeout
        self.environment = dict(environment or {})  # for every run's launcher and ranks besides their own
        self.hosts, self.ssh_port, self.ssh_identity_file, self.pmi = hosts, ssh_port, ssh_identity_file, pmi
        self.scheduler_gpus = scheduler_chose_gpus() if scheduler_gpus is None else scheduler_gpus

    def finished(self, spec: RunSpec) -> bool:
        run_dir = self.root / spec.id
        return run_dir.is_dir() and completed(run_dir, spec) is not None

    def context(self, run_dir: Path) -> LaunchContext:
        """Where and how one run's command is built (inside a job, its hosts reached through its scheduler)."""
        return LaunchContext(python=self.python, run_dir=run_dir, hosts=self.hosts, ssh_port=self.ssh_port,
                             ssh_identity_file=self.ssh_identity_file, pmi=self.pmi,
                             scheduler_gpus=self.scheduler_gpus, scheduler=job_env().scheduler)

    def limit_s(self) -> float | None:
        return float(self.timeout) if self.timeout else None

    def describe(self, spec: RunSpec) -> str:
        """What running spec here would do: its variables and exact, shell-quoted command."""
        launcher = get_launcher(spec.launcher)
        argv = launcher.command(spec, self.context((self.root / spec.id).resolve()))
        env = " ".join(f"{k}={shlex.quote(v)}"
                       for k, v in sorted(launcher.environment(spec, self.scheduler_gpus).items()))
        return f"{env + ' ' if env else ''}{shlex.join(argv)}"

    def execute(self, specs: Sequence[RunSpec]) -> list[RunStatus]:
        """Run every spec here, one at a time."""
        return self.run_all(specs)

    def run_all(self, specs: Iterable[RunSpec]) -> list[RunStatus]:
        """Run every spec; SIGTERM/SIGUSR2 stop the one in flight (recorded) and end the sweep."""
        specs = list(specs)
        self.plan_order(specs)
        results: list[RunStatus] = []
        done: Counter[str] = Counter()
        with results_lock(self.root), stop_signals():
            for index, spec in enumerate(specs, 1):
                now = f"{spec.id} ({spec.np} rank(s) via {spec.launcher})"
                self.report(progress_line(index, len(specs), done, now))
                status = self.run(spec)
                done[status.status] += 1
                self.report(f"[{index}/{len(specs)}] {spec.id}: {status.status}"
                            + (f" ({status.message})" if status.message else f" in {status.seconds:.1f} s"))
                results.append(status)
        return results

    def run(self, spec: RunSpec) -> RunStatus:
        """Run one spec in its own directory and record how it ended; a failed or timed-out attempt is
        started again up to ``retries`` times, each earlier attempt kept in attempt-N/."""
        run_dir = self.root / spec.id
        if self.resume and run_dir.is_dir():
            done = completed(run_dir, spec)
            if done is not None:
                return RunStatus("ok", done.returncode, done.seconds, SKIPPED)
        refused = placement_refusal(spec, self.scheduler_gpus)
        attempt = 1
        while True:
            status = self.attempt(spec, run_dir, refused)
            if not retry_left(status.status, attempt, self.retries, refused=bool(refused)):
                return status
            left = self.retries - attempt
            self.report(f"{spec.id}: attempt {attempt} {status.status} ({status.message}); "
                        f"retrying, {left + 1} retr{'y' if left == 0 else 'ies'} left")
            attempt += 1

    def attempt(self, spec: RunSpec, run_dir: Path, refused: str | None = None) -> RunStatus:
        """One attempt: what an earlier one left moved aside, then the command run (or, where the
        placement was refused, nothing run) and its status written."""
        self.prepare(spec, run_dir)  # a rerun moves what was there aside, never deletes it
        folder = RunFolder(run_dir)
        if refused:
            status = RunStatus("failed", None, 0.0, refused, job_id=job_env().job_id)
            folder.write_status(status)
            return status
        launcher = get_launcher(spec.launcher)
        argv = launcher.command(spec, self.context(run_dir.resolve()))
        env = {**launch_environment(launcher, spec, self.python, self.scheduler_gpus), **self.environment}
        return LocalAttempt(spec, folder, job_env().job_id, self.timeout).run(argv, env, folder.launcher_log)


class LocalAttempt(Attempt):
    """An attempt run here: the launcher in a session of its own that ends with this process, killed with every
    rank after the run's timeout, and stopped (recorded first) by Ctrl-C, SIGTERM or SIGUSR2."""

    def __init__(self, spec: RunSpec, folder: RunFolder, job: str | None, timeout: float) -> None:
        super().__init__(spec, folder, job)
        self.timeout = timeout

    def popen_options(self, env: Mapping[str, str]) -> dict[str, Any]:
        return {"start_new_session": True, "preexec_fn": _die_with_parent}

    def wait(self, proc: subprocess.Popen[bytes]) -> RunStatus | None:
        try:
            self.returncode = proc.wait(timeout=self.timeout)
            return None
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return RunStatus("timeout", None, self.seconds(), f"no end after {self.timeout:g} s; every rank was killed",
                             tail(self.log), self.job)
        except KeyboardInterrupt:  # recorded first: a scheduler may kill us soon after its signal
            self.folder.write_status(RunStatus("interrupted", None, self.seconds(), "stopped by Ctrl-C",
                                               job_id=self.job))
            _kill_group(proc)
            raise
        except Stopped as stop:
            self.folder.write_status(RunStatus(stop.status, None, self.seconds(), stop.message, tail(self.log),
                                               self.job))
            _kill_group(proc)
            raise


def _die_with_parent() -> None:
    """In the launcher, before it starts: SIGTERM when this sweep ends, however it ends (kill -9 included),
    so the launcher ends its ranks rather than running on beside a resumed sweep (Linux prctl)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Terminate the launcher and every rank it started (one process group), then make sure."""
    for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue
