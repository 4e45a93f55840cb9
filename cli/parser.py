"""The command line of every ``hvdbench`` subcommand (argparse only; the work is in ``commands``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hvdbench.core.catalog import BENCHMARKS
from hvdbench.core.containers import container_flags as generated_container_flags
from hvdbench.core.environment import hvdbench_version
from hvdbench.core.flags import Parser, int_list, non_negative_int, percent, positive_float, positive_int
from hvdbench.core.metrics import MARGIN_PCT, MIN_RUNS
from hvdbench.core.options import add_flags, flag_type, options_of
from hvdbench.core.spec import CONTROLLERS

from hvdbench.launchers.base import launcher_names
from hvdbench.launchers.fit import FitOptions
from hvdbench.launchers.runs import DEFAULT_SWEEP, SCREEN_MODES
from hvdbench.launchers.schedulers import default_scheduler
from hvdbench.launchers.sweep import DECISION, LABEL, Sweep, sweep_flags

label = flag_type(LABEL)  # argparse type: a label (a system) without control characters, not empty


def rank_counts(text: str) -> list[int]:
    """``1,2,4`` as a sorted list of distinct positive integers."""
    return sorted(set(int_list("rank counts")(text)))


device_ids = int_list("GPU ids", minimum=0)


def build_parser() -> Parser:
    """The command line of every subcommand."""
    parser = Parser(prog="hvdbench", description="Horovod/MPI distributed training benchmarks and scaling reports.")
    parser.add_argument("--version", action="version", version=f"hvdbench {hvdbench_version()}",
                        help="print hvdbench's version (with its commit where it runs from a git checkout) and exit")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for add in (_run, _reports, _accept, _project, _sweep, _submit, _status, _screen, _topo, _nccl_log, _data,
                _fabric, _import, _history):
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


def _status(sub: Any) -> None:
    """hvdbench status: each run's state."""
    status = sub.add_parser("status", help="each run's state from a results directory and the scheduler",
                            description="One line per run: state (ok, failed, timeout, cancelled, preempted, "
                                        "pending, running, lost, not run), job id and reason.")
    status.add_argument("dir", type=Path, help="results root (or one run directory)")
    store_flag(status)


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


def _topo(sub: Any) -> None:
    """hvdbench topo: the node's topology and placements."""
    topo = sub.add_parser("topo", help="show this node's GPU topology and named placements",
                          description="Read the GPU/NIC link matrix (NVML, else nvidia-smi, or --file) and list "
                                      "named placements for 2, 4, ... GPUs.")
    topo.add_argument("--file", type=Path, default=None,
                      help="a saved 'nvidia-smi topo -m' output (or 'hvdbench topo --json') instead of this machine")
    topo.add_argument("--gpus", type=rank_counts, default=None, help="GPU counts to plan (default 2,4,...,all)")
    topo.add_argument("--exhaustive", action="store_true", help="every subset up to symmetry, labelled by ids")
    topo.add_argument("--json", action="store_true", help="print JSON for other tools")


def job_flags(parser: Any) -> None:
    """A job's place and time, as submit and screen --submit take them (the sweep file's scheduler block's keys,
    replaced), declared by the default scheduler's options (launchers/schedulers.py)."""
    default = default_scheduler()
    jobs = parser.add_argument_group(f"jobs (replace the keys of the sweep file's scheduler block; {default.name}'s "
                                     "flags, those another scheduler's block has keys for taken there)")
    add_flags(jobs, default.options_class, JOB_FLAGS, defaults={name: None for name in JOB_FLAGS},
              note="default: the sweep file's")


JOB_FLAGS = ("partition", "account", "qos", "time_min")


