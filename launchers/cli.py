"""The ``hvdbench`` command: run benchmarks on this machine and report on their logs."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

from hvdbench.suite.catalog import BENCHMARKS, get_benchmark
from hvdbench.suite.errors import HvdbenchError, UsageError
from hvdbench.suite.flags import Parser, int_list, non_negative_int, positive_int
from hvdbench.suite.spec import CONTROLLERS, RunSpec

from . import sweepcmd
from .base import LaunchContext, get_launcher, launcher_names
from .local import LocalExecutor, Stopped


def rank_counts(text: str) -> list[int]:
    """``1,2,4`` as a sorted list of distinct positive integers."""
    return sorted(set(int_list("rank counts")(text)))


device_ids = int_list("GPU ids", minimum=0)


def placements_for(args: argparse.Namespace) -> dict[int, tuple[tuple[int, ...] | None, str | None]]:
    """Devices and placement name per rank count, checked against the node's topology."""
    if args.devices is None:
        return {n: (None, None) for n in args.np}
    from .placement import explicit
    from .topology import local_topology, read_topology_file

    topo = read_topology_file(args.topology) if args.topology else local_topology()
    too_many = [n for n in args.np if n > len(args.devices)]
    if too_many:
        raise UsageError(f"--np {','.join(map(str, too_many))} needs more GPUs than --devices "
                         f"{','.join(map(str, args.devices))} gives")
    out = {}
    for n in args.np:
        placement = explicit(topo, args.devices[:n])
        out[n] = (placement.devices, placement.name)
    return out


