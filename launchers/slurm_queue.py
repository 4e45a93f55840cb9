"""What SLURM says about jobs, without ``sacct`` (which needs slurmdbd and a database that many clusters, and
the test cluster, do not run): the results directory, where every job records how it ended
(``status.json``; its ranks' logs show whether it completed), and ``squeue --states=all``, which knows a
job while it is queued or running and for ``MinJobAge`` seconds after it ends (launchers/queues.py's ``refresh``
finds a job that ended unseen as ``lost``); why a running job was stopped; the allocation's hosts."""

from __future__ import annotations

import re
import subprocess
import time
from typing import Any, Callable, Iterable

from hvdbench.core.errors import LaunchError
from hvdbench.core.job_env import job_env

from .schedulers import UNKNOWN


REQUEUED_BY_SLURM = ("preempted", "node-failure", "requeued")  # endings after which SLURM starts the job again
# squeue's job states -> how the run ended (or that it is still under way).
SQUEUE_STATES = {
    "PENDING": "pending", "CONFIGURING": "pending", "REQUEUED": "pending", "RESIZING": "pending",
    "RUNNING": "running", "COMPLETING": "running", "SUSPENDED": "running", "STAGE_OUT": "running",
    "CANCELLED": "cancelled", "TIMEOUT": "timeout", "DEADLINE": "timeout", "PREEMPTED": "preempted",
    "FAILED": "failed", "NODE_FAIL": "node-failure", "OUT_OF_MEMORY": "failed", "BOOT_FAIL": "failed",
    "COMPLETED": "completed",
}



def job_fields(job: str, run: Callable[..., Any] = subprocess.run, timeout: float = 10.0) -> dict[str, str]:
    """``scontrol show job -o JOB`` as its fields (JobState, Restarts, NodeList...); {} where it cannot say."""
    try:
        out = run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return {}
    if out.returncode != 0:
        return {}
    return dict(word.partition("=")[::2] for word in out.stdout.split() if "=" in word)


def unhealthy_nodes(nodes: Iterable[str], run: Callable[..., Any] = subprocess.run) -> list[str]:
    """Those of ``nodes`` that sinfo shows down, drained, failing or not responding (``*``)."""
    names = sorted(set(nodes))
    if not names:
        return []
    try:
        out = run(["sinfo", "-h", "-N", "-n", ",".join(names), "-o", "%N|%T"], capture_output=True, text=True,
                  timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    bad = set()
    for line in out.stdout.splitlines() if out.returncode == 0 else []:
        node, _, state = line.strip().partition("|")
        if state.endswith("*") or state.startswith(("down", "drain", "fail", "maint", "reboot")):
            bad.add(node)
    return sorted(bad)


def slurm_config(run: Callable[..., Any] = subprocess.run) -> dict[str, str]:
    """``scontrol show config`` as its settings ({} where it cannot say)."""
    try:
        out = run(["scontrol", "show", "config"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {}
    return {k.strip(): v.strip() for k, _, v in (line.partition("=") for line in out.stdout.splitlines())}


def preempts_by_requeue(config: dict[str, str]) -> bool:
    """Whether a cluster of this configuration preempts jobs by requeueing them."""
    return config.get("PreemptType", "preempt/none") != "preempt/none" and "REQUEUE" in config.get("PreemptMode", "")


def requeue_said(fields: dict[str, str], restarts: int) -> str | None:
    """What SLURM's record of a job says of its attempt's end at SIGTERM: ``requeued`` (the restart count past
    this attempt's: SLURM counts a preemption or a requeue before it signals the job), ``timeout``,
    ``preempted`` (preempted and cancelled), else ``cancelled`` (a cancelled job shows COMPLETING with its
    count unchanged until its tasks end); None where scontrol gave no answer."""
    if not fields:
        return None
    count, state = fields.get("Restarts", ""), fields.get("JobState", "")
    if (count.isdigit() and int(count) > restarts) or state.startswith("REQUEUE") or state == "NODE_FAIL":
        return "requeued"
    return {"TIMEOUT": "timeout", "DEADLINE": "timeout", "PREEMPTED": "preempted"}.get(state, "cancelled")


def why_stopped(job: str | None, restarts: int, nodes: Iterable[str], run: Callable[..., Any] = subprocess.run,
                wait: float | None = None, clock: Callable[[], float] = time.monotonic,
                pause: Callable[[float], None] = time.sleep) -> tuple[str, str]:
    """How a running job's attempt ended when SLURM sent SIGTERM, as (status, message). SLURM shows a
    requeue by its restart count moving past ``restarts`` (this attempt's): the job lost a node when one of
    ``nodes`` (this attempt's) is down or not responding, else it was preempted where the cluster preempts by
    requeue (SLURM shows a hand-made ``scontrol requeue`` alike, and the message says so), else requeued by hand.
    Without a requeue, the job was cancelled, or its time or deadline ran out. A busy controller may not answer
    at once: scontrol is asked again until it does, for at most ``wait`` seconds (default: 60% of the KillWait
    SLURM leaves before SIGKILL, at most 20 s); without an answer the attempt is taken as cancelled, which a
    requeued job's next attempt corrects (slurm_task: a job SLURM starts again was not cancelled). Under another
    scheduler (PBS: qdel, or the walltime run out) the job was stopped, and no more is known."""
    if not job_env().controller_says_why:
        return "cancelled", f"job {job} was stopped by {job_env().scheduler} (deleted, or its time ran out)"
    config = slurm_config(run) if job else {}
    if wait is None:
        kill_wait = re.match(r"\d+", config.get("KillWait", "30"))
        wait = min(20.0, 0.6 * int(kill_wait.group() if kill_wait else 30))
    deadline = clock() + wait
    fields: dict[str, str] = {}
    while job:
        fields = job_fields(job, run, timeout=max(1.0, min(10.0, deadline - clock())))
        if fields or clock() >= deadline:
            break
        pause(0.5)
    said = requeue_said(fields, restarts)
    if said == "requeued":
        lost = unhealthy_nodes(nodes, run)
        if lost:
            return "node-failure", f"job {job} lost node(s) {','.join(lost)} and SLURM requeued it"
        if preempts_by_requeue(config or slurm_config(run)):
            return "preempted", f"job {job} was preempted and SLURM requeued it (a hand-made requeue looks alike)"
        return "requeued", f"job {job} was requeued by hand (scontrol requeue)"
    if said == "timeout":
        state = fields.get("JobState", "TIMEOUT")
        return "timeout", f"job {job} reached its {state.lower().replace('timeout', 'time limit')}"
    if said == "preempted":
        return "cancelled", f"job {job} was preempted and cancelled (this cluster does not requeue it)"
    if said is None and job:
        return "cancelled", f"job {job} was stopped and scontrol did not answer within {wait:.0f} s; taken as cancelled"
    return "cancelled", f"job {job} was cancelled"


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
            word = state.split()[0] if state else ""
            found[one] = (SQUEUE_STATES[word], reason) if word in SQUEUE_STATES else \
                (UNKNOWN, f"state {word[:40]!r}, which hvdbench does not know")
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
