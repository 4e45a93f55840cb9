"""SLURM, the default scheduler (a sweep file's ``slurm:`` block, or none), through submitit: one job (or one array
task) per run, results in the same layout as local runs. The scheduler's class, its queue and its executor are here;
the job's parameters are ``slurm_jobs``, its block's options ``slurm_options``, what its tasks run ``slurm_task``,
what the queue says ``slurm_queue``, a shape's allocation job ``slurm_allocation``."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import re
import shlex
import shutil
import sys
from functools import cached_property
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from hvdbench.core.containers import runtime
from hvdbench.core.errors import LaunchError, UsageError
from hvdbench.core.spec import RunSpec, RunStatus

from .base import LaunchContext, get_launcher, launcher_class, rank_command
from .slurm_allocation import submit_shapes
from .slurm_jobs import NodeShapes, job_parameters, node_shape, partition_problem, rank_cpus
from .job_shape import billed_gpus, gpus_needed
from .queues import Submitter
from .schedulers import Queue, Scheduler, register_scheduler
from .slurm_queue import squeue_states
from .slurm_task import run_task, run_tasks
from .slurm_options import SlurmOptions, directive_problem, slurm_warnings
from .schedulers import setup_problem

JOBS_DIR = "slurm-jobs"


class SlurmQueue(Queue):
    """squeue --states=all (no sacct: many clusters run no slurmdbd); ids are numbers, array tasks N_M."""

    name = "slurm"
    job_id = re.compile(r"^\d+(?:_[\d\[\],%-]+)?$")

    def states(self, job_ids: Sequence[str], run: Callable[..., Any]) -> dict[str, tuple[str, str]]:
        return squeue_states(job_ids, run)


@register_scheduler
class Slurm(Scheduler):
    """SLURM: one job a run through submitit; a sweep whose runtime takes srun's flags (pyxis) goes as one
    allocation job a shape."""

    name = "slurm"
    options_class = SlurmOptions
    queue = SlurmQueue()
    job_flags = ("partition", "account", "qos", "time_min")
    default = True
    options: SlurmOptions

    def pmi(self) -> str:
        return self.options.mpi

    def problem(self, sweep: Any) -> tuple[str, str] | None:
        """A directive hvdbench sets itself, a setup line sbatch would read as a directive, or GPUs per task where
        the sweep places its ranks on chosen GPUs."""
        for i, directive in enumerate(self.options.directives):
            said = directive_problem(directive)
            if said:
                return f"slurm.directives[{i}]", said
        said = setup_problem(self.options.setup, "#SBATCH", "slurm")
        if said:
            key, why = said.split(": ", 1)
            return key, why
        if self.options.gpus_per_task and sweep.placements:
            return "slurm.gpus_per_task", ("gives each task whichever GPU SLURM picks, so axes.placements cannot "
                                           "hold; remove one of them")
        return None

    def warnings(self) -> list[str]:
        return slurm_warnings(self.options)

    def whole_sweep(self, sweep: Any) -> bool:
        return sweep.container is not None and bool(runtime(sweep.container.runtime).submit_note)

    def executor(self, root: Path, *, name: str, resume: bool, retries: int, per_node: bool = False) -> "SlurmExecutor":
        return SlurmExecutor(root, self.options, name=name, resume=resume, retries=retries, per_node=per_node)

    def submit_whole(self, sweep: Any, specs: Sequence[RunSpec], root: Path, *, sweep_file: Path,
                     container: Any, dry_run: bool, tags: Mapping[str, str] | None = None,
                     say: Callable[[str], None] = print) -> None:
        submit_shapes(specs, self.options, name=sweep.name, sweep_file=sweep_file, root=root, container=container,
                      dry_run=dry_run, tags=tags, say=say)


class SlurmExecutor(Submitter):
    """Submits runs as SLURM jobs through submitit; ``resume`` leaves out what is complete or queued; ``per_node``:
    the runs pinned to one node (a screen's) as one job a node, its runs one after another in one allocation."""

    def __init__(self, root: Path, options: SlurmOptions, *, name: str, python: str = sys.executable,
                 resume: bool = True, retries: int = 0,
                 report: Callable[[str], None] = lambda line: print(line, flush=True), per_node: bool = False) -> None:
        super().__init__(root, python=python, resume=resume, retries=retries, report=report)
        self.options, self.name, self.per_node = options, name, per_node

    def limit_s(self) -> float | None:
        return float(self.options.time_min) * 60 if self.options.time_min else None

    def billed_gpus(self, spec: RunSpec) -> int:
        """An exclusive job is billed every GPU of its nodes."""
        return billed_gpus(spec, self.options.exclusive, self.shape)

    @cached_property
    def shape(self) -> NodeShapes | None:
        """The partition's nodes as sinfo says them (asked once), for the CPUs a rank gets."""
        return node_shape(self.options.partition) if shutil.which("sinfo") else None

    def describe(self, spec: RunSpec) -> str:
        """What submitting spec would do: the job script as sbatch gets it (submitit's, the CPUs a rank get and
        why), and what its task(s) run: each task its rank, or the first task the launcher's whole line over the
        allocation's nodes (node1, node2, ... standing for the names SLURM gives them)."""
        _submittable([spec])
        params = job_parameters(self.options, spec, self.name, self.retries, self.shape)
        script = job_script(params, self.root / JOBS_DIR / "%j")
        cpus, why = rank_cpus(self.options, spec, self.shape)
        ctx = LaunchContext(python=self.python, run_dir=(self.root / spec.id).resolve(), pmi=self.options.mpi)
        launcher = get_launcher(spec.launcher)
        if launcher.task_per_rank:
            line = f"each task runs: {shlex.join(rank_command(spec, ctx))}"
        else:
            hosts = tuple(f"node{i}" for i in range(1, spec.nodes + 1))
            argv = launcher.command(spec, replace(ctx, hosts=hosts, scheduler="slurm"))
            line = (f"the first task runs ({spec.launcher} over the allocation; {', '.join(hosts)}: its nodes as "
                    f"SLURM names them): {shlex.join(argv)}")
        return (f"job script:\n        {script.rstrip().replace(chr(10), chr(10) + '        ')}\n    CPUs a rank: "
                f"{cpus} ({why})\n    the tasks start {self.python} (this host's interpreter, as submitit does): the "
                f"compute nodes must see it at that path (a filesystem they share)\n    {line}")

    def preflight(self, specs: Sequence[RunSpec]) -> str | None:
        """What the submit would refuse of these runs (every run the partition cannot hold), for the dry run."""
        return partition_problem(self.pending(specs), self.options)

    def execute(self, specs: Sequence[RunSpec]) -> list[RunStatus]:
        """Submit every spec that is not finished; each submitted run's status (``submitted``, its job id)."""
        return [RunStatus("submitted", None, 0.0, f"job {job} submitted", job_id=job, scheduler=Slurm.name)
                for _, job in self.submit(specs)]

    def submit(self, specs: Sequence[RunSpec]) -> list[tuple[RunSpec, str]]:
        """Submit each spec, one submitit executor per set of job parameters (as job arrays where
        array_parallelism is set); each job asks SLURM for exactly what ``describe`` shows for its run."""
        if importlib.util.find_spec("submitit") is None:
            raise LaunchError("SLURM submission needs submitit: pip install 'hvdbench[slurm]'")
        if shutil.which("sbatch") is None:
            raise LaunchError("SLURM submission needs sbatch on PATH: this machine has no SLURM client")
        todo = self.pending(specs)
        _submittable(todo)
        problem = partition_problem(todo, self.options)
        if problem:
            raise LaunchError(problem)
        self.root.mkdir(parents=True, exist_ok=True)
        self.plan_order(todo)
        by_node = self.grouped(todo)
        return self._submit_per_node(by_node) if by_node is not None else self._submit_each(todo)

    def _submit_each(self, todo: Sequence[RunSpec]) -> list[tuple[RunSpec, str]]:
        """A job a run, one submitit executor per set of job parameters (as job arrays where array_parallelism is
        set): each job gets exactly what describe() shows for it."""
        submitted: list[tuple[RunSpec, str]] = []
        groups: dict[str, tuple[dict[str, Any], list[RunSpec]]] = {}
        for spec in todo:
            params = job_parameters(self.options, spec, self.name, self.retries, self.shape)
            groups.setdefault(json.dumps(params, sort_keys=True, default=str), (params, []))[1].append(spec)
        for params, group in groups.values():
            executor = submitit_executor(params, self.root / JOBS_DIR / "%j")
            for spec in group:
                spec.write(self.root / spec.id, self.order.get(spec.id))
            try:
                if self.options.array_parallelism and len(group) > 1:
                    with executor.batch():
                        jobs = [executor.submit(run_task, s.to_dict(), str((self.root / s.id).resolve()), self.python,
                                                (), self.retries) for s in group]
                else:
                    jobs = [executor.submit(run_task, s.to_dict(), str((self.root / s.id).resolve()), self.python,
                                            (), self.retries) for s in group]
            except Exception as exc:  # submitit raises plain exceptions for sbatch errors
                raise LaunchError(f"sbatch refused the job(s): {str(exc).strip().splitlines()[-1]}") from None
            for spec, job in zip(group, jobs):
                RunStatus("submitted", None, 0.0, f"job {job.job_id} submitted", job_id=str(job.job_id),
                          scheduler=Slurm.name).write(
                    self.root / spec.id)
                submitted.append((spec, str(job.job_id)))
                self.report(f"{spec.id}: job {job.job_id}")
        return submitted

    def grouped(self, specs: Sequence[RunSpec]) -> dict[str, list[RunSpec]] | None:
        """The runs by node where they go as one job a node (``per_node``, each run pinned to a node, its launcher
        starting its ranks from one task); None where each run is its own job."""
        if not (self.per_node and specs and all(s.host and not launcher_class(s.launcher).task_per_rank
                                                for s in specs)):
            return None
        by_host: dict[str, list[RunSpec]] = {}
        for spec in specs:
            by_host.setdefault(str(spec.host), []).append(spec)
        return by_host

    def describe_jobs(self, specs: Sequence[RunSpec]) -> list[str] | None:
        """The dry run of one job a node: each node's job script and its runs; None where each run is its own job."""
        groups = self.grouped(specs)
        if groups is None:
            return None
        _submittable(list(specs))
        lines = []
        for host, group in groups.items():
            script = job_script(self.node_job(group), self.root / JOBS_DIR / "%j")
            lines.append(f"{host}: one job, its {len(group)} run(s) one after another ({', '.join(s.id for s in group)}"
                         f"), job script:\n        {script.rstrip().replace(chr(10), chr(10) + '        ')}")
        return lines

    def node_job(self, specs: Sequence[RunSpec]) -> dict[str, Any]:
        """The job parameters of one node's runs: the widest run's, its time limit the runs' together."""
        params = job_parameters(self.options, max(specs, key=gpus_needed), self.name, 0, self.shape)
        if params.get("timeout_min"):
            params["timeout_min"] = int(params["timeout_min"]) * len(specs)
        return params

    def _submit_per_node(self, by_host: Mapping[str, list[RunSpec]]) -> list[tuple[RunSpec, str]]:
        """One job a node holding its runs one after another (slurm_task.run_tasks), each run's status its job's."""
        submitted: list[tuple[RunSpec, str]] = []
        for host, group in by_host.items():
            executor = submitit_executor(self.node_job(group), self.root / JOBS_DIR / "%j")
            for spec in group:
                spec.write(self.root / spec.id, self.order.get(spec.id))
            try:
                job = executor.submit(run_tasks, [(s.to_dict(), str((self.root / s.id).resolve())) for s in group],
                                      self.python)
            except Exception as exc:  # submitit raises plain exceptions for sbatch errors
                raise LaunchError(f"sbatch refused the job(s): {str(exc).strip().splitlines()[-1]}") from None
            for spec in group:
                RunStatus("submitted", None, 0.0, f"job {job.job_id} submitted (one job for {len(group)} run(s) "
                          f"on {host})", job_id=str(job.job_id), scheduler=Slurm.name).write(self.root / spec.id)
                submitted.append((spec, str(job.job_id)))
            self.report(f"{host}: job {job.job_id}, {len(group)} run(s) one after another")
        return submitted


def submitit_executor(params: dict[str, Any], folder: Path) -> Any:
    """submitit's SLURM executor with these parameters, less the ``--wckey=submitit`` it adds by default (a workload
    key is a site's accounting: a sweep names one among its directives, ``--wckey=KEY``, where the site wants it)."""
    import submitit

    executor = submitit.AutoExecutor(folder=folder, cluster="slurm")
    executor.update_parameters(**params)
    inner = getattr(executor, "_executor", None)
    held = getattr(inner, "parameters", None)
    if isinstance(held, dict) and held.get("wckey") in (None, "submitit"):
        held["wckey"] = None  # submitit leaves a None out of the script (else it writes its own default)
    return executor


@contextlib.contextmanager
def _planning() -> Iterator[None]:
    """While a job script is only written out (a dry run, on a laptop or a login node without srun): submitit's SLURM
    executor, which refuses to exist where it finds no srun, is told the affinity a cluster would give it."""
    import submitit

    held = submitit.SlurmExecutor.__dict__.get("affinity")
    if submitit.SlurmExecutor.affinity() > 0 or held is None:
        yield
        return
    submitit.SlurmExecutor.affinity = classmethod(lambda cls: 1)  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        submitit.SlurmExecutor.affinity = held  # type: ignore[method-assign]


def job_script(params: dict[str, Any], folder: Path) -> str:
    """The job script sbatch would get for these parameters, as submitit writes it (its ``srun ... -m
    submitit.core._submit`` line starts the tasks), here or on a machine without SLURM; the parameters alone where
    this submitit cannot say."""
    try:
        with _planning():
            inner = submitit_executor(params, folder)._executor
            return str(inner._make_submission_file_text(inner._submitit_command_str, "dry-run"))
    except (ImportError, AttributeError, TypeError, ValueError, RuntimeError):
        return " ".join(f"{k}={v}" for k, v in params.items() if v not in ([], {}, None))


def _submittable(specs: Sequence[RunSpec]) -> None:
    """Refuse runs whose container runtime a submitted job's tasks cannot start (pyxis: srun's flags)."""
    for container in {spec.container for spec in specs if spec.container is not None}:
        note = runtime(container.runtime).submit_note
        if note:
            raise UsageError(f"container runtime {container.runtime} {note}")
