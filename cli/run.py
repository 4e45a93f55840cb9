"""``hvdbench run``: one benchmark at several rank counts here, or (``--fit``) the largest model that trains."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Sequence

from hvdbench.core.catalog import BENCHMARKS
from hvdbench.core.errors import UsageError
from hvdbench.core.options import add_flags, options_of
from hvdbench.core.spec import CONTROLLERS
from hvdbench.launchers.base import launcher_names
from hvdbench.launchers.fit import FitOptions
from hvdbench.launchers.plan import Plan, plan
from hvdbench.launchers.runs import benchmark_sweep, here_gpus, sweep_topology
from hvdbench.launchers.sweep import DECISION, Sweep, sweep_flags, with_decision
from hvdbench.workflows import fit as fitting

from .flags import FIT_PREFIX, container_flags, device_ids, estimate_flags, rank_counts, store_flag, tag_flag
from .here import run_here, with_container


def cmd_run(args: argparse.Namespace, bench_args: list[str]) -> int:
    """One benchmark at several rank counts: an in-memory sweep through the same plan and executor."""
    from hvdbench.launchers.fit import FitOptions

    given = [str(o.flag) for name, o in options_of(FitOptions).items() if getattr(args, FIT_PREFIX + name) is not None]
    if given and not args.fit:
        raise UsageError(f"{', '.join(given)} shape the --fit search: give --fit, or leave them out")
    if args.fit:
        return cmd_fit(args, bench_args)
    _cpu_ranks_fit(args, bench_args)
    sweep = with_container(benchmark_sweep(args.benchmark, bench_args, np=args.np, launcher=args.launcher,
                                           controller=args.controller, repeats=args.repeats, system=args.system,
                                           timeout=args.timeout, devices=args.devices, topology=args.topology,
                                           transport=args.transport, retries=args.retries), args)
    sweep = with_decision(sweep, args)
    return run_here(sweep, plan(sweep, sweep_topology(sweep), here_gpus()), args.output, args)

def _cpu_ranks_fit(args: argparse.Namespace, bench_args: Sequence[str]) -> None:
    """``hvdbench run`` on a machine whose ranks train on CPUs: no more ranks than it has CPUs (more would time
    the kernel's scheduler, not training)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    told_cpu = "--device=cpu" in bench_args or any(a == "--device" and b == "cpu" for a, b in zip(bench_args,
                                                                                                   bench_args[1:]))
    most = max(args.np)
    if (told_cpu or not here_gpus()) and most > cpus and not args.dry_run:
        raise UsageError(f"--np {most}: {most} CPU ranks on a machine with {cpus} CPU(s) for this process; one rank a "
                         "CPU at most (a sweep file's hosts spread ranks over machines)")

def cmd_fit(args: argparse.Namespace, bench_args: list[str]) -> int:
    """The largest model that trains at one rank count: short real runs of growing shapes (launchers/fit.py);
    a dry run prints the first trial and how the search goes on."""
    from hvdbench.launchers.fit import FitOptions, grown_flag

    if len(args.np) != 1:
        raise UsageError("--fit searches at one rank count (--np N)")
    options = FitOptions(**{name: value for name in options_of(FitOptions)
                            if (value := getattr(args, FIT_PREFIX + name)) is not None})
    grown_flag(args.benchmark, options.grow)
    sweep = with_container(benchmark_sweep(args.benchmark, bench_args, np=args.np, launcher=args.launcher,
                                           controller=args.controller, repeats=1, system=args.system,
                                           timeout=args.timeout, devices=args.devices, topology=args.topology,
                                           transport=args.transport), args)
    return fit_here(sweep, plan(sweep, sweep_topology(sweep), here_gpus()), args.output, options, args)

def fit_here(sweep: Sweep, planned: Plan, root: Path, options: Any, args: argparse.Namespace) -> int:
    """Each planned configuration's search for the largest model, here (workflows/fit.py); a dry run prints each
    search's first trial."""
    if args.dry_run:
        return fitting.first_trials(sweep, planned, root, options).show()
    return fitting.search(sweep, planned, root, options, resume=args.resume,
                      timeout=getattr(args, "timeout", None)).show()


def declare(sub: Any) -> None:
    """hvdbench run: one benchmark at several rank counts here."""
    run = sub.add_parser(
        "run", allow_abbrev=False,
        help="run one benchmark at several rank counts on this machine",
        description="Run one benchmark at each rank count, each in its own run directory, then report. "
                    "Arguments after the benchmark's name that hvdbench does not know go to the benchmark "
                    "(e.g. --model resnet20 --batch-size 32 --steps 20). Include 1 in --np for speedups.",
        epilog="benchmarks: " + ", ".join(f"{b.name} ({b.framework}: {', '.join(b.models)})"
                                          for b in BENCHMARKS.values()))
    run.set_defaults(func=cmd_run, benchmark_args=True)
    run.add_argument("benchmark", help="benchmark name: " + ", ".join(sorted(BENCHMARKS)))
    run.add_argument("--np", type=rank_counts, default=[1, 2], help="rank counts, e.g. 1,2 (default 1,2)")
    run.add_argument("--launcher", default="horovodrun", help=f"one of {', '.join(launcher_names())}")
    run.add_argument("--controller", choices=CONTROLLERS, default=None,
                     help="Horovod controller (default: the launcher's own: gloo for horovodrun, else mpi)")
    sweep_flags(run, ("transport", "retries", "repeats", "system", "timeout", "topology"))
    sweep_flags(run.add_argument_group("run until decided"), DECISION)
    run.add_argument("-o", "--output", type=Path, default=Path("results/local"), help="results root")
    run.add_argument("--no-resume", dest="resume", action="store_false",
                     help="run again even where a complete run exists")
    run.add_argument("--devices", type=device_ids, default=None,
                     help="GPU ids for the runs, e.g. 0,3: a run of N ranks uses the first N of them "
                          "(one CUDA_VISIBLE_DEVICES list for all its ranks)")
    run.add_argument("--dry-run", action="store_true", help="print each run's command and exit")
    run.add_argument("--no-report", dest="report", action="store_false", help="skip the report at the end")
    store_flag(run)
    tag_flag(run)
    fit = run.add_argument_group("the largest model that trains (lm)")
    fit.add_argument("--fit", action="store_true",
                     help="grow the model from the shape given (short real runs, one per shape) to the largest that "
                          "trains at the one rank count of --np with the benchmark's --exchange; kept as "
                          "fit-EXCHANGE-npN-GROW.json in the output folder, all of them printed side by side")
    add_flags(fit, FitOptions, tuple(options_of(FitOptions)), prefix=FIT_PREFIX,
              defaults={name: None for name in options_of(FitOptions)})
    estimate_flags(run)
    container_flags(run)
