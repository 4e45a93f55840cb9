"""What each ``hvdbench`` subcommand does: read its arguments, call the library, print."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from collections import Counter
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Sequence

from hvdbench.analysis.history.recording import record_after
from hvdbench.core.containers import RUNTIMES, from_flags, runtime
from hvdbench.core.errors import ReportError, UsageError
from hvdbench.core.options import options_of
from hvdbench.core.spec import RunSpec, RunStatus
from hvdbench.core.tags import tags_of, write_tags
from hvdbench.core.validate import inert, text_problem
from hvdbench.core.hostlist import hosts_of
from hvdbench.launchers.executor import Executor as BaseExecutor
from hvdbench.launchers.plan import Plan, plan
from hvdbench.launchers.runs import (Executor, Prepared, benchmark_sweep, check_launchers, describe_plan,
                                     fits_allocation, here_gpus, load, prepare_here,
                    local_executor, pin_to_hosts, screen_plan, screen_sweep, sweep_topology)
from hvdbench.launchers.sweep import NOT_DECIDED, Sweep, with_decision
from .judging import report


def cmd_project(args: argparse.Namespace) -> int:
    """Project each workload to the node counts; print the inputs and the table, write the section."""
    from hvdbench.analysis.projection.project import write_projection
    from hvdbench.analysis.projection.target import load_target

    target = load_target(args.target) if args.target else None
    out = args.output or (Path(args.dirs[0]) / "report")
    algorithms = ("ring", "hierarchical") if args.algorithm == "both" else (args.algorithm,)
    text, paths = write_projection(args.dirs, out, args.nodes, args.gpus_per_node, args.link, algorithms, args.warmup,
                                   target, args.keep_measured_compute)
    print(text)
    print(f"projection: {paths['markdown']}, {paths['csv']} and {paths['plot']}")
    return 0


def print_plan(planned: Plan, executor: Executor, root: Path, args: argparse.Namespace) -> int:
    """The one dry-run printer of run, screen, sweep and submit: every run, then the node-hours the plan
    holds at most and the estimate from step times (``--estimate-from``, the root's own runs, ``--step-time``)."""
    from hvdbench.analysis.projection.hours import plan_hours

    for line in describe_plan(planned, executor, root):
        print(line)
    roots = [*args.estimate_from, *([root] if root.is_dir() else [])]
    try:
        estimate = plan_hours(planned.specs, roots, args.step_time)
    except ReportError as exc:
        raise UsageError(f"--estimate-from: {exc}") from None
    print(estimate.text(args.step_time))
    return 0


def _finish(statuses: list[RunStatus], root: Path, with_report: bool, store: str | None = None) -> int:
    """The sweep's counts, its runs recorded in the history store, the report of what completed, and the exit
    status (0 when all are ok)."""
    counts = Counter(s.status for s in statuses)
    print("sweep: " + ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) + f"; results in {root}")
    if statuses:
        record_after([root], store)
    if with_report and counts["ok"]:
        report([root])
    if counts["ok"] < len(statuses):
        print(f"hvdbench: {len(statuses) - counts['ok']} of {len(statuses)} run(s) did not complete; "
              f"finished runs are kept in {root}", file=sys.stderr)
        return 1
    return 0


def with_container(sweep: Sweep, args: argparse.Namespace) -> Sweep:
    """The sweep with the command line's ``--container-*`` flags in place of its container: block."""
    container = from_flags(args)
    if container is None:
        return sweep
    problem = RUNTIMES[container.runtime].launcher_problem([name for name, _ in sweep.launchers])
    if problem:
        raise UsageError(f"--container-runtime {container.runtime}: {problem}")
    return replace(sweep, container=container)


def _tag(executor: BaseExecutor, root: Path, specs: Sequence[RunSpec], args: argparse.Namespace) -> None:
    """The command's ``--tag``s on the runs it will make (not those resume leaves as they are), in the root."""
    tags = tags_of(getattr(args, "tag", []))
    if tags:
        write_tags(root, [spec.id for spec in executor.todo(specs)], tags)