def _fabric(sub: Any) -> None:
    """hvdbench fabric: the node's network ports before a benchmark."""
    fabric = sub.add_parser(
        "fabric", help="check this node's HCA ports and GPUDirect RDMA before a benchmark",
        description="Every HCA port this node's ibstat (else ibv_devinfo) shows, or the saved outputs given: state, "
                    "physical state, rate and link layer; a port down, or up at a lower rate than its node's other "
                    "ports, is flagged; whether GPUDirect RDMA's kernel module is loaded. What is absent is said in "
                    "one line each. Exit status: 0 nothing flagged, 1 a port flagged, 4 no port to judge.")
    fabric.add_argument("files", nargs="*", type=Path,
                        help="saved ibstat, ibstatus or ibv_devinfo outputs (default: ask this node's tools)")
    fabric.add_argument("--json", action="store_true",
                        help="print JSON for other tools: each source's ports and what is flagged, GPUDirect RDMA")
    pairs = fabric.add_argument_group(
        "nccl-tests between nodes", "Inside a SLURM allocation: PROGRAM (nccl-tests' all_reduce_perf, built by "
        "scripts/nccl-tests.sh or the cluster's) as one srun step for every pair of nodes and across all of them; "
        "the outputs kept under -o's nccl-tests/, taken in as runs (hvdbench import), each pair's busbw at its largest "
        "size set against the best its two nodes reach with any other node (below 90% or above 111%: flagged, exit "
        "1), and against --expect-busbw where given; a lone pair is too few to compare without it.")
    pairs.add_argument("--nccl-tests", metavar="PROGRAM", default=None, help="the nccl-tests program to run")
    pairs.add_argument("--nccl-tests-flags", default="-b 1M -e 1G -f 2 -g 1", metavar="FLAGS",
                       help="its flags, one string (default: -b 1M -e 1G -f 2 -g 1)")
    pairs.add_argument("--expect-busbw", type=positive_float, default=None, metavar="GBS",
                       help="the bus bandwidth the link should give at the largest size (nominal, or the vendor's "
                            "figure): every set below 90%% of it is flagged")
    pairs.add_argument("--gpus-per-node", type=positive_int, default=None,
                       help="tasks (GPUs) a node (default: SLURM_GPUS_ON_NODE, else 1)")
    pairs.add_argument("--hosts", default=None, help="the nodes (default: the allocation's)")
    pairs.add_argument("--mpi", default="pmix", help="srun's --mpi (default pmix)")
    pairs.add_argument("-o", "--output", type=Path, default=Path("results/fabric"), help="results root")
    pairs.add_argument("--system", default="local", help="the system's label in the report")
    pairs.add_argument("--timeout", type=float, default=600.0, help="seconds a step may take (default 600)")
    pairs.add_argument("--dry-run", action="store_true", help="print each step's srun command; run nothing")
    pairs.add_argument("--serial", action="store_true",
                       help="one pair at a time (default: disjoint pairs side by side, n-1 rounds for n nodes; one "
                            "pair's traffic alone on the fabric, at n(n-1)/2 steps' time)")
    generated_container_flags(fabric.add_argument_group("nccl-tests in a container image (its program inside it)"))


