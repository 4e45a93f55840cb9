"""``hvdbench sweep FILE``: a sweep file planned and run here (or in an allocation, one shape of it)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from hvdbench.core.errors import UsageError
from hvdbench.launchers.runs import DEFAULT_SWEEP, load
from hvdbench.launchers.sweep import DECISION, sweep_flags, with_decision

from .flags import container_flags, estimate_flags, store_flag, tag_flag
from .here import run_here, with_container
from .run import fit_here


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


def declare(sub: Any) -> None:
    """hvdbench sweep: a sweep file run here."""
    sweep = sub.add_parser("sweep", help="run every run of a sweep file on this machine (or in an allocation)",
                           description="Expand a sweep file (YAML or TOML) into runs and run them one at a time, "
                                       "each with a timeout; finished runs are kept and skipped next time; "
                                       "then report.")
    sweep.set_defaults(func=cmd_sweep)
    sweep.add_argument("file", type=Path, nargs="?", default=DEFAULT_SWEEP,
                       help="sweep file (.yaml, .yml or .toml); default: the embedded demo sweep")
    sweep.add_argument("--dry-run", action="store_true", help="print every run with its exact command; run nothing")
    sweep.add_argument("-o", "--output", type=Path, default=None, help="results root (default: the file's output, "
                                                                          "else results/<name>)")
    sweep_flags(sweep, ("timeout", "retries"), timeout=None, retries=None)
    store_flag(sweep)
    tag_flag(sweep)
    sweep_flags(sweep.add_argument_group("run until decided"), DECISION, **{name: None for name in DECISION})
    sweep.add_argument("--no-resume", dest="resume", action="store_false", help="run again what is complete")
    sweep.add_argument("--no-report", dest="report", action="store_false", help="skip the report at the end")
    sweep.add_argument("--in-allocation", action="store_true",
                       help="inside a SLURM job (the sbatch template): hosts from the allocation, run what fits it")
    sweep.add_argument("--shape", type=_shape, default=None, metavar="NODESxRANKS",
                       help="only the runs of this many nodes x ranks per node (a job hvdbench submit made per shape)")
    estimate_flags(sweep)
    container_flags(sweep)


def _shape(text: str) -> str:
    nodes, sep, ranks = text.partition("x")
    if not (sep and nodes.isdigit() and ranks.isdigit() and int(nodes) > 0 and int(ranks) > 0):
        raise argparse.ArgumentTypeError(f"expected NODESxRANKS (2x8), got {text!r}")
    return f"{int(nodes)}x{int(ranks)}"
