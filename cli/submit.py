"""``hvdbench submit FILE``: a sweep's runs submitted to the scheduler its file names (one job a run, or one
allocation job a shape where the runtime takes srun's flags)."""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
from pathlib import Path

from hvdbench.core.containers import from_flags, runtime
from hvdbench.core.errors import UsageError
from hvdbench.core.tags import tags_of, write_tags
from hvdbench.launchers.plan import Plan
from hvdbench.launchers.runs import check_launchers, load
from hvdbench.launchers.sweep import Sweep
from .here import given, print_plan, tag, with_container


def cmd_submit(args: argparse.Namespace) -> int:
    """Submit the sweep's runs to the scheduler its file names (SLURM through submitit, or PBS through qsub); print
    the job ids (or, with --dry-run, each job)."""
    from hvdbench.launchers.slurm_queue import run_dirs
    from hvdbench.launchers.submitters import submitter, with_job_flags

    from hvdbench.cli.parser import JOB_FLAGS

    def adjusted(sweep: Sweep) -> Sweep:
        return with_container(with_job_flags(sweep, given(args, JOB_FLAGS)), args)

    sweep, planned, root = load(args.file, args.output, adjust=adjusted, scheduled=True)
    if sweep.fit is not None:
        raise UsageError(f"{args.file}: fit: searches run one trial after another, each judged before the next: "
                         "hvdbench sweep FILE (in an allocation: the sbatch template's sweep --in-allocation)")
    if sweep.pbs is None and sweep.container is not None and runtime(sweep.container.runtime).submit_note:
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
    """A sweep whose runtime a submitted run's tasks cannot start (pyxis): one allocation job per shape, its batch step
    the in-allocation sweep (launchers/slurm_allocation.py); --dry-run prints each job's script."""
    from hvdbench.launchers import slurm_allocation as allocation
    from hvdbench.launchers.slurm_jobs import node_shape, partition_problem
    from hvdbench.launchers.slurm_queue import run_dirs

    nodes = node_shape(sweep.slurm.partition) if shutil.which("sinfo") else None
    jobs = allocation.allocation_jobs(planned.specs, sweep.slurm, name=sweep.name, sweep_file=args.file, root=root,
                                      command=[sys.executable, "-m", "hvdbench.cli"],
                                      container=sweep.container if from_flags(args) else None, shape_of_nodes=nodes)
    hours = allocation.job_hours(jobs, sweep.slurm)
    if args.dry_run:
        for job in jobs:
            print(f"# {root / allocation.SCRIPTS / (job.shape + '.sbatch')}: {len(job.runs)} run(s)\n{job.script}")
        gpus = allocation.job_gpu_hours(jobs, sweep.slurm)
        print(f"{len(jobs)} job(s), one per shape, {len(planned.specs)} run(s); node-hours: at most {hours:.1f}"
              + (f", GPU-hours: at most {gpus:.1f}" if gpus else ""))
        return 0
    if shutil.which("sbatch") is None:
        raise UsageError("SLURM submission needs sbatch on PATH: this machine has no SLURM client")
    if root.exists() and run_dirs(root) and not (args.resume or args.rerun):
        raise UsageError(f"{root} already holds runs: --resume submits only what is missing, --rerun submits all again")
    problem = partition_problem(planned.specs, sweep.slurm)
    if problem:
        raise UsageError(problem)
    write_tags(root, [spec.id for spec in planned.specs], tags_of(args.tag))
    for shape, job_id in allocation.submit(jobs, root, planned.specs):
        print(f"shape {shape}: job {job_id}")
    print(f"submitted {len(jobs)} job(s), one per shape, for {len(planned.specs)} run(s); "
          f"follow with: hvdbench status {shlex.quote(str(root))}")
    return 0
