"""What a job of a scheduler that runs a script runs (``python -m hvdbench.launchers.job_task RUN_DIR PYTHON
RETRIES``; PBS's, and any that submits a script): the run whose run.json its folder holds, through the task body a
SLURM job's first task runs (launchers/slurm_task.py): every rank started over the job's hosts (core/job_env.py),
how the run ended recorded, a failed attempt put back in the queue (its requeue command) while retries are left."""

from __future__ import annotations

import sys
from pathlib import Path

from hvdbench.core.errors import HvdbenchError
from hvdbench.core.spec import RUN_FILE, RunSpec, RunStatus

from .slurm_task import run_task


def main(argv: list[str] | None = None) -> int:
    """Run the folder's run as this job's one task; its exit status the run's."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or not args[2].isdigit():
        print("usage: python -m hvdbench.launchers.job_task RUN_DIR PYTHON RETRIES", file=sys.stderr)
        return 2
    run_dir = Path(args[0])
    try:
        spec = RunSpec.read(run_dir / RUN_FILE)
    except HvdbenchError as exc:
        RunStatus("failed", None, 0.0, f"the job found no run to start: {exc}").write(run_dir)
        print(f"hvdbench: error: {exc}", file=sys.stderr)
        return 2
    return run_task(spec.to_dict(), str(run_dir), args[1], (), int(args[2]))


if __name__ == "__main__":
    sys.exit(main())
