"""PBS (PBS Pro, OpenPBS) through qsub: one job per run, its script built here (``#PBS -l select=...``) and kept
under the results' pbs-jobs/, its one task starting every rank over the job's node file (core/job_env.py) and
recording how the run ended as a SLURM job's first task does (launchers/job_task.py); qstat says the rest. A sweep
file's ``pbs:`` block chooses it (launchers/schedulers.py)."""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from functools import cached_property
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from hvdbench.core.containers import runtime
from hvdbench.core.errors import UsageError
from hvdbench.core.options import Grammar, Switch, Text, Whole, option
from hvdbench.core.spec import RunSpec
from hvdbench.core.validate import QUEUE_WORD

from .base import launcher_class
from .queues import ScriptSubmitter
from .pbs_queue import pbs_node_shape, qstat_states
from .job_shape import NodeShape, NodeShapes, billed_gpus, cpus_a_rank, gpus_needed
from .schedulers import Minutes, Queue, Scheduler, register_scheduler, setup_problem

JOBS_DIR = "pbs-jobs"
RESOURCE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*=[A-Za-z0-9_.+-]+$")  # a chunk's name=value (model=a100)
PBS_DIRECTIVE = re.compile(r"^-[A-Za-z](?: [A-Za-z0-9_.:+@=,/-]+)?$")  # -l filesystems=home, -W group_list=g
JOB_ID = re.compile(r"^\d+(?:\[\d*\])?(?:\.[A-Za-z0-9_.-]+)?$")  # what qsub prints: 123.server, 124[].server
SAFE_PATH = re.compile(r"^[A-Za-z0-9_./+@%,=~-]+$")  # a path a #PBS line holds unquoted
# qsub options and chunk resources hvdbench sets from each run: a directive would override them
SET_BY_HVDBENCH = {"-N": "the sweep name", "-q": "pbs.queue", "-A": "pbs.account", "-o": "the results directory",
                   "-e": "the results directory", "-j": "the results directory", "-r": "retries", "-J": "one job a run",
                   "-V": "the submitter's environment, always passed"}
SET_RESOURCES = ("select", "place", "walltime", "ncpus", "ngpus", "mpiprocs", "mem", "host")



@dataclass(frozen=True)
class PbsOptions:
    """How each run becomes a PBS job (a sweep file's pbs: block): one chunk per node."""

    queue: str | None = option(None, Grammar(QUEUE_WORD, "a PBS queue name"), "PBS queue (qsub -q)")
    account: str | None = option(None, Grammar(QUEUE_WORD, "a PBS account or project"), "PBS account (qsub -A)")
    time_min: int = option(60, Minutes(), "each job's walltime, minutes or HH:MM:SS (where none is given: the run's "
                                          "timeout + 25% + 5 minutes)", key="time")
    gpus: bool = option(True, Switch(), "ask each chunk for the node's GPUs (ngpus; false: CPU nodes)")
    ncpus: int | None = option(None, Whole(), "CPUs per node (default: each rank's and its loader workers')")
    mem_gb: int | None = option(None, Whole(), "memory per node in GB")
    exclusive: bool = option(False, Switch(), "each job has its nodes to itself (place=scatter:excl)")
    resources: tuple[str, ...] = option((), Grammar(RESOURCE, "a chunk resource such as model=a100"),
                                        "further resources of each node's chunk (name=value)", many=True)
    directives: tuple[str, ...] = option((), Grammar(PBS_DIRECTIVE, "a qsub option such as -l filesystems=home"),
                                         "further #PBS lines", many=True)
    setup: tuple[str, ...] = option((), Text(), "shell lines each job runs first (module load ...)", many=True)


