"""One attempt of one run, whoever starts it: the command written beside the run, its process started with its
output in a log, waited for, and how it ended judged the one way (a non-zero exit fails it with the log's own
reason; else the rank logs must add up) and recorded. The local executor (launchers/local.py) and a scheduler's
task (launchers/slurm_task.py) differ only by the hooks below: how the process starts and is waited for, how long
the rank logs may take to settle, and what recording an ending does besides writing it (a SLURM job may requeue)."""

from __future__ import annotations

import shlex
import subprocess
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from hvdbench.core.metrics import Outcome, logged_outcome
from hvdbench.core.spec import RunFolder, RunSpec, RunStatus

from .policy import failure_reason, tail


class Attempt:
    """Start, wait, judge, record. Hooks: ``popen_options``, ``wait``, ``record``; ``settle_s`` (how long rank logs
    may take to show a complete run after the process ended); ``judges_logs`` (whether this process judges the
    rank logs, or only its own exit: a scheduler's other tasks)."""

    settle_s = 0.0
    judges_logs = True

    def __init__(self, spec: RunSpec, folder: RunFolder, job: str | None) -> None:
        self.spec, self.folder, self.job = spec, folder, job
        self.returncode: int | None = None  # the process's exit status, once it ended
        self.start = time.monotonic()
        self.log = folder.launcher_log  # where its output goes (run sets it)

    def popen_options(self, env: Mapping[str, str]) -> dict[str, Any]:
        """What the process is started with besides its command, environment, output and folder."""
        return {}

    def wait(self, proc: subprocess.Popen[bytes]) -> RunStatus | None:
        """Wait for the process and set ``returncode``; a status where the attempt ended otherwise (a timeout, a
        signal), None where the process's own exit says how it went."""
        self.returncode = proc.wait()
        return None

    def record(self, status: RunStatus) -> None:
        """Keep how the attempt ended (status.json)."""
        self.folder.write_status(status)

    def seconds(self) -> float:
        return time.monotonic() - self.start

    def run(self, argv: Sequence[str], env: Mapping[str, str], log: Path, *, write_command: bool = True) -> RunStatus:
        """Run ``argv`` with its output in ``log`` (a path in the run's folder) and record how it ended."""
        if write_command:
            self.folder.command_file.write_text(shlex.join(argv) + "\n", encoding="utf-8")
        self.start, self.log = time.monotonic(), log
        with open(log, "w", encoding="utf-8") as out:
            try:
                proc = subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        env=dict(env), cwd=self.folder.path, **self.popen_options(env))
            except OSError as exc:
                status = RunStatus("failed", None, 0.0, f"could not start {argv[0]}: {exc.strerror}", job_id=self.job)
            else:
                status = self.wait(proc) or self.judge()
        self.record(status)
        return status

    def judge(self) -> RunStatus:
        """How an attempt whose process ended by itself went: its exit, then (``judges_logs``) its rank logs."""
        seconds, log = self.seconds(), self.log
        if self.returncode != 0:
            return RunStatus("failed", self.returncode, seconds, failure_reason(log), tail(log), self.job)
        outcome = self.outcome() if self.judges_logs else Outcome("ok")
        if not outcome.ok:
            return RunStatus("failed", self.returncode, seconds, outcome.reason, tail(log), self.job)
        return RunStatus("ok", self.returncode, seconds, job_id=self.job)

    def measured_whole(self) -> bool:
        """Whether every rank has logged its summary, each loss finite: what an ending that comes now (a time limit,
        its warning) would stop is the processes' teardown, never a measurement."""
        return logged_outcome(self.folder.path, self.spec.np).ok

    def outcome(self) -> Outcome:
        """The rank logs' verdict, waiting up to ``settle_s`` while they are incomplete (a scheduler's first task
        may end before the others wrote their last record)."""
        deadline = time.monotonic() + self.settle_s
        outcome = logged_outcome(self.folder.path, self.spec.np)
        while outcome.status == "incomplete" and time.monotonic() < deadline:
            time.sleep(1.0)
            outcome = logged_outcome(self.folder.path, self.spec.np)
        return outcome
