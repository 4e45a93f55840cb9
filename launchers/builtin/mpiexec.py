"""MPICH's and Intel MPI's mpiexec (the hydra process manager): Horovod's MPI controller."""

from __future__ import annotations

import shlex
from pathlib import Path

from hvdbench.core.job_env import SCHEDULERS
from hvdbench.core.spec import RunSpec

from ..hydra_ssh import SSH_ARGS
from ..base import (always_exported, LaunchContext, Launcher, container_env, rank_command, register, run_hosts,
                    ssh_options)

_TCP = (("FI_PROVIDER", "tcp"), ("UCX_TLS", "tcp,self,sm"))  # libfabric (Intel MPI, MPICH ch4:ofi) and UCX builds


@register
class Mpiexec(Launcher):
    """``mpiexec -n N -ppn G -hosts a,b -genvlist NAMES python script ...`` (hydra syntax); every knob
    exported by name; ssh's port and key through hvdbench-ssh, the ssh hydra is given; inside a SLURM
    job hydra starts its proxies through SLURM (``-bootstrap slurm``: Intel MPI's would try ssh). Transport tcp sets
    libfabric's and UCX's provider to TCP; auto leaves the MPI's own choice."""

    name = "mpiexec"
    controllers = ("mpi",)
    controller_note = "hydra starts the ranks"
    transports = ("auto", "tcp")
    transport_note = "MPICH and Intel MPI choose among fabrics by their own variables; tcp pins libfabric/UCX to TCP"
    transport_variables = {"tcp": _TCP}
    version_command = ("mpiexec", "--version")
    mpi_flavours = ("MPICH", "Intel MPI")
    mpi_name = "hydra (MPICH, Intel MPI)"

    def command(self, spec: RunSpec, ctx: LaunchContext) -> list[str]:
        self.check_controller(spec.controller)
        self.check_transport(spec.transport)
        argv = ["mpiexec", "-n", str(spec.np), "-ppn", str(spec.ranks_per_node), "-hosts",
                ",".join(run_hosts(spec, ctx.hosts))]
        bootstrap = SCHEDULERS[ctx.scheduler].hydra_bootstrap if ctx.scheduler else None
        if ssh_options(ctx):  # hydra runs one executable as its ssh, with no arguments of ours: a wrapper
            argv = ["env", f"{SSH_ARGS}={shlex.join(ssh_options(ctx))}", *argv, "-bootstrap", "ssh",
                    "-bootstrap-exec", str(Path(ctx.python).parent / "hvdbench-ssh")]
        elif bootstrap:  # the job's hosts through its scheduler
            argv += ["-bootstrap", bootstrap]
        names = sorted({*always_exported(spec), *self.environment(spec, ctx.scheduler_gpus), *container_env(spec)})
        argv += ["-genvlist", ",".join(names)]
        return argv + rank_command(spec, ctx)
