"""What SLURM says about jobs, without ``sacct`` (which needs slurmdbd and a database that many clusters, and
the test cluster, do not run): the results directory, where every job records how it ended
(``status.json``; its ranks' logs show whether it completed), and ``squeue --states=all``, which knows a
job while it is queued or running and for ``MinJobAge`` seconds after it ends. A job that ended unseen
(cancelled before it started, killed with its node) is found by ``refresh`` as ``lost``, and
``submit --resume`` submits it again like any run that did not complete. Also the allocation's hosts."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable

from hvdbench.suite.core.errors import HvdbenchError, LaunchError
from hvdbench.suite.core.spec import RUN_FILE, RunSpec, RunStatus

from .hostlist import expand_hostlist
from .policy import completed

ACTIVE = ("submitted", "pending", "running", "requeued")
FINAL_OK = ("ok",)
# squeue's job states -> how the run ended (or that it is still under way).
SQUEUE_STATES = {
    "PENDING": "pending", "CONFIGURING": "pending", "REQUEUED": "pending", "RESIZING": "pending",
    "RUNNING": "running", "COMPLETING": "running", "SUSPENDED": "running", "STAGE_OUT": "running",
    "CANCELLED": "cancelled", "TIMEOUT": "timeout", "DEADLINE": "timeout", "PREEMPTED": "preempted",
    "FAILED": "failed", "NODE_FAIL": "failed", "OUT_OF_MEMORY": "failed", "BOOT_FAIL": "failed",
    "COMPLETED": "completed",
}



def scheduler_says(job: str | None) -> str | None:
    """The job's own state as squeue reports it now (for telling a preemption from a cancel)."""
    if not job:
        return None
    try:
        out = subprocess.run(["squeue", "-h", "--states=all", "-j", job, "-o", "%T"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return SQUEUE_STATES.get(out.stdout.strip().split("\n")[0]) if out.returncode == 0 else None


def allocation_hosts() -> tuple[str, ...]:
    """The allocation's node names, expanded from SLURM_JOB_NODELIST (launchers/hostlist.py)."""
    nodelist = os.environ.get("SLURM_JOB_NODELIST")
    if not nodelist:
        raise LaunchError("not inside a SLURM allocation: SLURM_JOB_NODELIST is not set")
    return expand_hostlist(nodelist)


def squeue_states(job_ids: Iterable[str], run: Callable[..., Any] = subprocess.run) -> dict[str, tuple[str, str]]:
    """job id -> (state, reason) for every job squeue still knows (queued, running, or ended lately)."""
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    try:
        out = run(["squeue", "-h", "--states=all", "-j", ",".join(ids), "-o", "%i|%T|%r"],
                  capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LaunchError(f"squeue could not be asked about jobs {', '.join(ids)}: {exc}") from None
    if out.returncode != 0 and "Invalid job id" not in out.stderr:
        first = next((line.strip() for line in out.stderr.splitlines() if line.strip()), str(out.returncode))
        raise LaunchError(f"squeue failed: {first[:300]}")
    found = {}
    for line in out.stdout.splitlines():
        job, _, rest = line.strip().partition("|")
        state, _, reason = rest.partition("|")
        for one in array_tasks(job):
            found[one] = (SQUEUE_STATES.get(state.split()[0] if state else "", state.lower()), reason)
    return found


def array_tasks(job: str) -> list[str]:
    """squeue's id of a job or of array tasks still pending together (``12_[1-3,5%2]``) as single ids."""
    match = re.fullmatch(r"(\d+)_\[([\d,\-]+)(?:%\d+)?\]", job)
    if not match:
        return [job] if job else []
    out = []
    for part in match.group(2).split(","):
        low, _, high = part.partition("-")
        out += [f"{match.group(1)}_{i}" for i in range(int(low), int(high or low) + 1)]
    return out


def run_dirs(root: Path) -> list[Path]:
    """Every run directory (one holding run.json) under a results root, or root itself if it is one."""
    if (root / RUN_FILE).exists():
        return [root]
    return sorted(p.parent for p in root.glob(f"*/{RUN_FILE}"))


def refresh(root: Path, run: Callable[..., Any] = subprocess.run) -> dict[Path, RunStatus]:
    """Each run's state from its status.json and, for runs under way, the scheduler; states the
    scheduler knows and the run could not record (cancelled while pending, failed node) are written."""
    dirs = run_dirs(root)
    statuses = {d: RunStatus.read(d) for d in dirs}
    active = {d: s for d, s in statuses.items() if s is not None and s.status in ACTIVE and s.job_id}
    queue = squeue_states([s.job_id for s in active.values() if s.job_id], run) if active else {}
    out: dict[Path, RunStatus] = {}
    for folder, status in statuses.items():
        if status is None:
            try:
                done = completed(folder, RunSpec.read(folder / RUN_FILE))
            except HvdbenchError:
                done = None
            out[folder] = done or RunStatus("not run", None, 0.0)
            continue
        if folder in active:
            known = queue.get(status.job_id or "")
            if known is None:
                status = replace(status, status="lost", message=f"job {status.job_id} left the queue without "
                                 "recording an end (cancelled before it started, or killed)")
                status.write(folder)
            elif known[0] in ACTIVE:
                status = replace(status, status=known[0], message=f"job {status.job_id} {known[0]}"
                                 + (f" ({known[1]})" if known[1] and known[1] != "None" else ""))
            else:
                final = "failed" if known[0] == "completed" else known[0]
                status = replace(status, status=final, message=f"job {status.job_id} ended {known[0].upper()}"
                                 + ("" if final != "failed" else "; the run did not record an end"))
                status.write(folder)
        out[folder] = status
    return out
