"""What PBS (PBS Pro, OpenPBS) says about its jobs: ``qstat -x -f -F json``, which knows a job while it is queued or
running and, with -x, after it ends for as long as the server keeps its history."""

from __future__ import annotations

import json
import subprocess
from typing import Any, Callable, Sequence

from hvdbench.core.errors import LaunchError

from .job_shape import NodeShape, NodeShapes, shapes_of
from .schedulers import UNKNOWN

# qstat's job states -> how the run ended (or that it is under way)
QSTAT_STATES = {"Q": "pending", "H": "pending", "W": "pending", "T": "pending", "M": "pending", "B": "running",
                "R": "running", "E": "running", "S": "running", "U": "running", "X": "completed", "F": "completed"}


def qstat_states(job_ids: Sequence[str], run: Callable[..., Any] = subprocess.run) -> dict[str, tuple[str, str]]:
    """job id -> (state, PBS's comment) for every job qstat knows, finished ones included (-x: its history)."""
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    try:
        out = run(["qstat", "-x", "-f", "-F", "json", *ids], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LaunchError(f"qstat could not be asked about jobs {', '.join(ids)}: {exc}") from None
    if out.returncode != 0 and "Unknown Job Id" not in out.stderr and not out.stdout.strip():
        first = next((line.strip() for line in out.stderr.splitlines() if line.strip()), str(out.returncode))
        raise LaunchError(f"qstat failed: {first[:300]}")
    try:
        jobs = json.loads(out.stdout or "{}").get("Jobs") or {}
        if not isinstance(jobs, dict):
            raise ValueError("Jobs is no mapping")
    except (ValueError, AttributeError) as exc:
        raise LaunchError(f"qstat -F json printed no job table: {str(exc)[:200]}") from None
    found = {}
    for job, fields in jobs.items():
        fields = fields if isinstance(fields, dict) else {}
        state = str(fields.get("job_state", ""))
        exit_status = fields.get("Exit_status")
        status = QSTAT_STATES.get(state, UNKNOWN)
        if status == "completed" and exit_status not in (None, 0):
            status = "failed"
        said = str(fields.get("comment", ""))[:300] if status != UNKNOWN else \
            f"state {state[:40]!r}, which hvdbench does not know"
        if status == "failed":  # PBS's own reason beside its comment (271: killed by a signal, 256 + 15)
            said = "; ".join(filter(None, [f"Exit_status {str(exit_status)[:20]}", said]))
        found[str(job)] = (status, said)
    return found


def pbs_node_shape(run: Callable[..., Any] = subprocess.run, gpus: bool = True) -> NodeShapes | None:
    """The node shapes PBS offers (``pbsnodes -a -F json``: resources_available.ncpus and ngpus; nodes with GPUs
    only where the jobs ask for them), a run sized from those that can hold it; None where pbsnodes cannot say."""
    try:
        out = run(["pbsnodes", "-a", "-F", "json"], capture_output=True, text=True, timeout=60)
        nodes = json.loads(out.stdout or "{}").get("nodes") if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, AttributeError):
        return None
    shapes = []
    for fields in (nodes or {}).values() if isinstance(nodes, dict) else ():
        have = fields.get("resources_available") if isinstance(fields, dict) else None
        cpus = have.get("ncpus") if isinstance(have, dict) else None
        count = have.get("ngpus", 0) if isinstance(have, dict) else 0
        if isinstance(cpus, int) and cpus > 0 and isinstance(count, int) and (count > 0 or not gpus):
            shapes.append(NodeShape(cpus, count))  # a node that lists no ngpus has none
    return shapes_of(sorted(set(shapes), key=lambda n: (n.cpus, n.gpus or 0)))
