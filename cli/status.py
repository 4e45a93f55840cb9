"""``hvdbench status DIR``: each run's state, the jobs still under way asked of their scheduler."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from hvdbench.core.validate import inert
from hvdbench.workflows.status import states

from .flags import store_flag


def cmd_status(args: argparse.Namespace) -> int:
    """Print each run's state (or --json); exit 0 when every run is ok, 1 when any ended otherwise, 5 while runs are
    under way and none has ended badly: a script can poll it."""
    found = states(args.dir, args.store)
    if args.json:
        print(json.dumps([{"run": folder.name, "status": status.status, "job_id": status.job_id,
                           "scheduler": status.scheduler, "message": status.message} for folder, status in found.runs],
                         indent=1))
    else:
        for folder, status in found.runs:
            job = f"job {status.job_id}" if status.job_id else "-"
            print(f"{inert(folder.name):<40} {inert(status.status):<10} {inert(job):<14} {inert(status.message)}")
        counts = Counter(status.status for _, status in found.runs)
        print(", ".join(f"{n} {state}" for state, n in sorted(counts.items())))
    found.said.show(line_to_stderr=args.json)  # with --json, stdout holds the JSON alone
    return found.status


def declare(sub: Any) -> None:
    """hvdbench status: each run's state."""
    status = sub.add_parser("status", help="each run's state from a results directory and the scheduler",
                            description="One line per run in natural order: state (ok, failed, timeout, cancelled, "
                                        "preempted, pending, running, lost, not run), job id and reason (the "
                                        "scheduler's own where a job ended without a record). Exit status: 0 every "
                                        "run ok, 1 any ended otherwise, 5 runs still under way and none ended "
                                        "badly.")
    status.set_defaults(func=cmd_status)
    status.add_argument("--json", action="store_true", help="the runs as a JSON list (run, status, job_id, "
                        "scheduler, message)")
    status.add_argument("dir", type=Path, help="results root (or one run directory)")
    store_flag(status)
