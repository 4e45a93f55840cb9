"""srun inside a SLURM allocation: one task per GPU, MPI ranks wired by PMIx (or PMI-2)."""

from __future__ import annotations

from hvdbench.suite.errors import UsageError
from hvdbench.suite.spec import RunSpec

from .base import LaunchContext, Launcher, rank_command, register

PMI_PLUGINS = ("pmix", "pmi2")


@register
class Srun(Launcher):
    """``srun --mpi=pmix --nodes N --ntasks NP --ntasks-per-node G python script ...``.

    Each task sees the node's GPUs of the allocation (or the spec's devices) and takes the one of its
    local rank; a task that dies ends the step (``--kill-on-bad-exit``); CPU binding is the suite's.
    """

    name = "srun"

    def command(self, spec: RunSpec, ctx: LaunchContext) -> list[str]:
        if spec.controller != "mpi":
            raise UsageError(f"launcher srun starts Horovod's MPI controller through PMI, not {spec.controller!r}")
        if ctx.pmi not in PMI_PLUGINS:
            raise UsageError(f"srun PMI plugin {ctx.pmi!r} is not one of {', '.join(PMI_PLUGINS)}")
        return ["srun", f"--mpi={ctx.pmi}", f"--nodes={spec.nodes}", f"--ntasks={spec.np}",
                f"--ntasks-per-node={spec.ranks_per_node}", "--kill-on-bad-exit=1", "--cpu-bind=none",
                f"--job-name=hvdbench-{spec.benchmark}", *rank_command(spec, ctx)]
