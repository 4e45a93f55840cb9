"""The command line of every ``hvdbench`` subcommand (argparse only; the work is in ``commands``): the subcommands
that run or judge benchmarks declared here, the others by their own modules' ``declare`` beside their bodies."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hvdbench.core.catalog import BENCHMARKS
from hvdbench.core.containers import container_flags as generated_container_flags
from hvdbench.core.environment import hvdbench_version
from hvdbench.core.flags import Parser, int_list, non_negative_int, percent, positive_float, positive_int
from hvdbench.core.metrics import MARGIN_PCT, MIN_RUNS
from hvdbench.core.options import add_flags, options_of
from hvdbench.core.spec import CONTROLLERS

from hvdbench.launchers.base import launcher_names
from hvdbench.launchers.fit import FitOptions
from hvdbench.launchers.runs import DEFAULT_SWEEP, SCREEN_MODES
from hvdbench.launchers.schedulers import default_scheduler
from hvdbench.launchers.sweep import DECISION, Sweep, sweep_flags

from . import data, fabric, history, imports, nccl_log, status, topo
from .flags import label, rank_counts, store_flag, tag_flag



device_ids = int_list("GPU ids", minimum=0)


def build_parser() -> Parser:
    """The command line of every subcommand."""
    parser = Parser(prog="hvdbench", description="Horovod/MPI distributed training benchmarks and scaling reports.")
    parser.add_argument("--version", action="version", version=f"hvdbench {hvdbench_version()}",
                        help="print hvdbench's version (with its commit where it runs from a git checkout) and exit")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for add in (_run, _reports, _accept, _project, _sweep, _submit, status.declare, _screen, topo.declare,
                nccl_log.declare, data.declare, fabric.declare, imports.declare, history.declare):
        add(sub)
    return parser


def _run(sub: Any) -> None:
    """hvdbench run: one benchmark at several rank counts here."""
    run = sub.add_parser(
        "run", allow_abbrev=False,
        help="run one benchmark at several rank counts on this machine",
        description="Run one benchmark at each rank count, each in its own run directory, then report. "
                    "Arguments after the benchmark's name that hvdbench does not know go to the benchmark "
                    "(e.g. --model resnet20 --batch-size 32 --steps 20). Include 1 in --np for speedups.",
        epilog="benchmarks: " + ", ".join(f"{b.name} ({b.framework}: {', '.join(b.models)})"
                                          for b in BENCHMARKS.values()))
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


def estimate_flags(parser: Any) -> None:
    """What a dry run's node-hours estimate is made from (run, screen, sweep and submit)."""
    hours = parser.add_argument_group("the dry run's node-hours estimate")
    hours.add_argument("--estimate-from", action="append", type=Path, default=[], metavar="DIR",
                       help="results of earlier runs whose step and start-up times time the plan's runs of the same "
                            "work (repeatable; the results root itself is always read)")
    hours.add_argument("--step-time", type=step_seconds, default=None, metavar="SECONDS",
                       help="seconds per step for runs no earlier run times (at most a day)")


def container_flags(parser: Any) -> None:
    """The ``--container-*`` flags of run, screen, sweep and submit (a sweep file's container: block, replaced)."""
    generated_container_flags(parser.add_argument_group("ranks in a container image"))


FIT_PREFIX = "fit_"  # where --fit's own flags land (args.fit_grow, ...): nothing without --fit


def step_seconds(text: str) -> float:
    """Seconds a training step takes: positive and at most a day (1e300 is a typo, and 300-digit node-hours)."""
    value = positive_float(text)
    if value > 86400:
        raise argparse.ArgumentTypeError(f"{text}: more than a day (86400 s) a step")
    return value


