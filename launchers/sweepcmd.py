"""The sweep subcommands: ``sweep`` (run a sweep file here or inside an allocation), ``submit`` (one
SLURM job per run) and ``status`` (each run's state from the results directory and the scheduler)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections import Counter
from pathlib import Path

from hvdbench.suite.errors import UsageError
from hvdbench.suite.spec import RunSpec

from .base import LaunchContext, get_launcher, rank_command
from .local import LocalExecutor
from .plan import Plan, plan
from .sweep import Sweep, load_sweep
from .topology import local_topology, read_topology_file

DEFAULT_SWEEP = Path(__file__).with_name("sweeps") / "demo.yaml"


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register sweep, submit and status."""
    sweep = sub.add_parser("sweep", help="run every run of a sweep file on this machine (or in an allocation)",
                           description="Expand a sweep file (YAML or TOML) into runs and run them one at a time, "
                                       "each with a timeout; finished runs are kept and skipped next time; then report.")
    sweep.add_argument("file", type=Path, nargs="?", default=DEFAULT_SWEEP,
                       help="sweep file (.yaml, .yml or .toml); default: the embedded demo sweep")
    sweep.add_argument("--dry-run", action="store_true", help="print every run with its exact command; run nothing")
    sweep.add_argument("-o", "--output", type=Path, default=None, help="results root (default: the file's output, "
                                                                          "else results/<name>)")
    sweep.add_argument("--timeout", type=float, default=None, help="seconds before a run is killed (default: the file's)")
    sweep.add_argument("--no-resume", dest="resume", action="store_false", help="run again what is complete")
    sweep.add_argument("--no-report", dest="report", action="store_false", help="skip the report at the end")
    sweep.add_argument("--in-allocation", action="store_true",
                       help="inside a SLURM job (the sbatch template): hosts from the allocation, run what fits it")
    submit = sub.add_parser("submit", help="submit a sweep file's runs as SLURM jobs (submitit)",
                            description="One SLURM job per run (a job array with slurm.array_parallelism); prints "
                                        "the job ids. Results land in the same layout as local runs.")
    submit.add_argument("file", type=Path, help="sweep file")
    submit.add_argument("-o", "--output", type=Path, default=None, help="results root")
    again = submit.add_mutually_exclusive_group()
    again.add_argument("--resume", action="store_true", help="submit only runs neither complete nor queued")
    again.add_argument("--rerun", action="store_true", help="submit every run again")
    submit.add_argument("--dry-run", action="store_true", help="print each job's resources and command; submit nothing")
    status = sub.add_parser("status", help="each run's state from a results directory and the scheduler",
                            description="One line per run: state (ok, failed, timeout, cancelled, preempted, "
                                        "pending, running, lost, not run), job id and reason.")
    status.add_argument("dir", type=Path, help="results root (or one run directory)")


def _load(args: argparse.Namespace) -> tuple[Sweep, Plan, Path]:
    sweep = load_sweep(args.file)
    topo = None
    if sweep.topology is not None:
        topo = read_topology_file(sweep.topology)
    elif sweep.placements:
        topo = local_topology()
    planned = plan(sweep, topo)
    return sweep, planned, args.output or sweep.output or Path("results") / sweep.name


def _executor(sweep: Sweep, root: Path, args: argparse.Namespace, hosts: tuple[str, ...] | None = None) -> LocalExecutor:
    """The executor of a local sweep; its context is also what --dry-run prints."""
    return LocalExecutor(root, timeout=args.timeout or sweep.timeout, resume=args.resume, hosts=hosts or sweep.hosts,
                         ssh_port=sweep.ssh_port, ssh_identity_file=sweep.ssh_identity_file, pmi=sweep.slurm.mpi)


