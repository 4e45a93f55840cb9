"""The local executor: runs each RunSpec's command on this machine, one at a time, with a timeout."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping

from hvdbench.suite.core.errors import LaunchError
from hvdbench.suite.core.gpu_choice import granted, placement_problem
from hvdbench.suite.core.metrics import logged_outcome
from hvdbench.suite.core.spec import RunSpec, RunStatus, keep_earlier_attempt

from .base import LaunchContext, Launcher, get_launcher

LAUNCHER_LOG = "launcher.log"
RETRIED = ("failed", "timeout")  # how an attempt may end and be started again (never a cancel or Ctrl-C)


_PREFIX = re.compile(r"^(\[[\d,]+\](<std(?:out|err)>)?:|\d+:)\s*")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b:?")


def failure_reason(log: Path, limit: int = 300) -> str:
    """One line that says why a run failed, best first: a rank's own 'error:' line, the first exception
    a rank raised, any error line, the last line."""
    try:
        raw = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "no launcher log"
    ranked = [(line, _PREFIX.sub("", line.strip())) for line in raw if line.strip()]
    own = [text for _, text in ranked if text.startswith("error: rank ")]
    from_ranks = [text for line, text in ranked if _PREFIX.match(line.strip()) and _EXCEPTION.match(text)]
    anywhere = [text for _, text in ranked if _EXCEPTION.match(text) or "error:" in text.lower()]
    for found in (own, from_ranks):
        if found:
            return found[0][:limit]
    chosen = anywhere[-1] if anywhere else (ranked[-1][1] if ranked else "no output")
    return chosen[:limit]


class Stopped(BaseException):
    """The executor was told to stop (SIGTERM, or SIGUSR2 ahead of a SLURM time limit)."""

    def __init__(self, status: str, message: str, signum: int) -> None:
        super().__init__(message)
        self.status, self.message, self.signum = status, message, signum


@contextmanager
def stop_signals() -> Iterator[None]:
    """SIGTERM (a cancelled job, a killed sweep) and SIGUSR2 (SLURM's warning before its time limit)
    stop the run in flight cleanly; the previous handlers come back afterwards."""
    in_job = bool(os.environ.get("SLURM_JOB_ID"))

    def on_term(signum: int, _frame: object) -> None:
        raise Stopped("cancelled" if in_job else "interrupted", "job cancelled (SIGTERM)" if in_job else "SIGTERM",
                      signum)

    def on_usr2(signum: int, _frame: object) -> None:
        raise Stopped("timeout", "the job reached its time limit (SIGUSR2 before SLURM's end)", signum)

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, handler) for sig, handler in ((signal.SIGTERM, on_term), (signal.SIGUSR2, on_usr2))}
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


class LocalExecutor:
    """Runs specs in order under one results root, each with its own launcher (by the spec's name);
    finished runs are kept and skipped on resume; a failure is recorded and the next run starts."""

    def __init__(self, root: Path, *, python: str = sys.executable, timeout: float = 1800.0, resume: bool = True,
                 hosts: tuple[str, ...] = ("localhost",), ssh_port: int | None = None,
                 ssh_identity_file: Path | None = None, pmi: str = "pmix", retries: int = 0, scheduler_gpus: bool | None = None,
                 report: Callable[[str], None] = lambda line: print(line, flush=True)) -> None:
        self.root = root
        self.python = python
        self.timeout = timeout
        self.resume = resume
        self.report = report
        self.hosts, self.ssh_port, self.ssh_identity_file, self.pmi = hosts, ssh_port, ssh_identity_file, pmi
        self.retries = retries
        self.scheduler_gpus = scheduler_chose_gpus() if scheduler_gpus is None else scheduler_gpus

    def context(self, run_dir: Path) -> LaunchContext:
        """Where and how one run's command is built."""
        return LaunchContext(python=self.python, run_dir=run_dir, hosts=self.hosts, ssh_port=self.ssh_port,
                             ssh_identity_file=self.ssh_identity_file, pmi=self.pmi,
                             scheduler_gpus=self.scheduler_gpus)

    def describe(self, spec: RunSpec) -> str:
        """What running spec here would do: its variables and exact, shell-quoted command."""
        launcher = get_launcher(spec.launcher)
        argv = launcher.command(spec, self.context((self.root / spec.id).resolve()))
        env = " ".join(f"{k}={shlex.quote(v)}"
                       for k, v in sorted(launcher.environment(spec, self.scheduler_gpus).items()))
        return f"{env + ' ' if env else ''}{shlex.join(argv)}"

    def run_all(self, specs: Iterable[RunSpec]) -> list[RunStatus]:
        """Run every spec; SIGTERM/SIGUSR2 stop the one in flight (recorded) and end the sweep."""
        specs = list(specs)
        results: list[RunStatus] = []
        done: Counter[str] = Counter()
        with stop_signals():
            for index, spec in enumerate(specs, 1):
                self.report(progress_line(index, len(specs), done, f"{spec.id} ({spec.np} rank(s) via {spec.launcher})"))
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
                return RunStatus("ok", done.returncode, done.seconds, "already complete, skipped")
        refused = placement_refusal(spec, self.scheduler_gpus)
        retries = 0 if refused else self.retries  # no retry changes what the scheduler granted
        for attempt in range(retries + 1):
            status = self.attempt(spec, run_dir, refused)
            if status.status not in RETRIED or attempt == retries:
                return status
            self.report(f"{spec.id}: attempt {attempt + 1} {status.status} ({status.message}); "
                        f"retrying, {retries - attempt} retr{'y' if retries - attempt == 1 else 'ies'} left")
        return status

    def attempt(self, spec: RunSpec, run_dir: Path, refused: str | None = None) -> RunStatus:
        """One attempt: what an earlier one left moved aside, then the command run (or, where the
        placement was refused, nothing run) and its status written."""
        try:
            spec.write(run_dir)
            keep_earlier_attempt(run_dir)  # a rerun moves what was there aside, never deletes it
        except OSError as exc:
            raise LaunchError(f"cannot write the run directory {run_dir}: {exc.strerror}") from None
        if refused:
            status = RunStatus("failed", None, 0.0, refused, job_id=os.environ.get("SLURM_JOB_ID"))
            status.write(run_dir)
            return status
        launcher = get_launcher(spec.launcher)
        argv = launcher.command(spec, self.context(run_dir.resolve()))
        (run_dir / "command.sh").write_text(shlex.join(argv) + "\n", encoding="utf-8")
        status = self._execute(argv, launcher, spec, run_dir)
        status.write(run_dir)
        return status

    def _execute(self, argv: list[str], launcher: Launcher, spec: RunSpec, run_dir: Path) -> RunStatus:
        env = launch_environment(launcher, spec, self.python, self.scheduler_gpus)
        start = time.monotonic()
        log_path = run_dir / LAUNCHER_LOG
        job = os.environ.get("SLURM_JOB_ID")
        with open(log_path, "w", encoding="utf-8") as log:
            try:
                proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        env=env, cwd=run_dir, start_new_session=True)
            except OSError as exc:
                return RunStatus("failed", None, 0.0, f"could not start {argv[0]}: {exc.strerror}", job_id=job)
            try:
                returncode = proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                return RunStatus("timeout", None, time.monotonic() - start,
                                 f"no end after {self.timeout:g} s; every rank was killed", tail(log_path), job)
            except KeyboardInterrupt:  # recorded first: a scheduler may kill us soon after its signal
                RunStatus("interrupted", None, time.monotonic() - start, "stopped by Ctrl-C", job_id=job).write(run_dir)
                _kill_group(proc)
                raise
            except Stopped as stop:
                RunStatus(stop.status, None, time.monotonic() - start, stop.message, tail(log_path), job).write(run_dir)
                _kill_group(proc)
                raise
        seconds = time.monotonic() - start
        if returncode != 0:
            return RunStatus("failed", returncode, seconds, failure_reason(log_path), tail(log_path), job)
        outcome = logged_outcome(run_dir, spec.np)
        if not outcome.ok:
            return RunStatus("failed", returncode, seconds, outcome.reason, tail(log_path), job)
        return RunStatus("ok", returncode, seconds, job_id=job)


def completed(run_dir: Path, spec: RunSpec) -> RunStatus | None:
    """The recorded status of a run that is complete (judged by its rank logs, as the report judges it),
    else None. A complete run whose status.json is missing or unreadable gets one back, saying so."""
    recorded = RunStatus.read(run_dir)
    if recorded is not None and recorded.status != "ok":
        return None
    if not logged_outcome(run_dir, spec.np).ok:
        return None
    if recorded is None:
        recorded = RunStatus("ok", None, 0.0, "complete by its rank logs; status.json was unreadable")
        recorded.write(run_dir)
    return recorded


def scheduler_chose_gpus(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process runs in a SLURM job that was granted GPUs (then SLURM's CUDA_VISIBLE_DEVICES stands)."""
    environ = os.environ if environ is None else environ
    return bool(environ.get("SLURM_JOB_ID")) and granted(environ) is not None


def placement_refusal(spec: RunSpec, scheduler_gpus: bool) -> str | None:
    """Why the run's placement cannot run on the GPUs the scheduler granted this node, in one line (None
    where it can, or where no scheduler chose the GPUs)."""
    if not scheduler_gpus or spec.devices is None:
        return None
    return placement_problem(spec.devices, granted(os.environ), socket.gethostname())


def launch_environment(launcher: Launcher, spec: RunSpec, python: str, scheduler_gpus: bool = False) -> dict[str, str]:
    """This process's environment with the spec's knobs and GPUs, the ranks' interpreter first on PATH,
    and Open MPI allowed to run as root (containers and CI run as root)."""
    env = {**os.environ, **launcher.environment(spec, scheduler_gpus)}
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env["PATH"] = f"{Path(python).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def tail(path: Path, lines: int = 20) -> str:
    """The last lines of a log (for a failed run's status)."""
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


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