def build_parser() -> Parser:
    """The command line of every subcommand."""
    parser = Parser(prog="hvdbench", description="Horovod/MPI distributed training benchmarks and scaling reports.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

    run = sub.add_parser(
        "run", allow_abbrev=False,
        help="run one benchmark at several rank counts on this machine",
        description="Run one benchmark at each rank count, each in its own run directory, then report. "
                    "Arguments after the benchmark's name that hvdbench does not know go to the benchmark "
                    "(e.g. --model resnet20 --batch-size 32 --steps 20).",
        epilog="benchmarks: " + ", ".join(f"{b.name} ({b.framework}: {', '.join(b.models)})"
                                          for b in BENCHMARKS.values()))
    run.add_argument("benchmark", help="benchmark name: " + ", ".join(sorted(BENCHMARKS)))
    run.add_argument("--np", type=rank_counts, default=[1, 2], help="rank counts, e.g. 1,2 (default 1,2)")
    run.add_argument("--launcher", default="horovodrun", help=f"one of {', '.join(launcher_names())}")
    run.add_argument("--controller", choices=CONTROLLERS, default="gloo", help="Horovod controller")
    run.add_argument("--repeats", type=positive_int, default=1, help="runs of each configuration")
    run.add_argument("--system", default="local", help="label of this system in the report")
    run.add_argument("-o", "--output", type=Path, default=Path("results/local"), help="results root")
    run.add_argument("--timeout", type=float, default=1800.0, help="seconds before a run is killed")
    run.add_argument("--no-resume", dest="resume", action="store_false",
                     help="run again even where a complete run exists")
    run.add_argument("--devices", type=device_ids, default=None,
                     help="GPU ids for the runs, e.g. 0,3: a run of N ranks uses the first N of them "
                          "(one CUDA_VISIBLE_DEVICES list for all its ranks)")
    run.add_argument("--topology", type=Path, default=None,
                     help="saved 'nvidia-smi topo -m' output to check --devices against (default: this machine)")
    run.add_argument("--dry-run", action="store_true", help="print each run's command and exit")
    run.add_argument("--no-report", dest="report", action="store_false", help="skip the report at the end")

    for name, text in (("report", "Read every run under the directories; write report.md, report.html (plots "
                                  "inline), plot-N.svg and every table as CSV and Parquet; print the headline table."),
                       ("compare", "The report of two or more systems' results roots (each run carries its "
                                   "--system label), with the systems side by side: per GPU, per watt, per dollar.")):
        report = sub.add_parser(name, help=text.split(";")[0].split(",")[0].lower(), description=text)
        report.add_argument("dirs", nargs="+" if name == "report" else "*", type=Path,
                            help="results roots or run directories")
        report.add_argument("-o", "--output", type=Path, default=None, help="report directory (default DIR/report)")
        report.add_argument("--warmup", type=non_negative_int, default=None, metavar="N",
                            help="leave out exactly the first N steps of every run (default: detected)")
        report.add_argument("--price", action="append", default=[], metavar="SYSTEM=USD",
                            help="price of one GPU-hour on a system, for throughput per dollar (repeatable)")
    sweepcmd.add_parsers(sub)
    topo = sub.add_parser("topo", help="show this node's GPU topology and named placements",
                          description="Read the GPU/NIC link matrix (NVML, else nvidia-smi, or --file) and list "
                                      "named placements for 2, 4, ... GPUs.")
    topo.add_argument("--file", type=Path, default=None,
                      help="a saved 'nvidia-smi topo -m' output (or 'hvdbench topo --json') instead of this machine")
    topo.add_argument("--gpus", type=rank_counts, default=None, help="GPU counts to plan (default 2,4,...,all)")
    topo.add_argument("--exhaustive", action="store_true", help="every subset up to symmetry, labelled by ids")
    topo.add_argument("--json", action="store_true", help="print JSON for other tools")
    return parser


def cmd_topo(args: argparse.Namespace) -> int:
    """Print the topology and its placements."""
    from .placement import by_link_class, default_counts, exhaustive
    from .topology import link_rank, local_topology, read_topology_file

    topo = read_topology_file(args.file) if args.file else local_topology()
    counts = args.gpus or default_counts(topo)
    plan = exhaustive if args.exhaustive else by_link_class
    placements = {k: plan(topo, k) for k in counts}
    if args.json:
        print(json.dumps({"topology": topo.to_json(),
                          "placements": {str(k): [{**asdict(p), "visible_devices": p.visible_devices} for p in ps]
                                         for k, ps in placements.items()}}, indent=2))
        return 0
    print(f"topology from {topo.source}: {len(topo.gpus)} GPU(s), {len(topo.nics)} NIC(s)\n")
    print(topo.matrix_text())
    print("\nlinks between GPUs, fastest first: " + ", ".join(sorted(topo.gpu_classes(), key=link_rank)))
    for k, found in placements.items():
        print(f"\nplacements of {k} GPU(s):")
        for placement in found:
            print("  " + placement.describe())
    return 0


def cmd_run(args: argparse.Namespace, bench_args: list[str]) -> int:
    """Plan the specs, then run them one at a time (or print them with --dry-run)."""
    info = get_benchmark(args.benchmark)
    info.check(bench_args)  # a bad benchmark flag or combination fails here, before anything runs
    launcher = get_launcher(args.launcher)
    controller = "mpi" if args.launcher in ("mpirun", "srun") else args.controller
    placements = placements_for(args)
    specs = [RunSpec(benchmark=info.name, framework=info.framework, args=tuple(bench_args), np=n,
                     launcher=args.launcher, controller=controller, repeat=r, system=args.system,
                     devices=placements[n][0], placement=placements[n][1])
             for n in args.np for r in range(args.repeats)]
    if args.dry_run:
        for spec in specs:
            ctx = LaunchContext(python=sys.executable, run_dir=args.output / spec.id)
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(launcher.environment(spec).items()))
            print(f"{spec.id}: {env + ' ' if env else ''}{shlex.join(launcher.command(spec, ctx))}")
        return 0
    executor = LocalExecutor(args.output, timeout=args.timeout, resume=args.resume)
    statuses = executor.run_all(specs)
    failed = [s for s in statuses if s.status != "ok"]
    if args.report and len(failed) < len(statuses):
        cmd_report(argparse.Namespace(dirs=[args.output], output=None, warmup=None, price=[]))
    if failed:
        print(f"hvdbench: {len(failed)} of {len(statuses)} run(s) did not complete; "
              f"finished runs are kept in {args.output}", file=sys.stderr)
        return 1
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Build the report and print its table."""
    from hvdbench.analysis.compare import parse_prices
    from hvdbench.analysis.report import build_report

    if getattr(args, "command", "report") == "compare" and len(args.dirs) < 2:
        raise UsageError("hvdbench compare: give two or more results roots (one per system)")
    out = args.output or (args.dirs[0] / "report")
    text, paths = build_report(list(args.dirs), out, warmup=args.warmup, prices=parse_prices(args.price))
    print(text)
    print(f"report: {paths['html']} and {paths['markdown']} (tables as CSV and Parquet in {out})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; every expected failure is one line on stderr and a non-zero status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args, rest = build_parser().parse_known_args(argv)
        if args.command == "run":
            return cmd_run(args, rest)
        if rest:
            raise UsageError(f"hvdbench {args.command}: unrecognized arguments: {' '.join(rest)}")
        return {"report": cmd_report, "compare": cmd_report, "topo": cmd_topo, "sweep": sweepcmd.cmd_sweep,
                "submit": sweepcmd.cmd_submit, "status": sweepcmd.cmd_status}[args.command](args)
    except HvdbenchError as exc:
        print(f"hvdbench: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into head and the like
        sys.stdout = open(os.devnull, "w")
        return 0
    except KeyboardInterrupt:
        print("hvdbench: interrupted; finished runs are kept", file=sys.stderr)
        return 130
    except Stopped as stop:
        print(f"hvdbench: stopped: {stop.message}; a run in flight is recorded as {stop.status}, "
              "finished runs are kept", file=sys.stderr)
        return 128 + stop.signum


if __name__ == "__main__":
    sys.exit(main())
