"""``hvdbench screen``: every GPU (or CPU slot) alone and pairs per link class, or whole nodes, on every host."""

from __future__ import annotations

import argparse
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

from hvdbench.core.errors import UsageError
from hvdbench.core.flags import positive_int
from hvdbench.core.hostlist import hosts_of
from hvdbench.core.options import add_flags
from hvdbench.launchers.base import launcher_names
from hvdbench.launchers.runs import SCREEN_MODES, pin_to_hosts, screen_plan, screen_sweep, sweep_topology
from hvdbench.launchers.sweep import Sweep

from .flags import JOB_FLAGS, container_flags, estimate_flags, job_flags, store_flag, tag_flag
from .here import given, print_plan, run_here, tag, with_container


def cmd_screen(args: argparse.Namespace, bench_args: list[str]) -> int:
    """Every GPU (or CPU slot) alone and one pair per link class (``--mode gpu``), or all of a node's at once
    (``--mode node``), on every host; then the screening report."""
    from hvdbench.core.topology import TopologyError

    sweep = with_container(screen_sweep(args.benchmark, bench_args, topology=args.topology, cpu_slots=args.cpu_slots,
                                        pairs=args.pairs, launcher=args.launcher, system=args.system,
                                        timeout=args.timeout), args)
    try:
        topo = sweep_topology(sweep)
    except TopologyError as exc:
        raise UsageError(f"hvdbench screen: {exc}; --cpu-slots N screens N CPU slots of a node without GPUs") from None
    hosts = hosts_of(args.hosts)
    planned = pin_to_hosts(screen_plan(sweep, topo, args.mode), hosts)
    if args.submit:
        from hvdbench.launchers.schedulers import default_scheduler, job_minutes

        scheduler = default_scheduler()().with_options(**{"time_min": job_minutes(args.timeout),
                                                          **given(args, JOB_FLAGS)}, gpus=not args.cpu_slots,
                                                       exclusive=True)
        executor = scheduler.executor(args.output, name="screen", resume=args.resume, retries=0, per_node=True)
        if args.dry_run:
            return print_plan(planned, executor, args.output, args)
        tag(executor, args.output, planned.specs, args)
        submitted = executor.execute(planned.specs)
        jobs = len({s.job_id for s in submitted})
        print(f"submitted {len(submitted)} run(s) as {jobs} job(s)" + (", one a node" if jobs < len(submitted) else "")
              + f"; follow with: hvdbench status {shlex.quote(str(args.output))}, then hvdbench report "
              f"{shlex.quote(str(args.output))}")
        return 0
    return run_here(replace(sweep, hosts=hosts or sweep.hosts), planned, args.output, args)


def declare(sub: Any) -> None:
    """hvdbench screen: every GPU alone, then pairs, on every host."""
    screen = sub.add_parser(
        "screen", allow_abbrev=False, help="every GPU alone and one pair per link class: which GPU or node is slow",
        description="Run a short benchmark on every GPU of the node alone, then on one pair of GPUs per link "
                    "class, on each host given (or as SLURM jobs, one per run, pinned to its node); report each "
                    "GPU and node against the fleet median with the evidence (clocks, throttle reasons, "
                    "temperature, power, PCIe link, ECC). Without GPUs it refuses unless --cpu-slots N asks to "
                    "screen N CPU slots. Arguments hvdbench does not know go to the benchmark (e.g. --steps 100).")
    screen.set_defaults(func=cmd_screen, benchmark_args=True)
    store_flag(screen)
    tag_flag(screen)
    screen.add_argument("--benchmark", default=None,
                        help="benchmark (default: imagenet ResNet-50 amp batch 64 on GPUs, cifar10 ResNet-20 on CPU "
                             "slots, its arguments followed by yours)")
    screen.add_argument("--cpu-slots", type=positive_int, default=None, metavar="N",
                        help="on a node without GPUs: screen N CPU slots (an even share of the cores each)")
    screen.add_argument("--mode", choices=tuple(SCREEN_MODES), default="gpu",
                        help="; ".join(f"{k}: {v}" for k, v in SCREEN_MODES.items()) + " (default gpu)")
    screen.add_argument("--no-pairs", dest="pairs", action="store_false", help="screen GPUs alone only")
    screen.add_argument("--hosts", default=None,
                        help="nodes to screen, comma-separated or a SLURM host list (node[01-16]); default: this one")
    screen.add_argument("--launcher", default="horovodrun", help=f"one of {', '.join(launcher_names())}")
    add_flags(screen, Sweep, ("topology", "system", "timeout"), defaults={"timeout": 900.0})
    screen.add_argument("-o", "--output", type=Path, default=Path("results/screen"), help="results root")
    screen.add_argument("--submit", action="store_true",
                        help="as SLURM jobs (submitit): one job a node holding its runs one after another (with the "
                             "srun launcher, whose ranks are tasks, one a run); PBS: one a run")
    job_flags(screen)
    screen.add_argument("--no-resume", dest="resume", action="store_false", help="run again what is complete")
    screen.add_argument("--dry-run", action="store_true", help="print every run and its command; run nothing")
    screen.add_argument("--no-report", dest="report", action="store_false", help="skip the report at the end")
    estimate_flags(screen)
    container_flags(screen)