def _data(sub: Any) -> None:
    """hvdbench data make: a dataset shaped like a real one, made here."""
    data = sub.add_parser("data", help="make a dataset shaped like ImageNet, LibriSpeech or WMT (no download)",
                          description="Datasets for --data files, made here: JPEGs of ILSVRC-2012's pixel and byte "
                                      "sizes, 16 kHz WAVs of LibriSpeech's lengths with transcripts, token pairs of "
                                      "WMT's lengths; as ImageFolder, WebDataset shards or TFRecords (imagenet, with "
                                      "TensorFlow), with a manifest.")
    verbs = data.add_subparsers(dest="verb", required=True, parser_class=Parser)
    make = verbs.add_parser("make", help="make one", description=data.description)
    make.add_argument("kind", choices=["imagenet", "speech", "translation"])
    make.add_argument("--to", type=Path, required=True, metavar="DIR", help="a new or empty folder")
    make.add_argument("--format", choices=["folder", "webdataset", "tfrecord"], default="folder",
                      help="ImageFolder (train/<class>/...), WebDataset .tar shards, or TFRecord shards")
    make.add_argument("--samples", type=positive_int, default=1000, help="samples to make (default 1000)")
    make.add_argument("--seed", type=int, default=0, help="the seed (the same seed makes the same bytes)")
    export = verbs.add_parser("export", help="write a real dataset out for the file loaders",
                              description="fashion-mnist: Debian's dataset-fashion-mnist (or --idx-dir's MNIST-format "
                                          "files), checked, written as PNGs under DIR/train and DIR/val (ImageFolder "
                                          "or WebDataset shards), for --data files --data-dir DIR/train --eval-dir "
                                          "DIR/val and a run to a quality target on the imagenet workload.")
    export.add_argument("kind", choices=["fashion-mnist"])
    export.add_argument("--to", type=Path, required=True, metavar="DIR", help="a new or empty folder")
    export.add_argument("--format", choices=["folder", "webdataset"], default="folder",
                        help="ImageFolder (<label>-<name>/<index>.png) or WebDataset .tar shards")
    export.add_argument("--idx-dir", type=Path, default=None, metavar="DIR",
                        help="the MNIST-format files (default: Debian's dataset-fashion-mnist)")


def _import(sub: Any) -> None:
    """hvdbench import nccl-tests|mlperf: another tool's results as runs beside hvdbench's own."""
    imp = sub.add_parser(
        "import", help="take nccl-tests' output or MLPerf Training results into a results root, as runs",
        description="nccl-tests: each test in its output (all_reduce_perf, all_gather_perf, broadcast_perf, "
                    "alltoall_perf) becomes a run of backend nccl-tests under the results root: its sizes stand in "
                    "the report's collectives table beside hvdbench's own and accept criteria judge them (backend = "
                    "'nccl-tests'). Its time is nccl-tests' own (each rank's mean over its iterations, averaged over "
                    "ranks); import each run of a test (an interval needs several). mlperf: every result file of a "
                    "published MLPerf Training folder (results/<system>/<benchmark>/result_N.txt, with "
                    "systems/<system>.json) becomes a run to its quality target, scored in the report's time-to-train "
                    "section by MLPerf's rule (the olympic mean). The same output or result twice is refused.")
    imp.add_argument("source", choices=["nccl-tests", "mlperf"], help="what wrote the files")
    imp.add_argument("files", nargs="+", type=Path, help="nccl-tests: its output, one or more tests a file; mlperf: "
                                                         "a submitter's folder, its results folder or a benchmark's")
    imp.add_argument("-o", "--output", type=Path, required=True, help="the results root")
    store_flag(imp)
    imp.add_argument("--system", default=None, help="the system's label in the report (default: nccl-tests local; "
                                                    "mlperf the submitter and system name its description gives)")


def _nccl_log(sub: Any) -> None:
    """hvdbench nccl-log: the network NCCL used, from its INFO output."""
    nccl = sub.add_parser(
        "nccl-log", help="say which network and transports NCCL used, from NCCL_DEBUG=INFO output",
        description="Read NCCL_DEBUG=INFO output (NCCL_DEBUG_SUBSYS=INIT,NET at least; a launcher's prefixes are "
                    "fine) and print per file the NCCL version, the network it moved data over (IB, RoCE, Socket "
                    "or a plugin's network), the plugin, GPUDirect RDMA, the NICs, the transports within a node, "
                    "the node count where the log shows it, and warnings (sockets beside an RDMA device, no "
                    "GPUDirect RDMA). What the log shows NCCL did, not what the environment asked for.")
    nccl.add_argument("files", nargs="+", type=Path, help="NCCL log files")
    nccl.add_argument("--json", action="store_true", help="print JSON by file name: one object per file, a list of "
                                                         "them (run by run) where a log holds several runs")


