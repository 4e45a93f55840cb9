"""A tool run with a time limit that ends whole: its process group, not its first process alone (``subprocess.run``'s
own timeout kills the child it started and leaves that child's children running: an ``srun`` step's tasks, a shell
script's pipeline)."""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any, Sequence

GRACE_S = 5.0  # between SIGTERM to the group and SIGKILL


def run_bounded(argv: Sequence[str], *, timeout: float, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run(argv, timeout=timeout, **kwargs)`` in a session of its own; at the limit its whole process
    group is sent SIGTERM, then SIGKILL after GRACE_S, and subprocess.TimeoutExpired raised as ``run`` raises it."""
    options: dict[str, Any] = {k: v for k, v in kwargs.items() if k not in ("capture_output", "input")}
    if kwargs.get("capture_output"):
        options.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc: subprocess.Popen[Any] = subprocess.Popen(list(argv), start_new_session=True, **options)
    try:
        out, err = proc.communicate(kwargs.get("input"), timeout=timeout)
    except subprocess.TimeoutExpired:
        end_group(proc)
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def end_group(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM to ``proc``'s process group, a grace of GRACE_S, then SIGKILL to whatever of the group is left (its
    first process may end on SIGTERM while its children do not); reaped."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.communicate(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.communicate()
