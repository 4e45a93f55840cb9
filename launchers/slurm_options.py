"""How each run becomes a SLURM job: a sweep file's slurm: block (and submit's and screen's flags), every option
declared once with its key, flag, default, check and help; the directives hvdbench sets itself, refused; what a
valid block will cost the measurements."""

from __future__ import annotations

from dataclasses import dataclass

from hvdbench.core.options import Choice, Grammar, Switch, Text, Whole, option
from hvdbench.core.validate import CONSTRAINT, DIRECTIVE, GRES_TYPE, QUEUE_WORD

from .base import PMI_PLUGINS
from .schedulers import Minutes

QUEUE = {what: Grammar(QUEUE_WORD, f"a SLURM {what} name") for what in ("partition", "account", "QOS")}


@dataclass(frozen=True)
class SlurmOptions:
    """How each run becomes a SLURM job (a sweep file's slurm: block; submit's and screen's flags)."""

    partition: str | None = option(None, QUEUE["partition"], "SLURM partition", flag="--partition")
    account: str | None = option(None, QUEUE["account"], "SLURM account", flag="--account")
    qos: str | None = option(None, QUEUE["QOS"], "SLURM QOS", flag="--qos")
    time_min: int = option(60, Minutes(), "each job's time limit, minutes or sbatch's D-HH:MM:SS (where none is "
                                          "given: the run's timeout + 25% + 5 minutes)", key="time", flag="--time")
    constraint: str | None = option(None, Grammar(CONSTRAINT, "a SLURM constraint expression"),
                                    "sbatch --constraint: the node features a job needs")
    exclusive: bool = option(False, Switch(), "each job has its nodes to itself")
    directives: tuple[str, ...] = option((), Grammar(DIRECTIVE, "an sbatch option such as --reservation=R"),
                                         "further #SBATCH options (long form, --option=value)", many=True)
    setup: tuple[str, ...] = option((), Text(), "shell lines each job runs first (module load ...)", many=True)
    array_parallelism: int | None = option(None, Whole(), "submit the runs as a job array, this many at once")
    gpus: bool = option(True, Switch(), "ask for the node's GPUs (false: CPU nodes)")
    mpi: str = option("pmix", Choice(PMI_PLUGINS), "srun's --mpi plugin that wires the ranks")
    cpus_per_task: int | None = option(None, Whole(), "CPUs per task (default: a rank's share and its loader's "
                                                      "workers)")
    mem_gb: int | None = option(None, Whole(), "memory per node in GB")
    gpus_per_task: bool = option(False, Switch(), "one GPU per task (--gpus-per-task=1) instead of the node's GPUs "
                                                  "per node")
    gpu_type: str | None = option(None, Grammar(GRES_TYPE, "a GRES type such as a100 (no count)"),
                                  "--gres=gpu:TYPE:N where a cluster has several GPU models")


# sbatch options hvdbench sets itself for every job: a directive would silently override them
SET_BY_HVDBENCH = {"nodes": "its nodes", "N": "its nodes", "ntasks-per-node": "one task per rank or per node",
                   "ntasks": "one task per rank or per node", "n": "one task per rank or per node",
                   "gpus-per-node": "its GPUs per node", "gres": "its GPUs per node", "time": "slurm.time",
                   "t": "slurm.time", "partition": "slurm.partition", "p": "slurm.partition",
                   "account": "slurm.account", "A": "slurm.account", "qos": "slurm.qos", "job-name": "the sweep name",
                   "J": "the sweep name", "output": "the results directory", "o": "the results directory",
                   "error": "the results directory", "e": "the results directory", "nodelist": "a pinned run's host",
                   "w": "a pinned run's host", "array": "slurm.array_parallelism", "a": "slurm.array_parallelism",
                   "exclusive": "slurm.exclusive",
                   "constraint": "slurm.constraint", "C": "slurm.constraint", "mem": "slurm.mem_gb",
                   "cpus-per-task": "slurm.cpus_per_task", "c": "slurm.cpus_per_task",
                   "gpus": "its GPUs per node", "G": "its GPUs per node", "gpus-per-task": "slurm.gpus_per_task",
                   "requeue": "retries (a job with retries is requeueable)",
                   "no-requeue": "retries (a job with retries is requeueable)",
                   "signal": "the stop signal that records a run ahead of the time limit"}


def directive_problem(directive: str) -> str | None:
    """Why an sbatch directive may not stand in a sweep file, or None: a short option (a job's #SBATCH lines take the
    long form), pyxis's srun flags, or an option hvdbench sets itself (sbatch reads any unambiguous start of a long
    option: --gpus-per-n is --gpus-per-node)."""
    # --name[=value]; a short option's value may follow its letter at once (-N2, -wnode9)
    option = directive[2:].split("=", 1)[0] if directive.startswith("--") else directive[1:2]
    if not directive.startswith("--") and option not in SET_BY_HVDBENCH:
        return f"{directive} is a short option: write sbatch's long form (--option=value), as each job's #SBATCH " \
               "lines take it"
    if option.startswith("container-"):
        return f"--{option} is pyxis's srun flag, not a job's #SBATCH line: give the image in the container: key " \
               "(image, runtime: pyxis)"
    meant = option if option in SET_BY_HVDBENCH or not directive.startswith("--") else next(
        (name for name in SET_BY_HVDBENCH if len(name) > 1 and len(option) >= 2 and name.startswith(option)), option)
    if meant in SET_BY_HVDBENCH:
        said = f"--{option} (sbatch reads it as --{meant})" if meant != option else f"--{option}"
        return f"{said} is set by hvdbench from each run ({SET_BY_HVDBENCH[meant]}); remove it"
    return None


GPU_SHARING_LOST = ("each rank sees only its own GPU, so CUDA IPC and NVLink peer access between the ranks of a "
                    "node are lost and NCCL falls back to slower paths (shared memory or the network); leave it "
                    "out to measure the node as training uses it")


def slurm_warnings(options: SlurmOptions) -> list[str]:
    """What a valid slurm: block will cost the measurements, one line each: SLURM binding each rank to one GPU."""
    said = []
    if options.gpus_per_task:
        said.append(f"slurm.gpus_per_task: {GPU_SHARING_LOST}")
    for directive in options.directives:
        if directive.startswith("--gpu-bind"):
            said.append(f"slurm.directives {directive}: {GPU_SHARING_LOST}")
    return said
