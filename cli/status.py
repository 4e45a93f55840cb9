"""``hvdbench status DIR``: each run's state, the jobs still under way asked of their scheduler."""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from hvdbench.analysis.history.recording import record_after
from hvdbench.core.errors import UsageError
from hvdbench.core.validate import inert

from .flags import store_flag


UNDER_WAY_EXIT = 5  # exit status while runs are under way and none has ended badly


def natural(name: str) -> list[Any]:
    """A run's name in natural order: np8 before np16."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def cmd_status(args: argparse.Namespace) -> int:
    """Print each run's state (or --json); exit 0 when every run is ok, 1 when any ended otherwise, 5 while runs are
    under way and none has ended badly: a script can poll it."""
    from hvdbench.launchers.queues import refresh
    from hvdbench.launchers.schedulers import ACTIVE

    if not args.dir.exists():
        raise UsageError(f"{args.dir}: no such results directory")
    states = refresh(args.dir)
    if not states:
        raise UsageError(f"{args.dir}: no run directories (run.json) here")
    counts: Counter[str] = Counter(status.status for status in states.values())
    ordered = sorted(states.items(), key=lambda item: natural(item[0].name))
    if args.json:
        print(json.dumps([{"run": folder.name, "status": status.status, "job_id": status.job_id,
                           "scheduler": status.scheduler, "message": status.message} for folder, status in ordered],
                         indent=1))
    else:
        for folder, status in ordered:
            job = f"job {status.job_id}" if status.job_id else "-"
            print(f"{inert(folder.name):<40} {inert(status.status):<10} {inert(job):<14} {inert(status.message)}")
        print(", ".join(f"{n} {state}" for state, n in sorted(counts.items())))
    under_way = sum(counts[state] for state in ACTIVE)
    if not under_way:  # every job has ended: its runs into the history store
        record_after([args.dir], args.store, quiet=True)  # a poll says nothing new
    if counts["ok"] == len(states):
        return 0
    return UNDER_WAY_EXIT if counts["ok"] + under_way == len(states) else 1


def declare(sub: Any) -> None:
    """hvdbench status: each run's state."""
    status = sub.add_parser("status", help="each run's state from a results directory and the scheduler",
                            description="One line per run in natural order: state (ok, failed, timeout, cancelled, "
                                        "preempted, pending, running, lost, not run), job id and reason (the "
                                        "scheduler's own where a job ended without a record). Exit status: 0 every "
                                        "run ok, 1 any ended otherwise, 5 runs still under way and none ended "
                                        "badly.")
    status.add_argument("--json", action="store_true", help="the runs as a JSON list (run, status, job_id, "
                        "scheduler, message)")
    status.add_argument("dir", type=Path, help="results root (or one run directory)")
    store_flag(status)
