"""What a job's scheduler and launcher tell a process about its place, read through one table (submitit's
SlurmJobEnvironment in spirit): the job id (an array task's too), the nodes, the tasks, this task's rank and local
rank, the GPUs granted, the restart count; and the MPI launchers' own variables. Every site that needs one of these
asks here. A scheduler is a class (its host list and requeue command as methods) with its row in SCHEDULERS;
nothing else reads a scheduler's variables."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from .errors import UsageError
from .hostlist import expand_hostlist
from .validate import regular_file

@dataclass(frozen=True)
class Scheduler:
    """One scheduler as a job's task sees it: its variables for what a task may ask (first found wins), how it
    lists the job's hosts, and the command that puts the job back in its queue (submitit's JobEnvironment in
    spirit); ``hydra_bootstrap``: how hydra's mpiexec (MPICH, Intel MPI) starts its proxies on the job's hosts
    (None: hydra's default, ssh); ``steps_carry_ssh``: horovodrun's ssh to the job's nodes can go through a step of
    the job (SLURM's srun), where nodes run no sshd; ``controller_says_why``: its controller says why a job stopped
    and whether it was requeued (SLURM's scontrol). A new scheduler is one subclass and its row in SCHEDULERS."""

    name: str
    variables: Mapping[str, tuple[str, ...]]
    hydra_bootstrap: str | None = None
    steps_carry_ssh: bool = False
    controller_says_why: bool = False

    def hosts(self, env: "JobEnv") -> tuple[str, ...]:
        """The job's hosts, each once, in the scheduler's order (UsageError where the job's list is not there)."""
        raise UsageError(f"{self.name} gives its jobs no host list hvdbench reads: name the hosts (--hosts)")

    def requeue(self, job: str) -> list[str]:
        """The command that puts job ``job`` back in the queue to run again."""
        raise UsageError(f"{self.name} jobs are not requeued by hvdbench")


class Slurm(Scheduler):
    def hosts(self, env: "JobEnv") -> tuple[str, ...]:
        nodelist = env.get("nodelist")
        if not nodelist:
            raise UsageError("not inside a SLURM allocation: SLURM_JOB_NODELIST is not set")
        return expand_hostlist(nodelist)

    def requeue(self, job: str) -> list[str]:
        return ["scontrol", "requeue", job]


class Pbs(Scheduler):
    def hosts(self, env: "JobEnv") -> tuple[str, ...]:
        """PBS's node file: one line per slot (a host's name as often as it has slots there), read once per host."""
        named = env.named("nodefile")
        if named is None:
            raise UsageError("not inside a PBS job: PBS_NODEFILE is not set")
        try:
            regular_file(Path(named[1]))
            lines = Path(named[1]).read_text(encoding="utf-8", errors="replace").splitlines()
        except (OSError, ValueError) as exc:
            raise UsageError(f"PBS_NODEFILE={named[1]} cannot be read: {exc}") from None
        hosts = tuple(dict.fromkeys(line.strip() for line in lines if line.strip()))
        if not hosts:
            raise UsageError(f"PBS_NODEFILE={named[1]} holds no host names")
        bad = next((h for h in hosts if not HOST_NAME.fullmatch(h)), None)
        if bad is not None:
            raise UsageError(f"PBS_NODEFILE={named[1]} names {bad[:80]!r}, which is no host name")
        return hosts

    def requeue(self, job: str) -> list[str]:
        return ["qrerun", job]


HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
SCHEDULERS: dict[str, Scheduler] = {scheduler.name: scheduler for scheduler in (
    Slurm("slurm", {
        "job_id": ("SLURM_JOB_ID",), "array_job_id": ("SLURM_ARRAY_JOB_ID",), "array_task_id": ("SLURM_ARRAY_TASK_ID",),
        "nodelist": ("SLURM_JOB_NODELIST",), "num_nodes": ("SLURM_JOB_NUM_NODES", "SLURM_NNODES"),
        "num_tasks": ("SLURM_NTASKS",), "step_tasks": ("SLURM_STEP_NUM_TASKS",), "task_rank": ("SLURM_PROCID",),
        "local_rank": ("SLURM_LOCALID",), "restarts": ("SLURM_RESTART_COUNT",),
        "gpus": ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS"), "gpus_on_node": ("SLURM_GPUS_ON_NODE",),
    }, hydra_bootstrap="slurm",  # Intel MPI's hydra would use ssh in a job, where nodes often run no sshd
        steps_carry_ssh=True, controller_says_why=True),
    Pbs("pbs", {  # PBS Pro and OpenPBS
        "job_id": ("PBS_JOBID",), "array_task_id": ("PBS_ARRAY_INDEX",), "nodefile": ("PBS_NODEFILE",),
        "num_tasks": ("PBS_TASKNUM",),
    }),
    Scheduler("flux", {  # no host list or requeue read yet: the base class says so
        "job_id": ("FLUX_JOB_ID",), "num_nodes": ("FLUX_JOB_NNODES",), "num_tasks": ("FLUX_JOB_SIZE",),
        "task_rank": ("FLUX_TASK_RANK",), "local_rank": ("FLUX_TASK_LOCAL_ID",),
    }),
)}
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
        table = SCHEDULERS[self.scheduler].variables if self.scheduler else {}
        names = LAUNCHED.get(what, ()) + table.get(what, ())
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

    def hosts(self) -> tuple[str, ...]:
        """The job's hosts as its scheduler lists them (UsageError outside a job, or where it lists none)."""
        if self.scheduler is None:
            raise UsageError("not inside a job allocation (SLURM, PBS or Flux): name the hosts (--hosts)")
        return SCHEDULERS[self.scheduler].hosts(self)

    def requeue_command(self, job: str | None = None) -> list[str]:
        """The command that puts job ``job`` (default: this one) back in its scheduler's queue (UsageError where
        there is none)."""
        job = job or self.job_id
        if self.scheduler is None or not job:
            raise UsageError("not inside a job: there is nothing to requeue")
        return SCHEDULERS[self.scheduler].requeue(job)

    @property
    def controller_says_why(self) -> bool:
        """Whether this job's scheduler can say why it stopped (its row; outside any job, SLURM's tools are tried)."""
        return not self.scheduler or SCHEDULERS[self.scheduler].controller_says_why

    @property
    def steps_carry_ssh(self) -> bool:
        """Whether ssh to this job's nodes can go through a step of the job (its scheduler's row says)."""
        return bool(self.scheduler) and SCHEDULERS[self.scheduler or ""].steps_carry_ssh

    @property
    def mpi_launched(self) -> bool:
        """Whether an MPI launcher started this process (so MPI may be started in it before Horovod)."""
        return self.get("mpi") is not None


def job_env(environ: Mapping[str, str] | None = None) -> JobEnv:
    """The job environment of this process (or of ``environ``): under the first scheduler that set any of its
    variables (its job id first of all)."""
    environ = os.environ if environ is None else environ
    scheduler = next((name for name, row in SCHEDULERS.items()
                      if any(environ.get(n) for names in row.variables.values() for n in names)), None)
    return JobEnv(scheduler, environ)
