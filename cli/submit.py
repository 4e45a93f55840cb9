"""``hvdbench submit FILE``: a sweep's runs submitted to the scheduler its file names (one job a run, or one
allocation job a shape where the runtime takes srun's flags)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from hvdbench.core.containers import from_flags
from hvdbench.core.errors import UsageError
from hvdbench.core.tags import tags_of
from hvdbench.launchers.plan import Plan
from hvdbench.launchers.runs import check_launchers, load
from hvdbench.launchers.sweep import Sweep, sweep_flags

from .flags import JOB_FLAGS, container_flags, estimate_flags, job_flags, tag_flag
from .here import given, print_plan, tag, with_container


def cmd_submit(args: argparse.Namespace) -> int:
    """Submit the sweep's runs to the scheduler its file names (SLURM through submitit, or PBS through qsub); print
    the job ids (or, with --dry-run, each job)."""
    from hvdbench.launchers.schedulers import run_dirs, scheduler_of, submitter, with_job_flags


    def adjusted(sweep: Sweep) -> Sweep:
        return with_container(with_job_flags(sweep, given(args, JOB_FLAGS)), args)

    sweep, planned, root = load(args.file, args.output, adjust=adjusted, scheduled=True)
    if sweep.fit is not None:
        raise UsageError(f"{args.file}: fit: searches run one trial after another, each judged before the next: "
                         "hvdbench sweep FILE (in an allocation: the sbatch template's sweep --in-allocation)")
    if scheduler_of(sweep).whole_sweep(sweep):
        return _submit_allocations(args, sweep, planned, root)
    executor = submitter(sweep, root, resume=not args.rerun,
                         retries=sweep.retries if args.retries is None else args.retries)
    if args.dry_run:
        return print_plan(planned, executor, root, args)
    check_launchers(spec.launcher for spec in planned.specs)
    if root.exists() and run_dirs(root) and not (args.resume or args.rerun):
        raise UsageError(f"{root} already holds runs: --resume submits only what is missing, --rerun submits all again")
    tag(executor, root, planned.specs, args)
    submitted = executor.execute(planned.specs)
    print(f"submitted {len(submitted)} job(s) of {len(planned.specs)} run(s); "
          f"follow with: hvdbench status {shlex.quote(str(root))}")
    return 0


def _submit_allocations(args: argparse.Namespace, sweep: Sweep, planned: Plan, root: Path) -> int:
    """A sweep its scheduler sends as one job a shape (SLURM with pyxis: srun's flags reach only an allocation's
    own steps); --dry-run prints each job's script."""
    from hvdbench.launchers.schedulers import run_dirs, scheduler_of

    if not args.dry_run and root.exists() and run_dirs(root) and not (args.resume or args.rerun):
        raise UsageError(f"{root} already holds runs: --resume submits only what is missing, --rerun submits all again")
    scheduler_of(sweep).submit_whole(sweep, planned.specs, root, sweep_file=args.file, dry_run=args.dry_run,
                                     container=sweep.container if from_flags(args) else None, tags=tags_of(args.tag))
    return 0


def declare(sub: Any) -> None:
    """hvdbench submit: a sweep file as SLURM jobs."""
    submit = sub.add_parser("submit", help="submit a sweep file's runs as SLURM jobs (submitit) or PBS jobs (qsub)",
                            description="One SLURM job per run (a job array with slurm.array_parallelism), or with a "
                                        "pbs: block one PBS job per run (its script kept under the results' "
                                        "pbs-jobs/); with "
                                        "ranks in a pyxis image, one job per shape (nodes x ranks per node) whose "
                                        "batch step runs that shape's runs in its allocation (its script kept under "
                                        "the results' slurm-jobs/, printed by --dry-run). Prints the job ids. Results "
                                        "land in the same layout as local runs.")
    submit.set_defaults(func=cmd_submit)
    submit.add_argument("file", type=Path, help="sweep file")
    tag_flag(submit)
    submit.add_argument("-o", "--output", type=Path, default=None, help="results root")
    again = submit.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true", help="submit only runs neither complete nor queued")
    again.add_argument("--rerun", action="store_true", help="submit every run again")
    sweep_flags(submit, ("retries",), retries=None)
    submit.add_argument("--dry-run", action="store_true", help="print each job's resources and command; submit nothing")
    job_flags(submit)
    estimate_flags(submit)
    container_flags(submit)