def _run_here(sweep: Sweep, planned: Plan, root: Path, args: argparse.Namespace, in_allocation: bool = False) -> int:
    specs, hosts = list(planned.specs), sweep.hosts
    if args.dry_run:
        print_plan(planned, local_executor(sweep, root, resume=args.resume, timeout=args.timeout), root, args)
        if sweep.until_decided:
            print(f"until decided: the runs above are the first look's; then a round at a time, each configuration "
                  f"until decided or {sweep.budget} runs")
        return 0
    for note in planned.skipped:
        print(f"hvdbench: left out: {note}", file=sys.stderr)
    if in_allocation:
        from hvdbench.launchers.slurm_queue import allocation_hosts

        hosts = allocation_hosts()
        fit = [s for s in specs if fits_allocation(s)]
        if len(fit) < len(specs):
            print(f"hvdbench: {len(specs) - len(fit)} run(s) need a larger allocation and are left for one",
                  file=sys.stderr)
        specs = fit
    prepared = _prepared(sweep, specs, root)
    executor = local_executor(sweep, root, resume=args.resume, timeout=args.timeout, hosts=hosts,
                              retries=getattr(args, "retries", None), environment=prepared.environment)
    _tag(executor, root, specs, args)
    if sweep.until_decided:  # rounds of repeats until each configuration is decided (cli/until_decided.py)
        from hvdbench.cli.until_decided import run_until_decided

        statuses, undecided = run_until_decided(sweep, specs, root, executor, lambda other: local_executor(
            sweep, other, resume=True, timeout=args.timeout, hosts=hosts, environment=prepared.environment))
        return _finish(statuses, root, args.report, getattr(args, "store", None)) or (NOT_DECIDED if undecided else 0)
    return _finish(executor.execute(specs), root, args.report, getattr(args, "store", None))


def _prepared(sweep: Sweep, specs: Sequence[RunSpec], root: Path) -> Prepared:
    """The checks before running here (launchers/runs.py prepare_here), their warnings said."""
    prepared = prepare_here(sweep, specs, root)
    for line in prepared.warnings:
        print(f"hvdbench: warning: {inert(line)}", file=sys.stderr)
    return prepared


def cmd_run(args: argparse.Namespace, bench_args: list[str]) -> int:
    """One benchmark at several rank counts: an in-memory sweep through the same plan and executor."""
    from hvdbench.cli.parser import FIT_PREFIX
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
    return _run_here(sweep, plan(sweep, sweep_topology(sweep), here_gpus()), args.output, args)


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
    from hvdbench.cli.parser import FIT_PREFIX
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
    """Each planned configuration's search for the largest model, here, one trial after another (``hvdbench run
    --fit``, a sweep file's ``fit:``); a dry run prints each search's first trial."""
    from hvdbench.launchers import fit

    searches = fit.seeds(planned.specs, planned.baselines, root, options, here_gpus(), need_cap=not args.dry_run)
    if args.dry_run:
        for seed in searches:
            first = replace(seed.spec, args=fit.trial_args(seed.spec.args, seed.flag, seed.start))
            print(f"fit: {first.id}: trials from {seed.flag} {seed.start}, doubling while a trial fits (up to "
                  f"{options.limit}), then halving the gap to the smallest that did not; the first trial: "
                  + local_executor(sweep, root, resume=True).describe(first))
        return 0
    prepared = _prepared(sweep, planned.specs, root)
    # on CPUs, peak resident sets count live tensors, not what glibc kept
    allocator = fit.CPU_ALLOCATOR if any(seed.on_cpu for seed in searches) else {}
    executor = local_executor(sweep, root, resume=args.resume, timeout=getattr(args, "timeout", None),
                              environment={**prepared.environment, **allocator})
    for seed in searches:
        fit.run_seed(seed, options, lambda spec: executor.execute([spec])[0], root)
    for line in fit.summary_lines(root):
        print(f"fit: {line}")
    return 0


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
        from hvdbench.launchers.slurm import SlurmExecutor
        from hvdbench.launchers.slurm_options import SlurmOptions, job_minutes

        options = SlurmOptions(**{"time_min": job_minutes(args.timeout), **_given(args, JOB_FLAGS)},
                               gpus=not args.cpu_slots, exclusive=True)
        executor = SlurmExecutor(args.output, options, name="screen", resume=args.resume)
        if args.dry_run:
            return print_plan(planned, executor, args.output, args)
        _tag(executor, args.output, planned.specs, args)
        submitted = executor.execute(planned.specs)
        print(f"submitted {len(submitted)} job(s); follow with: hvdbench status {shlex.quote(str(args.output))}, "
              f"then hvdbench report {shlex.quote(str(args.output))}")
        return 0
    return _run_here(replace(sweep, hosts=hosts or sweep.hosts), planned, args.output, args)


def _given(args: argparse.Namespace, names: Sequence[str]) -> dict[str, Any]:
    """The options among ``names`` the command line gave (a flag left out is None: the file's stands)."""
    return {name: value for name in names if (value := getattr(args, name)) is not None}