def store_flag(parser: Any, what: str = "the runs are") -> None:
    """Where a command records its runs (run, sweep, screen, import; status once every job has ended) or its
    verdict with the runs behind it (accept, compare)."""
    parser.add_argument("--store", default=None, metavar="URL",
                        help=f"the history store {what} recorded in: a file path, "
                             "sqlite:///path or postgresql://user@host/db (default: HVDBENCH_STORE, else "
                             "~/.local/share/hvdbench/history.sqlite); off records nothing")


def tag_flag(parser: Any) -> None:
    """Tags on the runs a command plans (run, sweep, screen, submit)."""
    parser.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE",
                        help="a tag on every run (repeatable): kept in the results root's tags.json and the history "
                             "store, selected by hvdbench history --tag")


def _history(sub: Any) -> None:
    """hvdbench history: the runs the store keeps across results roots and months."""
    history = sub.add_parser(
        "history", help="every run kept across roots and months: list, aggregate, check for change, compare, publish",
        description="The history store keeps every run that run, sweep, screen, a submitted job's sweep and import "
                    "finish, across results roots and months (each run once: by its id and a digest of its "
                    "measurements, which a copy shares). list: one row a run; aggregate: one row a system and "
                    "configuration (its runs, geometric mean throughput, spread between runs, first and last); "
                    "check: each configuration's change points (E-divisive means, a permutation test at 1%%) and the "
                    "finding of its latest change, the runs after against the runs before (exit 1 on a regression, "
                    "4 where a history is too short or the change undecided); publish DIR: a static site, a trend "
                    "page a configuration (runs, each stretch's band, change points, the environment's changes); "
                    "compare --a KEY=VALUE,... --b ...: two selections configuration by configuration on whole runs "
                    "(B over A; exit 1 where B is slower, 4 where undecided or not judged); "
                    "import ROOT...: record the runs under results roots (catching up where a store was down); "
                    "verdicts: the accept, compare and compare --regressions verdicts kept, each with the runs "
                    "behind it (--kind, --run, --since). The run folders stay the source of truth.")
    history.add_argument("action", nargs="?", default="list",
                         choices=["list", "aggregate", "check", "compare", "publish", "import", "verdicts"],
                         help="list (default), aggregate, check, compare, publish, import or verdicts")
    history.add_argument("roots", nargs="*", type=Path, help="import: the results roots; publish: the site's folder")
    store_flag(history)
    pick = history.add_argument_group("which runs (list, aggregate)")
    for name in ("system", "host", "benchmark", "model", "status"):
        pick.add_argument(f"--{name}", type=label, default=None, help=f"runs whose {name} is this")
    pick.add_argument("--np", type=positive_int, default=None, help="runs of this many ranks")
    pick.add_argument("--since", default=None, help="runs started since: an age (30d, 12h, 2w) or a date (2026-11-01)")
    pick.add_argument("--until", default=None, help="runs started before: an age or a date")
    pick.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE",
                      help="list: runs carrying this tag (repeatable); import: the tag given to each run recorded")
    history.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output (default table)")
    history.add_argument("--margin", type=percent, default=MARGIN_PCT,
                         help="check, compare: the change in percent within which runs count as equivalent (default 2)")
    history.add_argument("--a", default=None, metavar="KEY=VALUE,...",
                         help="compare: side A on top of the filters both share, e.g. system=dgx-a or "
                              "since=60d,until=30d (keys: system, host, benchmark, model, np, status, since, until, "
                              "tag.KEY)")
    history.add_argument("--b", default=None, metavar="KEY=VALUE,...", help="compare: side B, as --a")
    kept = history.add_argument_group("which verdicts (verdicts; --since too)")
    kept.add_argument("--kind", choices=["accept", "compare", "regressions"], default=None,
                      help="verdicts of this kind")
    kept.add_argument("--run", type=label, default=None, metavar="RUN_ID", help="verdicts this run stands behind")
    history.add_argument("--min-runs", type=positive_int, default=MIN_RUNS,
                         help=f"compare: complete runs a side a verdict needs (default {MIN_RUNS})")