def _reports(sub: Any) -> None:
    """hvdbench report and hvdbench compare."""
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
        report.add_argument("--weights", type=Path, default=None, metavar="FILE",
                            help="workload weights (TOML, [weights] \"BENCHMARK MODEL\" = share of the expected use): "
                                 "one weighted figure per system against the baseline, with its interval")
        report.add_argument("--costs", type=Path, default=None, metavar="FILE",
                            help="a costs file (TOML, [systems.NAME]: purchase, years, utilisation, power price, PUE, "
                                 "node power; or an hourly price): US$ per million samples with its interval")
        if name == "compare":
            report.add_argument("--regressions", action="store_true",
                                help="OLD NEW: pair configurations and mark each change beyond --margin whose "
                                     "interval excludes it (exit status 1 on any regression, 4 where a "
                                     "configuration could not be judged, 2 a usage error)")
            report.add_argument("--margin", type=percent, default=MARGIN_PCT, metavar="PCT",
                                help="the smallest change that counts: a regression, or one system faster than "
                                     "another (default 2%%)")
            report.add_argument("--baseline", type=label, default=None, metavar="SYSTEM",
                                help="the system every other is judged against (default: the first results root's "
                                     "system, said)")
        report.add_argument("--peaks", type=Path, default=None, metavar="FILE",
                            help="a peak table (TOML, as analysis/tables/peaks.toml) for GPUs or CPUs the built-in one "
                                 "lacks; its entries are tried first")
        _judging(report)
        if name == "compare":
            store_flag(report, "the verdict and the runs behind it are")


def _judging(parser: Any) -> None:
    """The options every verdict between runs takes: the runs a side needs, and borrowing the spread between runs."""
    parser.add_argument("--min-runs", type=positive_int, default=MIN_RUNS, metavar="N",
                        help=f"complete runs of a configuration a verdict needs on each side (default {MIN_RUNS}): "
                             "with fewer, "
                             "the spread between runs is unknown and the verdict is 'not judged' (exit status 4 for "
                             "accept and compare --regressions); 1 judges on within-run intervals alone")
    parser.add_argument("--borrow-spread", action="store_true",
                        help="judge a configuration of fewer than --min-runs runs with the spread between runs pooled "
                             "from the same system's configurations that have that many; every line that used it "
                             "says so")


def _accept(sub: Any) -> None:
    """hvdbench accept: a buyer's criteria judged with intervals."""
    accept = sub.add_parser(
        "accept", help="judge the results against acceptance criteria, with their 95%% intervals",
        description="Judge each [[criterion]] of a TOML file (a metric, min or max, and selectors naming the runs) "
                    "against the results: pass where the whole 95%% interval meets it, fail where it misses it, "
                    "undecided where it holds it, not measured where no run matches. Writes the report with an "
                    "Acceptance section, acceptance.csv and acceptance.txt (for an acceptance protocol). Exit "
                    "status: 0 all pass, 1 any fail, 4 not judged (only undecided or not measured left besides "
                    "passes), 2 a usage error (a bad criteria file, a criterion naming several configurations).")
    accept.add_argument("criteria", type=Path, help="criteria file (TOML)")
    accept.add_argument("dirs", nargs="+", type=Path, help="results roots or run directories")
    accept.add_argument("-o", "--output", type=Path, default=None, help="report directory (default DIR/report)")
    accept.add_argument("--warmup", type=non_negative_int, default=None, metavar="N",
                        help="leave out exactly the first N steps of every run (default: detected)")
    accept.add_argument("--peaks", type=Path, default=None, metavar="FILE", help="a peak table (as report's)")
    _judging(accept)
    store_flag(accept, "the verdict and the runs behind it are")


