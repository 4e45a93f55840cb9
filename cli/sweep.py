"""``hvdbench sweep FILE``: a sweep file planned and run here (or in an allocation, one shape of it)."""

from __future__ import annotations

import argparse
from dataclasses import replace

from hvdbench.core.errors import UsageError
from hvdbench.launchers.runs import load
from hvdbench.launchers.sweep import with_decision
from .run import fit_here
from .here import run_here, with_container


def cmd_sweep(args: argparse.Namespace) -> int:
    """Plan the sweep file and run it here (or print it)."""
    if args.in_allocation and not args.dry_run:
        from hvdbench.launchers.schedulers import allocation_hosts

        sweep, planned, root = load(args.file, args.output, allocation_hosts(), here=True,
                                    adjust=lambda s: with_decision(with_container(s, args), args))
    else:
        sweep, planned, root = load(args.file, args.output, here=True,
                                    adjust=lambda s: with_decision(with_container(s, args), args))
    if args.shape:  # one shape's job of a submitted sweep (launchers/slurm_allocation.py)
        from hvdbench.launchers.slurm_allocation import shape_of

        planned = replace(planned, specs=tuple(s for s in planned.specs if shape_of(s) == args.shape))
        if not planned.specs:
            raise UsageError(f"--shape {args.shape}: no run of {args.file} has that many nodes x ranks per node")
    if sweep.fit is not None:
        return fit_here(sweep, planned, root, sweep.fit, args)
    return run_here(sweep, planned, root, args, in_allocation=args.in_allocation)
