"""What a job's scheduler and launcher tell a process about its place, read through one table (submitit's
SlurmJobEnvironment in spirit): the job id (an array task's too), the nodes, the tasks, this task's rank and local
rank, the GPUs granted, the restart count; and the MPI launchers' own variables. Every site that needs one of these
asks here. A new scheduler is one row of SCHEDULERS; nothing else reads a scheduler's variables."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping

# Each scheduler's variables for what a job's task may ask (first found wins).
SCHEDULERS: dict[str, dict[str, tuple[str, ...]]] = {
    "slurm": {
        "job_id": ("SLURM_JOB_ID",), "array_job_id": ("SLURM_ARRAY_JOB_ID",), "array_task_id": ("SLURM_ARRAY_TASK_ID",),
        "nodelist": ("SLURM_JOB_NODELIST",), "num_nodes": ("SLURM_JOB_NUM_NODES", "SLURM_NNODES"),
        "num_tasks": ("SLURM_NTASKS",), "step_tasks": ("SLURM_STEP_NUM_TASKS",), "task_rank": ("SLURM_PROCID",),
        "local_rank": ("SLURM_LOCALID",), "restarts": ("SLURM_RESTART_COUNT",),
        "gpus": ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS"),
    },
    "pbs": {  # PBS Pro and OpenPBS
        "job_id": ("PBS_JOBID",), "array_task_id": ("PBS_ARRAY_INDEX",), "nodefile": ("PBS_NODEFILE",),
        "num_tasks": ("PBS_TASKNUM",),
    },
    "flux": {
        "job_id": ("FLUX_JOB_ID",), "num_nodes": ("FLUX_JOB_NNODES",), "num_tasks": ("FLUX_JOB_SIZE",),
        "task_rank": ("FLUX_TASK_RANK",), "local_rank": ("FLUX_TASK_LOCAL_ID",),
    },
}
# What the launchers (Open MPI's mpirun, hydra's mpiexec, srun's PMI-2 or PMIx, horovodrun, torchrun) set per rank.
LAUNCHED = {
    "local_rank": ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "PMI_LOCAL_RANK", "HOROVOD_LOCAL_RANK",
                   "LOCAL_RANK"),
    "world_size": ("HOROVOD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS", "WORLD_SIZE"),
    "mpi": ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMI_RANK", "PMIX_RANK", "MPI_LOCALNRANKS"),  # an MPI launcher's
}
# The scheduler variables a rank records with its environment: the job, its step, its nodes, tasks and GPUs.
RECORDED = re.compile(r"^(SLURM_(JOB_|STEP_|NNODES$|NTASKS|PROCID$|LOCALID$|NODEID$|GPUS|CPUS_PER_TASK$|"
                      r"CLUSTER_NAME$|SUBMIT_HOST$)|PBS_(JOBID|ARRAY_INDEX|NODEFILE|TASKNUM)$|"
                      r"FLUX_(JOB_|TASK_))")


@dataclass(frozen=True)
class JobEnv:
    """One process's view of its job: the scheduler it runs under (None outside one) and its environment."""

    scheduler: str | None
    environ: Mapping[str, str]

    def named(self, what: str) -> tuple[str, str] | None:
        """(variable, value) of the first set variable that says ``what`` (LAUNCHED's or SCHEDULERS' keys): the
        launcher's first, since ranks an MPI launcher starts inside a job's first task inherit that task's
        scheduler variables (every rank would read SLURM_LOCALID 0)."""
        names = LAUNCHED.get(what, ()) + SCHEDULERS.get(self.scheduler or "", {}).get(what, ())
        return next(((n, self.environ[n]) for n in names if self.environ.get(n, "").strip()), None)

    def get(self, what: str) -> str | None:
        """The value that says ``what``, or None where neither the scheduler nor the launcher says it."""
        found = self.named(what)
        return found[1] if found else None

    def number(self, what: str) -> int | None:
        """That value as a whole number (None where absent or not one)."""
        value = (self.get(what) or "").strip()
        return int(value) if value.isdigit() else None

    @property
    def job_id(self) -> str | None:
        """The job's id as its scheduler names it (an array task: ``JOB_TASK``)."""
        array, task = self.get("array_job_id"), self.get("array_task_id")
        return f"{array}_{task}" if array and task else self.get("job_id")

    @property
    def mpi_launched(self) -> bool:
        """Whether an MPI launcher started this process (so MPI may be started in it before Horovod)."""
        return self.get("mpi") is not None


def job_env(environ: Mapping[str, str] | None = None) -> JobEnv:
    """The job environment of this process (or of ``environ``): under the first scheduler that set any of its
    variables (its job id first of all)."""
    environ = os.environ if environ is None else environ
    scheduler = next((name for name, table in SCHEDULERS.items()
                      if any(environ.get(n) for names in table.values() for n in names)), None)
    return JobEnv(scheduler, environ)
