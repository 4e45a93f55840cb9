"""srun inside a SLURM allocation: one task per GPU, MPI ranks wired by PMIx (or PMI-2)."""

from __future__ import annotations

from hvdbench.core.errors import UsageError
from hvdbench.core.spec import RunSpec

from ..base import (OPEN_MPI_TRANSPORT, PMI_PLUGINS, LaunchContext, Launcher, container_flags, rank_command,
                    register)


@register
class Srun(Launcher):
    """``srun --mpi=pmix --nodes N --ntasks NP --ntasks-per-node G python script ...``.

    Each task sees the GPUs SLURM gives it and takes its own (core/gpu_choice.py); the transport
    reaches Open MPI as OMPI_MCA_* variables; a task that dies ends the step (``--kill-on-bad-exit``); CPU
    binding is the suite's.
    """

    name = "srun"
    controllers = ("mpi",)
    controller_note = "SLURM starts the ranks through PMI"
    needs_hosts = False
    task_per_rank = True
    srun_across_nodes = True
    transports = ("auto", "ucx", "tcp")
    transport_variables = {name: tuple((f"OMPI_MCA_{k}", v) for k, v in pairs)
                           for name, pairs in OPEN_MPI_TRANSPORT.items()}

    def command(self, spec: RunSpec, ctx: LaunchContext) -> list[str]:
        self.check_controller(spec.controller)
        self.check_transport(spec.transport)
        if ctx.pmi not in PMI_PLUGINS:
            raise UsageError(f"srun PMI plugin {ctx.pmi!r} is not one of {', '.join(PMI_PLUGINS)}")
        where = [f"--nodelist={spec.host}"] if spec.host else []
        return ["srun", f"--mpi={ctx.pmi}", f"--nodes={spec.nodes}", f"--ntasks={spec.np}",
                f"--ntasks-per-node={spec.ranks_per_node}", *where, "--kill-on-bad-exit=1", "--cpu-bind=none",
                f"--job-name=hvdbench-{spec.benchmark}", *container_flags(spec, ctx), *rank_command(spec, ctx)]
