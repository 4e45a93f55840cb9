"""How a run ended and what happens next, for every executor alike (here, or as a SLURM job).

One retry policy: an attempt that ends ``failed`` (a rank's error, a launcher that exits non-zero, logs
that do not add up) or ``timeout`` (the run's own timeout here, the job's time limit under SLURM) is started
again while ``retries`` are left, each earlier attempt kept in ``attempt-N/`` of the run's folder. Never
retried: a placement the scheduler's grant cannot hold (another attempt gets the same GPUs), and a run a
person stopped (``cancelled``, ``interrupted``). A SLURM job that is preempted, loses a node or is requeued
by hand is started again by SLURM itself, since hvdbench's jobs are requeueable when retries are asked;
such an attempt is kept as ``preempted``, ``node-failure`` or ``requeued``, and is not counted against
``retries``.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import replace
from pathlib import Path

from hvdbench.core.containers import RUNTIMES
from hvdbench.core.metrics import logged_outcome
from hvdbench.core.spec import RunSpec, RunStatus, earlier_attempts

RETRIED = ("failed", "timeout")  # how an attempt may end and be started again
MAX_RETRIES = 10  # more would retry a broken run for ever
NEVER_RETRIED = {"cancelled": "stopped by a person or the scheduler", "interrupted": "stopped by Ctrl-C or SIGTERM",
                 "refused": "the scheduler's grant cannot hold its placement; another attempt gets the same GPUs"}


def retry_count(text: str) -> int:
    """argparse type of --retries: a whole number from 0 to MAX_RETRIES."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 0 <= value <= MAX_RETRIES:
        raise argparse.ArgumentTypeError(f"retries must be 0 to {MAX_RETRIES}, got {text}")
    return value


def retry_left(status: str, attempt: int, retries: int, refused: bool = False) -> bool:
    """Whether attempt ``attempt`` (from 1) that ended as ``status`` is started again under ``retries``."""
    return not refused and status in RETRIED and attempt <= retries


_REQUEUED = re.compile(r"attempt \d+ ([\w-]+): (.*)", re.S)


def failed_attempts(run_dir: Path) -> int:
    """The run's kept attempts that ended failed or timed out: the retries used (preempted, node-failure and
    requeued-by-hand attempts are the scheduler's, and use none)."""
    kept = (RunStatus.read(folder) for folder in earlier_attempts(run_dir))
    return sum(1 for status in kept if status is not None and status.status in RETRIED)


def requeued(ending: RunStatus, attempt: int, note: str = "") -> RunStatus:
    """The run's status while SLURM holds its job for another attempt (``requeued``, so the queue is asked
    and nothing submits it twice); how attempt ``attempt`` ended stays in the message, for ``as_ended``."""
    return replace(ending, status="requeued", message=f"attempt {attempt} {ending.status}: {ending.message}{note}")


def as_ended(status: RunStatus) -> RunStatus:
    """An earlier attempt's status as it is kept in ``attempt-N/``: how it ended. A ``requeued`` status gives
    back the ending it holds (failed, timeout, preempted, node-failure...); one still ``running`` ended
    without recording how (its first task was killed, or its node failed): ``lost``."""
    if status.status == "requeued":
        match = _REQUEUED.fullmatch(status.message)
        return replace(status, status=match.group(1), message=match.group(2)) if match else status
    if status.status == "running":
        return replace(status, status="lost", message=f"{status.message}; it ended without recording how (its "
                       "first task was killed, or its node failed) and was started again")
    return status


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


_PREFIX = re.compile(r"^(\[[\d,]+\](<std(?:out|err)>)?:|\d+:)\s*")
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b:?")
# a container runtime's own refusal (each runtime's ``refusal``, core/containers.py): the first real reason of a
# launch that failed in the runtime, ahead of the generic errors of the ranks it never started
_RUNTIME = re.compile("^(?:" + "|".join(r.refusal for r in RUNTIMES.values() if r.refusal) + ")")


def failure_reason(log: Path, limit: int = 300) -> str:
    """One line that says why a run failed, best first: a rank's own 'error:' line (its one-line reason, or the
    benchmark's refusal of its arguments, which peers' generic errors follow), a container runtime's own refusal
    (``FATAL: could not open image``), the first exception a rank raised, any error line, the last line."""
    try:
        raw = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "no launcher log"
    ranked = [(line, _PREFIX.sub("", line.strip())) for line in raw if line.strip()]
    own = [text for _, text in ranked if text.startswith("error: ")]
    runtime = [text for _, text in ranked if _RUNTIME.match(text)]
    from_ranks = [text for line, text in ranked if _PREFIX.match(line.strip()) and _EXCEPTION.match(text)]
    anywhere = [text for _, text in ranked if _EXCEPTION.match(text) or "error:" in text.lower()]
    for found in (own, runtime, from_ranks):
        if found:
            return found[0][:limit]
    chosen = anywhere[-1] if anywhere else (ranked[-1][1] if ranked else "no output")
    return chosen[:limit]


def tail(path: Path, lines: int = 20) -> str:
    """The last lines of a log (for a failed run's status)."""
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