def _project(sub: Any) -> None:
    """hvdbench project: throughput and efficiency at N nodes."""
    project = sub.add_parser(
        "project", help="project throughput and efficiency to N nodes from a few measurements",
        description="Fit a step-time model per workload from the results (compute from the --independent twin or "
                    "--breakdown, gradient bytes, Horovod's fusion threshold and cycle time, allreduce latency and "
                    "bandwidth per link class from the collectives benchmark within a node and across nodes, the "
                    "overlap the measured runs show) and project throughput, speedup and efficiency at each node "
                    "count, for the measured interconnect and each --link; writes projection.md, .csv and .svg.")
    project.add_argument("dirs", nargs="+", type=Path, help="results roots or run directories")
    project.add_argument("--nodes", type=rank_counts, default=None,
                         help="node counts to project, e.g. 1,2,4,16,256 (default: the target's, else 1,2,...,64)")
    project.add_argument("--gpus-per-node", type=positive_int, default=None,
                         help="ranks per node (default: the target's, else the most ranks measured on one node)")
    project.add_argument("--target", default=None, metavar="FILE|NAME",
                         help="a target cluster in one TOML file (nodes, GPUs per node, the bus within a node, NICs "
                              "between nodes, efficiency_below), or a shipped one: dgx-h100, hgx-a100, pcie-8gpu")
    project.add_argument("--keep-measured-compute", action="store_true",
                         help="with --target whose GPU model is not the one measured: project the measured compute "
                              "over the target's links anyway (every row then says what its compute was measured on)")
    project.add_argument("--link", action="append", default=[], metavar="NAME=GB/s,latency",
                         help="a what-if interconnect: bandwidth per node in GB/s (all its NICs) and latency "
                              "(us by default; e.g. ib400x8=400,2us); repeatable")
    project.add_argument("--algorithm", choices=("ring", "hierarchical", "both"), default="both",
                         help="allreduce across nodes: one ring, Horovod's hierarchical allreduce, or both")
    project.add_argument("-o", "--output", type=Path, default=None, help="where to write (default DIR/report)")
    project.add_argument("--warmup", type=non_negative_int, default=None, metavar="N",
                         help="leave out exactly the first N steps of every run (default: detected)")


def _sweep(sub: Any) -> None:
    """hvdbench sweep: a sweep file run here."""
    sweep = sub.add_parser("sweep", help="run every run of a sweep file on this machine (or in an allocation)",
                           description="Expand a sweep file (YAML or TOML) into runs and run them one at a time, "
                                       "each with a timeout; finished runs are kept and skipped next time; "
                                       "then report.")
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


def _submit(sub: Any) -> None:
    """hvdbench submit: a sweep file as SLURM jobs."""
    submit = sub.add_parser("submit", help="submit a sweep file's runs as SLURM jobs (submitit) or PBS jobs (qsub)",
                            description="One SLURM job per run (a job array with slurm.array_parallelism), or with a "
                                        "pbs: block one PBS job per run (its script kept under the results' "
                                        "pbs-jobs/); with "
                                        "ranks in a pyxis image, one job per shape (nodes x ranks per node) whose "
                                        "batch step runs that shape's runs in its allocation (its script kept under "
                                        "the results' slurm-jobs/, printed by --dry-run). Prints the job ids. Results "
                                        "land in the same layout as local runs.")
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


def _screen(sub: Any) -> None:
    """hvdbench screen: every GPU alone, then pairs, on every host."""
    screen = sub.add_parser(
        "screen", allow_abbrev=False, help="every GPU alone and one pair per link class: which GPU or node is slow",
        description="Run a short benchmark on every GPU of the node alone, then on one pair of GPUs per link "
                    "class, on each host given (or as SLURM jobs, one per run, pinned to its node); report each "
                    "GPU and node against the fleet median with the evidence (clocks, throttle reasons, "
                    "temperature, power, PCIe link, ECC). Without GPUs it refuses unless --cpu-slots N asks to "
                    "screen N CPU slots. Arguments hvdbench does not know go to the benchmark (e.g. --steps 100).")
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
    screen.add_argument("--submit", action="store_true", help="as SLURM jobs (submitit), one per run, on its node")
    job_flags(screen)
    screen.add_argument("--no-resume", dest="resume", action="store_false", help="run again what is complete")
    screen.add_argument("--dry-run", action="store_true", help="print every run and its command; run nothing")
    screen.add_argument("--no-report", dest="report", action="store_false", help="skip the report at the end")
    estimate_flags(screen)
    container_flags(screen)


def job_flags(parser: Any) -> None:
    """A job's place and time, as submit and screen --submit take them (the sweep file's scheduler block's keys,
    replaced), declared by the default scheduler's options (launchers/schedulers.py)."""
    default = default_scheduler()
    jobs = parser.add_argument_group(f"jobs (replace the keys of the sweep file's scheduler block; {default.name}'s "
                                     "flags, those another scheduler's block has keys for taken there)")
    add_flags(jobs, default.options_class, JOB_FLAGS, defaults={name: None for name in JOB_FLAGS},
              note="default: the sweep file's")


JOB_FLAGS = ("partition", "account", "qos", "time_min")


