"""``hvdbench status DIR``: each run's state, the jobs still under way asked of their scheduler."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any

from hvdbench.analysis.history.recording import record_after
from hvdbench.core.errors import UsageError
from hvdbench.core.validate import inert

from .flags import store_flag


def cmd_status(args: argparse.Namespace) -> int:
    """Print each run's state; exit 0 when every run is ok."""
    from hvdbench.launchers.queues import refresh
    from hvdbench.launchers.schedulers import ACTIVE

    if not args.dir.exists():
        raise UsageError(f"{args.dir}: no such results directory")
    states = refresh(args.dir)
    if not states:
        raise UsageError(f"{args.dir}: no run directories (run.json) here")
    counts: Counter[str] = Counter()
    for folder, status in states.items():
        counts[status.status] += 1
        job = f"job {status.job_id}" if status.job_id else "-"
        print(f"{inert(folder.name):<40} {inert(status.status):<10} {inert(job):<14} {inert(status.message)}")
    if not any(counts[state] for state in ACTIVE):  # every job has ended: its runs into the history store
        record_after([args.dir], args.store)
    print(", ".join(f"{n} {state}" for state, n in sorted(counts.items())))
    return 0 if counts["ok"] == len(states) else 1


def declare(sub: Any) -> None:
    """hvdbench status: each run's state."""
    status = sub.add_parser("status", help="each run's state from a results directory and the scheduler",
                            description="One line per run: state (ok, failed, timeout, cancelled, preempted, "
                                        "pending, running, lost, not run), job id and reason.")
    status.add_argument("dir", type=Path, help="results root (or one run directory)")
    store_flag(status)
