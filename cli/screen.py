"""``hvdbench screen``: every GPU (or CPU slot) alone and pairs per link class, or whole nodes, on every host."""

from __future__ import annotations

import argparse
import shlex
from dataclasses import replace

from hvdbench.core.errors import UsageError
from hvdbench.core.hostlist import hosts_of
from hvdbench.launchers.runs import pin_to_hosts, screen_plan, screen_sweep, sweep_topology
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
        from hvdbench.cli.parser import JOB_FLAGS
        from hvdbench.launchers.schedulers import default_scheduler
        from hvdbench.launchers.schedulers import job_minutes

        scheduler = default_scheduler()().with_options(**{"time_min": job_minutes(args.timeout),
                                                          **given(args, JOB_FLAGS)}, gpus=not args.cpu_slots,
                                                       exclusive=True)
        executor = scheduler.executor(args.output, name="screen", resume=args.resume, retries=0)
        if args.dry_run:
            return print_plan(planned, executor, args.output, args)
        tag(executor, args.output, planned.specs, args)
        submitted = executor.execute(planned.specs)
        print(f"submitted {len(submitted)} job(s); follow with: hvdbench status {shlex.quote(str(args.output))}, "
              f"then hvdbench report {shlex.quote(str(args.output))}")
        return 0
    return run_here(replace(sweep, hosts=hosts or sweep.hosts), planned, args.output, args)