def cmd_sweep(args: argparse.Namespace) -> int:
    """Plan the sweep file and run it here (or print it)."""
    if args.in_allocation and not args.dry_run:
        from hvdbench.launchers.slurm_queue import allocation_hosts

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
    return _run_here(sweep, planned, root, args, in_allocation=args.in_allocation)


def cmd_submit(args: argparse.Namespace) -> int:
    """Submit the sweep's runs to the scheduler its file names (SLURM through submitit, or PBS through qsub); print
    the job ids (or, with --dry-run, each job)."""
    from hvdbench.launchers.slurm_queue import run_dirs
    from hvdbench.launchers.submitters import submitter, with_job_flags

    from hvdbench.cli.parser import JOB_FLAGS

    def adjusted(sweep: Sweep) -> Sweep:
        return with_container(with_job_flags(sweep, _given(args, JOB_FLAGS)), args)

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
    _tag(executor, root, planned.specs, args)
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


def cmd_status(args: argparse.Namespace) -> int:
    """Print each run's state; exit 0 when every run is ok."""
    from hvdbench.launchers.queues import refresh
    from hvdbench.launchers.slurm_queue import ACTIVE

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


def cmd_topo(args: argparse.Namespace) -> int:
    """Print the topology and its placements."""
    from hvdbench.core.node_topology import NodeTopology, node_topology
    from hvdbench.launchers.placement import by_link_class, default_counts, exhaustive
    from hvdbench.core.topology import link_rank, read_topology_file

    node = NodeTopology(read_topology_file(args.file)) if args.file else node_topology()
    topo = node.topology
    counts = args.gpus or default_counts(topo)
    planner = exhaustive if args.exhaustive else by_link_class
    placements = {k: planner(topo, k) for k in counts}
    if args.json:
        print(json.dumps({"topology": topo.to_json(), "disagreements": list(node.disagreements),
                          "notes": list(node.notes),
                          "placements": {str(k): [{**asdict(p), "visible_devices": p.visible_devices} for p in ps]
                                         for k, ps in placements.items()}}, indent=2))
        return 0
    print(f"topology from {topo.source}: {len(topo.gpus)} GPU(s), {len(topo.nics)} NIC(s)\n")
    print(topo.matrix_text())
    for line in node.disagreements:
        print(f"NVML and nvidia-smi disagree: {line}")
    for line in node.notes:
        print(f"note: {line}")
    print("\nlinks between GPUs, fastest first: " + ", ".join(sorted(topo.gpu_classes(), key=link_rank)))
    nearest = topo.nearest_nics()
    if nearest:
        print("nearest NIC of each GPU: " + ", ".join(f"GPU{g} {nic} ({link})" for g, nic, link in nearest))
    warning = topo.nic_warning()
    if warning:
        print(f"warning: {warning}")
    for k, found in placements.items():
        print(f"\nplacements of {k} GPU(s):")
        for placement in found:
            print("  " + placement.describe())
    return 0


def _fabric_pairs(args: argparse.Namespace) -> int:
    """nccl-tests between every pair of nodes and across all (launchers/fabric_pairs.py): 1 where a set is flagged
    or a step gave no output."""
    from hvdbench.core.job_env import job_env
    from hvdbench.launchers.fabric_pairs import check_pairs, steps
    from hvdbench.launchers.slurm_queue import allocation_hosts

    for name, value in (("--nccl-tests-flags", args.nccl_tests_flags), ("--system", args.system),
                        ("--mpi", args.mpi)):
        if (problem := text_problem(value)) is not None:
            raise UsageError(f"{name}: {problem}")
    if args.timeout <= 0 or args.timeout != args.timeout:
        raise UsageError(f"--timeout {args.timeout:g}: seconds a step may take, above 0")
    hosts = hosts_of(args.hosts) or allocation_hosts()
    per_node = args.gpus_per_node or job_env().number("gpus_on_node") or 1
    plan = steps(hosts, per_node, args.nccl_tests, shlex.split(args.nccl_tests_flags), args.mpi, serial=args.serial,
                 container=from_flags(args), root=args.output.resolve())
    rounds = max(step.round for step in plan) + 1
    said = (f"{len(plan)} step(s) in {rounds} round(s), the steps of a round side by side on nodes of their own; "
            f"at most {rounds * args.timeout / 60:,.0f} min (--timeout {args.timeout:g} s a round)")
    if args.dry_run:
        for step in plan:
            print(f"round {step.round + 1}, {step.label}: {shlex.join(step.argv)}")
        print(said)
        return 0
    print(said, flush=True)
    judged, failed = check_pairs(plan, args.output, args.system, args.timeout, expected=args.expect_busbw)
    for where, busbw, said in judged:
        print(f"{inert(where)}: busbw {busbw:,.2f} GB/s at the largest size; {inert(said)}")
    for line in failed:
        print(f"no result: {inert(line)}")
    print(f"outputs in {shlex.quote(str(args.output / 'nccl-tests'))}; report with: hvdbench report "
          f"{shlex.quote(str(args.output))}")
    return 1 if failed or any(said.startswith("flagged") for _, _, said in judged) else 0