def pbs_problem(options: PbsOptions) -> str | None:
    """Why a valid-looking pbs: block may not stand (a line that overrides what hvdbench sets, a setup line qsub would
    read as a directive), or None."""
    said = setup_problem(options.setup, "#PBS", "pbs")
    if said:
        return said
    for directive in options.directives:
        flag, _, value = directive.partition(" ")
        if flag in SET_BY_HVDBENCH:
            return f"pbs.directives: {flag} is set by hvdbench ({SET_BY_HVDBENCH[flag]}); remove it"
        name = value.split("=", 1)[0]
        if flag == "-l" and name in SET_RESOURCES:
            return f"pbs.directives: -l {name} is set by hvdbench from each run; remove it{_instead(value)}"
    clash = next((r for r in options.resources if r.split("=", 1)[0] in SET_RESOURCES), None)
    return f"pbs.resources: {clash} is set by hvdbench from each run; remove it{_instead(clash)}" if clash else None


def _instead(resource: str) -> str:
    """What a refused resource has in the pbs: block instead (nodes of one's own: ``exclusive: true``)."""
    name, _, value = resource.partition("=")
    if name == "place" and "excl" in value:
        return " (for nodes of the job's own give pbs.exclusive: true: place=scatter:excl)"
    return {"ncpus": " (pbs.ncpus sets it)", "mem": " (pbs.mem_gb sets it)", "walltime": " (pbs.time sets it)",
            "ngpus": " (pbs.gpus: false for CPU nodes)"}.get(name, "")


def refusal(spec: RunSpec) -> str | None:
    """Why a run cannot be a PBS job, or None: its launcher starts ranks as srun steps, or its runtime needs srun."""
    cls = launcher_class(spec.launcher)
    if cls.task_per_rank or (cls.srun_across_nodes and spec.nodes > 1):
        return (f"run {spec.id}: launcher {spec.launcher} starts its ranks as srun steps, which a PBS job has not: "
                "use mpirun, mpiexec or horovodrun")
    if spec.container is not None and runtime(spec.container.runtime).submit_note:
        return f"run {spec.id}: container runtime {spec.container.runtime} is started by srun's flags (SLURM only)"
    return None


def walltime(minutes: int) -> str:
    """PBS's walltime, HH:MM:SS."""
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00"


def pbs_script(spec: RunSpec, options: PbsOptions, name: str, run_dir: Path, python: str, retries: int = 0,
               shape: NodeShape | NodeShapes | None = None) -> str:
    """The job script of one run: one chunk a node (its ranks as mpiprocs, their CPUs and the GPUs the run needs),
    scattered over distinct nodes, the walltime, queue, account, and the task that starts every rank. CPUs a rank:
    pbs.ncpus over the ranks of a node where given, else the nodes' share (``shape``, from pbsnodes) or what the
    rank and its loader need, said in the script."""
    jobs = run_dir.parent / JOBS_DIR
    cpus, why = cpus_a_rank(spec, shape, fixed=None, gpus=options.gpus, asked="pbsnodes", key="pbs.ncpus",
                            where="PBS's nodes")
    ncpus = options.ncpus or spec.ranks_per_node * cpus
    chunk = [f"select={spec.nodes}", f"ncpus={ncpus}", f"mpiprocs={spec.ranks_per_node}"]
    chunk += [f"ngpus={gpus_needed(spec)}"] if options.gpus else []
    chunk += [f"mem={options.mem_gb}gb"] if options.mem_gb else []
    chunk += [f"host={spec.host}"] if spec.host else []
    place = "scatter:excl" if options.exclusive or spec.devices is not None else "scatter"
    lines = ["#!/bin/bash", f"#PBS -N {job_name(name)}", f"#PBS -l {':'.join([*chunk, *options.resources])}",
             f"#PBS -l place={place}", f"#PBS -l walltime={walltime(options.time_min)}",
             f"#PBS -o {jobs / (spec.id + '.out')}", f"#PBS -e {jobs / (spec.id + '.err')}",
             f"#PBS -r {'y' if retries else 'n'}", "#PBS -V"]
    lines += [f"#PBS -q {options.queue}"] if options.queue else []
    lines += [f"#PBS -A {options.account}"] if options.account else []
    lines += [f"#PBS {d}" for d in options.directives]
    lines += [f"# CPUs a rank: {cpus} ({why})" if not options.ncpus else
              f"# CPUs a node: {options.ncpus} (pbs.ncpus)", *options.setup]
    task = [python, "-m", "hvdbench.launchers.job_task", str(run_dir), python, str(retries)]
    return "\n".join([*lines, f"exec {shlex.join(task)}", ""])


