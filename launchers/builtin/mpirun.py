"""Open MPI's mpirun, on one box or a host list: Horovod's MPI controller."""

from __future__ import annotations

import re

from hvdbench.core.spec import RunSpec

from ..base import (always_exported, OPEN_MPI_TRANSPORT, LaunchContext, Launcher, container_env, host_slots,
                    rank_command, register, ssh_options)

_PLAIN_IFACES = re.compile(r"^[\w.:-]+(,[\w.:-]+)*$")


@register
class Mpirun(Launcher):
    """Open MPI's mpirun; the transport as -mca flags (auto: none, Open MPI picks, UCX where built in);
    every knob exported with ``-x``; the TCP interfaces of NCCL_SOCKET_IFNAME (plain names) for MPI too;
    ranks bound by the CPU binder, so mpirun's own binding stays off. Inside a SLURM allocation mpirun
    starts its daemons through srun on the hosts it is given."""

    name = "mpirun"
    controllers = ("mpi",)
    controller_note = "Open MPI starts the ranks"
    transports = ("auto", "ucx", "tcp")
    version_command = ("mpirun", "--version")
    mpi_flavours = ("Open MPI",)
    mpi_name = "Open MPI"

    def command(self, spec: RunSpec, ctx: LaunchContext) -> list[str]:
        self.check_controller(spec.controller)
        self.check_transport(spec.transport)
        argv = ["mpirun", "-np", str(spec.np), "-H", host_slots(spec, ctx.hosts), "-bind-to", "none", "-map-by", "slot"]
        for name, value in OPEN_MPI_TRANSPORT.get(spec.transport or "auto", ()):
            argv += ["-mca", name, value]
        iface = spec.env_dict.get("NCCL_SOCKET_IFNAME", "")
        if _PLAIN_IFACES.match(iface):
            argv += ["-mca", "btl_tcp_if_include", iface, "-mca", "oob_tcp_if_include", iface]
        if ssh_options(ctx):
            argv += ["-mca", "plm_rsh_args", " ".join(ssh_options(ctx))]
        for name in sorted({*always_exported(spec), *self.environment(spec, ctx.scheduler_gpus), *container_env(spec)}):
            argv += ["-x", name]
        return argv + rank_command(spec, ctx)