def cmd_fabric(args: argparse.Namespace) -> int:
    """The node's (or the saved outputs') HCA ports, what is wrong with them, GPUDirect RDMA's module; with
    --nccl-tests, nccl-tests between the nodes."""
    if args.nccl_tests:
        return _fabric_pairs(args)
    from hvdbench.core.hca import gdr_ready, node_fabric, parse_hca_ports, port_findings
    from hvdbench.core.validate import read_small_text

    sources: list[tuple[str, list[dict[str, Any]]]] = []
    for path in args.files:
        try:
            ports = parse_hca_ports(read_small_text(path, 1 << 20, "a saved ibstat output"))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if not ports:
            raise UsageError(f"{path}: no HCA port in it (not ibstat, ibstatus or ibv_devinfo output?)")
        sources.append((str(path), ports))
    if not args.files:
        facts = node_fabric()
        if not facts["hca_ports"] and not args.json:
            print("no HCA port here: neither ibstat nor ibv_devinfo answered (not installed, or no RDMA device)")
        elif facts["hca_ports"]:
            sources.append((f"this node ({facts['source']})", facts["hca_ports"]))
        if not args.json:
            print(gdr_ready())
    if args.json:
        return _fabric_json(sources, None if args.files else gdr_ready(), args.files)
    flagged = 0
    for where, ports in sources:
        print(f"{inert(where)}:")
        for p in ports:
            rate = f"{p['rate_gbps']:g} Gb/s" if isinstance(p.get("rate_gbps"), (int, float)) else "rate not shown"
            print(f"  {inert(p['device'])} port {p['port']}: {p['state']}, {inert(p.get('physical_state') or '-')}, "
                  f"{rate}, {inert(p.get('link_layer') or 'link layer not shown')}")
        for line in port_findings(ports) + _hca_lines(where, ports, args.files):
            flagged += 1
            print(f"  flagged: {inert(line)}")
    return 1 if flagged else 0 if sources else 4


def _hca_lines(where: str, ports: list[dict[str, Any]], files: Sequence[Path]) -> list[str]:
    """This node's ports against the NCCL_IB_HCA set here (what a sweep run from here would pass its ranks)."""
    from hvdbench.core.hca import named_down

    hca = os.environ.get("NCCL_IB_HCA")
    return named_down(hca, ports) if hca and not files else []


def _fabric_json(sources: list[tuple[str, list[dict[str, Any]]]], gdr: str | None, files: Sequence[Path]) -> int:
    """fabric --json: each source's ports and findings, GPUDirect RDMA's line (this node only); the same exit
    status as the text."""
    from hvdbench.core.hca import port_findings

    said = [{"source": where, "ports": ports, "flagged": port_findings(ports) + _hca_lines(where, ports, files)}
            for where, ports in sources]
    print(json.dumps({"sources": said, "gpudirect_rdma": gdr}, indent=1, default=str))
    return 1 if any(s["flagged"] for s in said) else 0 if said else 4


def cmd_nccl_log(args: argparse.Namespace) -> int:
    """Print what each NCCL log says NCCL used, run by run where a log holds several; 2 where a file cannot be
    read (the others still printed)."""
    from hvdbench.core.nccl_log import fabric_lines, read_nccl_runs
    from hvdbench.core.validate import inert

    found: dict[str, object] = {}
    status = 0
    for path in args.files:
        try:
            runs = read_nccl_runs(path)
        except ValueError as exc:
            print(f"hvdbench: error: {inert(exc)}", file=sys.stderr)
            status = 2
            continue
        if args.json:
            found[str(path)] = runs[0].as_dict() if len(runs) == 1 else [run.as_dict() for run in runs]
            continue
        print(f"{inert(path)}:" + (f" {len(runs)} runs (NCCL started {len(runs)} times), each read on its own"
                                    if len(runs) > 1 else ""))
        for i, fabric in enumerate(runs, 1):
            if len(runs) > 1:
                print(f"  run {i} of {len(runs)}:")
            for line in fabric_lines(fabric):
                print(f"{'    ' if len(runs) > 1 else '  '}{inert(line)}")
    if args.json:
        print(json.dumps(found, indent=2))
    return status