def _print_plan(executor: LocalExecutor, planned: Plan, root: Path) -> None:
    for spec in planned.specs:
        ctx = executor.context((root / spec.id).resolve())
        launcher = get_launcher(spec.launcher)
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(launcher.environment(spec).items()))
        mark = " (baseline)" if spec.id in planned.baselines else ""
        print(f"{spec.id}{mark}: {env + ' ' if env else ''}{shlex.join(launcher.command(spec, ctx))}")
    for note in planned.skipped:
        print(f"skipped: {note}")
    print(f"{len(planned.specs)} run(s), {len(planned.baselines)} of them 1-GPU baselines added for speedup; "
          f"results in {root}")


def _fits_allocation(spec: RunSpec) -> bool:
    nodes = int(os.environ.get("SLURM_JOB_NUM_NODES") or os.environ.get("SLURM_NNODES") or 1)
    tasks = os.environ.get("SLURM_NTASKS")
    return spec.nodes <= nodes and (tasks is None or not tasks.isdigit() or spec.np <= int(tasks))


def cmd_sweep(args: argparse.Namespace) -> int:
    """Plan the sweep and run it here (or print it)."""
    from .cli import cmd_report

    sweep, planned, root = _load(args)
    if args.dry_run:
        _print_plan(_executor(sweep, root, args), planned, root)
        return 0
    specs, hosts = list(planned.specs), sweep.hosts
    if args.in_allocation:
        from .slurm import allocation_hosts

        hosts = allocation_hosts()
        fit = [s for s in specs if _fits_allocation(s)]
        if len(fit) < len(specs):
            print(f"hvdbench: {len(specs) - len(fit)} run(s) need a larger allocation and are left for one",
                  file=sys.stderr)
        specs = fit
    statuses = _executor(sweep, root, args, hosts).run_all(specs)
    counts = Counter(s.status for s in statuses)
    print("sweep: " + ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) + f"; results in {root}")
    if args.report and counts["ok"]:
        cmd_report(argparse.Namespace(dirs=[root], output=None, warmup=None, price=[]))
    return 0 if counts["ok"] == len(statuses) else 1


def cmd_submit(args: argparse.Namespace) -> int:
    """Submit the sweep's runs through submitit; print the job ids."""
    from .slurm import SlurmExecutor, job_parameters, run_dirs

    sweep, planned, root = _load(args)
    if args.dry_run:
        for spec in planned.specs:
            params = job_parameters(sweep.slurm, spec, sweep.name)
            resources = " ".join(f"{k}={v}" for k, v in params.items() if v not in ([], {}, None))
            ctx = LaunchContext(python=sys.executable, run_dir=(root / spec.id).resolve(), pmi=sweep.slurm.mpi)
            each = "each task" if spec.launcher == "srun" else f"the first task ({spec.launcher} over the allocation)"
            print(f"{spec.id}: {resources}\n    {each} runs: {shlex.join(rank_command(spec, ctx))}")
        return 0
    if root.exists() and run_dirs(root) and not (args.resume or args.rerun):
        raise UsageError(f"{root} already holds runs: --resume submits only what is missing, --rerun submits all again")
    executor = SlurmExecutor(root, sweep.slurm, name=sweep.name, resume=not args.rerun)
    submitted = executor.submit(planned.specs)
    print(f"submitted {len(submitted)} job(s) of {len(planned.specs)} run(s); "
          f"follow with: hvdbench status {shlex.quote(str(root))}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Print each run's state; exit 0 when every run is ok."""
    from .slurm import refresh

    if not args.dir.exists():
        raise UsageError(f"{args.dir}: no such results directory")
    states = refresh(args.dir)
    if not states:
        raise UsageError(f"{args.dir}: no run directories (run.json) here")
    counts: Counter[str] = Counter()
    for folder, status in states.items():
        counts[status.status] += 1
        job = f"job {status.job_id}" if status.job_id else "-"
        print(f"{folder.name:<40} {status.status:<10} {job:<14} {status.message}")
    print(", ".join(f"{n} {state}" for state, n in sorted(counts.items())))
    return 0 if counts["ok"] == len(states) else 1