def job_name(name: str) -> str:
    """qsub's -N: a letter first, no blanks."""
    return ("hvdbench-" + re.sub(r"[^A-Za-z0-9_.-]", "-", name))[:200]


class PbsQueue(Queue):
    """qstat -x -f -F json (PBS Pro, OpenPBS); ids carry their server, 123.server."""

    name = "pbs"
    job_id = re.compile(r"^\d+(?:\[\d*\])?\.[A-Za-z0-9_.-]+$")

    def states(self, job_ids: Sequence[str], run: Callable[..., Any]) -> dict[str, tuple[str, str]]:
        return qstat_states(job_ids, run)


@register_scheduler
class Pbs(Scheduler):
    """PBS Pro and OpenPBS: one job a run through qsub, its script built here."""

    name = "pbs"
    options_class = PbsOptions
    queue = PbsQueue()
    job_flags = ("account", "time_min")
    options: PbsOptions

    def problem(self, sweep: Any) -> tuple[str, str] | None:
        said = pbs_problem(self.options)
        return (said.split(":", 1)[0], said.split(": ", 1)[1]) if said else None

    def executor(self, root: Path, *, name: str, resume: bool, retries: int, per_node: bool = False) -> "PbsExecutor":
        return PbsExecutor(root, self.options, name=name, resume=resume, retries=retries)  # one job a run on PBS


class PbsExecutor(ScriptSubmitter):
    """Submits runs as PBS jobs with qsub, one job a run (queues.ScriptSubmitter's loop); ``resume`` leaves out what is
    complete or queued."""

    scheduler, tool, jobs, suffix = "pbs", "qsub", JOBS_DIR, ".pbs"

    def __init__(self, root: Path, options: PbsOptions, *, name: str, python: str = sys.executable,
                 resume: bool = True, retries: int = 0,
                 report: Callable[[str], None] = lambda line: print(line, flush=True)) -> None:
        super().__init__(root, python=python, resume=resume, retries=retries, report=report)
        self.options, self.name = options, name

    def limit_s(self) -> float | None:
        return float(self.options.time_min) * 60

    def billed_gpus(self, spec: RunSpec) -> int:
        """An exclusive job (a placement's job is placed excl) is billed every GPU of its nodes."""
        return billed_gpus(spec, self.options.exclusive or spec.devices is not None, self.shape)

    @cached_property
    def shape(self) -> NodeShapes | None:
        """PBS's smallest node as pbsnodes says it (asked once), for the CPUs a rank gets."""
        return pbs_node_shape(gpus=self.options.gpus) if shutil.which("pbsnodes") else None

    def describe(self, spec: RunSpec) -> str:
        """What submitting spec would do: its job script."""
        self.refuse([spec])
        return pbs_script(spec, self.options, self.name, (self.root / spec.id).resolve(), self.python,
                          self.retries, self.shape).rstrip().replace("\n", "\n    ")

    def refuse(self, specs: Sequence[RunSpec]) -> None:
        """One line for the first run PBS cannot take, or for a block or results path a job script cannot hold."""
        problem = pbs_problem(self.options) or next(filter(None, map(refusal, specs)), None)
        if problem:
            raise UsageError(problem)
        if not SAFE_PATH.match(str(self.root.resolve())):
            raise UsageError(f"{self.root}: a PBS job's #PBS -o line takes a path of letters, digits and ._-/+@%,=~ "
                             "only: choose another results directory")

    def job_script(self, spec: RunSpec, run_dir: Path) -> str:
        return pbs_script(spec, self.options, self.name, run_dir, self.python, self.retries, self.shape)

    def job_id(self, printed: str) -> str | None:
        said = (printed.strip().splitlines() or [""])[-1].strip()  # what qsub prints: 123.server, 124[].server
        return said if JOB_ID.match(said) else None
