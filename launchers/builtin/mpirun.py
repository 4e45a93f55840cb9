"""Open MPI's mpirun, on one box or a host list: Horovod's MPI controller."""

from __future__ import annotations

import re

from hvdbench.suite.spec import RunSpec

from ..base import ALWAYS_EXPORTED, LaunchContext, Launcher, host_slots, rank_command, register, ssh_options

_PLAIN_IFACES = re.compile(r"^[\w.:-]+(,[\w.:-]+)*$")


@register
class Mpirun(Launcher):
    """Open MPI's mpirun with the flags Horovod recommends; every knob exported with ``-x``; the TCP
    interfaces of NCCL_SOCKET_IFNAME (plain names) for MPI too; ranks bound by the CPU binder, so
    mpirun's own binding stays off."""

    name = "mpirun"
    controllers = ("mpi",)
    controller_note = "Open MPI starts the ranks"

    def command(self, spec: RunSpec, ctx: LaunchContext) -> list[str]:
        self.check_controller(spec.controller)
        argv = ["mpirun", "-np", str(spec.np), "-H", host_slots(spec, ctx.hosts),
                "-bind-to", "none", "-map-by", "slot", "-mca", "pml", "ob1", "-mca", "btl", "^openib"]
        iface = spec.env_dict.get("NCCL_SOCKET_IFNAME", "")
        if _PLAIN_IFACES.match(iface):
            argv += ["-mca", "btl_tcp_if_include", iface, "-mca", "oob_tcp_if_include", iface]
        if ssh_options(ctx):
            argv += ["-mca", "plm_rsh_args", " ".join(ssh_options(ctx))]
        for name in sorted({*ALWAYS_EXPORTED, *self.environment(spec)}):
            argv += ["-x", name]
        return argv + rank_command(spec, ctx)
