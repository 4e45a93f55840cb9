"""SLURM through submitit: one job (or one array task) per run, results in the same layout as local runs.
The job's parameters are ``slurm_jobs``, what its tasks run ``slurm_task``, what the queue says
``slurm_queue``; the executor here submits (the base and the retry policy are shared with local runs)."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from hvdbench.core.containers import runtime
from hvdbench.core.errors import LaunchError, UsageError
from hvdbench.core.spec import RunSpec, RunStatus

from .base import LaunchContext, launcher_class, rank_command
from .slurm_jobs import job_parameters, partition_problem
from .queues import Submitter
from .slurm_task import run_task
from .slurm_options import SlurmOptions

JOBS_DIR = "slurm-jobs"


class SlurmExecutor(Submitter):
    """Submits runs as SLURM jobs through submitit; ``resume`` leaves out what is complete or queued."""

    def __init__(self, root: Path, options: SlurmOptions, *, name: str, python: str = sys.executable,
                 resume: bool = True, retries: int = 0,
                 report: Callable[[str], None] = lambda line: print(line, flush=True)) -> None:
        super().__init__(root, python=python, resume=resume, retries=retries, report=report)
        self.options, self.name = options, name

    def limit_s(self) -> float | None:
        return float(self.options.time_min) * 60 if self.options.time_min else None

    def describe(self, spec: RunSpec) -> str:
        """What submitting spec would do: the job's resources and what its task(s) run."""
        _submittable([spec])
        params = job_parameters(self.options, spec, self.name, self.retries)
        resources = " ".join(f"{k}={v}" for k, v in params.items() if v not in ([], {}, None))
        ctx = LaunchContext(python=self.python, run_dir=(self.root / spec.id).resolve(), pmi=self.options.mpi)
        each = "each task" if launcher_class(spec.launcher).task_per_rank else \
            f"the first task ({spec.launcher} over the allocation)"
        return f"{resources}\n    {each} runs: {shlex.join(rank_command(spec, ctx))}"

    def execute(self, specs: Sequence[RunSpec]) -> list[RunStatus]:
        """Submit every spec that is not finished; each submitted run's status (``submitted``, its job id)."""
        return [RunStatus("submitted", None, 0.0, f"job {job} submitted", job_id=job) for _, job in self.submit(specs)]

    def submit(self, specs: Sequence[RunSpec]) -> list[tuple[RunSpec, str]]:
        """Submit each spec, one submitit executor per set of job parameters (as job arrays where
        array_parallelism is set); each job asks SLURM for exactly what ``describe`` shows for its run."""
        try:
            import submitit
        except ImportError:
            raise LaunchError("SLURM submission needs submitit: pip install 'hvdbench[slurm]'") from None
        if shutil.which("sbatch") is None:
            raise LaunchError("SLURM submission needs sbatch on PATH: this machine has no SLURM client")
        todo = self.pending(specs)
        _submittable(todo)
        problem = partition_problem(todo, self.options)
        if problem:
            raise LaunchError(problem)
        self.root.mkdir(parents=True, exist_ok=True)
        self.plan_order(todo)
        submitted: list[tuple[RunSpec, str]] = []
        # one submitit executor per set of job parameters: each job gets exactly what describe() shows for it
        groups: dict[str, tuple[dict[str, Any], list[RunSpec]]] = {}
        for spec in todo:
            params = job_parameters(self.options, spec, self.name, self.retries)
            groups.setdefault(json.dumps(params, sort_keys=True, default=str), (params, []))[1].append(spec)
        for params, group in groups.values():
            executor = submitit.AutoExecutor(folder=self.root / JOBS_DIR / "%j", cluster="slurm")
            executor.update_parameters(**params)
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
                RunStatus("submitted", None, 0.0, f"job {job.job_id} submitted", job_id=str(job.job_id)).write(
                    self.root / spec.id)
                submitted.append((spec, str(job.job_id)))
                self.report(f"{spec.id}: job {job.job_id}")
        return submitted


def _submittable(specs: Sequence[RunSpec]) -> None:
    """Refuse runs whose container runtime a submitted job's tasks cannot start (pyxis: srun's flags)."""
    for container in {spec.container for spec in specs if spec.container is not None}:
        note = runtime(container.runtime).submit_note
        if note:
            raise UsageError(f"container runtime {container.runtime} {note}")
