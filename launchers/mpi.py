"""Launchers for one box or a host list: horovodrun (Gloo or MPI controller) and Open MPI's mpirun."""

from __future__ import annotations

from hvdbench.suite.errors import UsageError
from hvdbench.suite.spec import RunSpec

from .base import LaunchContext, Launcher, host_slots, rank_command, register

# Exported to every rank besides the spec's own knobs, so remote ranks find the same interpreter.
_ALWAYS_EXPORTED = ("PATH", "LD_LIBRARY_PATH")


@register
class Horovodrun(Launcher):
    """``horovodrun -np N -H host:slots --gloo|--mpi python script ...``."""

    name = "horovodrun"

    def command(self, spec: RunSpec, ctx: LaunchContext) -> list[str]:
        return ["horovodrun", "-np", str(spec.np), "-H", host_slots(spec, ctx.hosts),
                f"--{spec.controller}", *rank_command(spec, ctx)]


@register
class Mpirun(Launcher):
    """Open MPI's mpirun with the flags Horovod recommends; every knob exported with ``-x``."""

    name = "mpirun"

    def command(self, spec: RunSpec, ctx: LaunchContext) -> list[str]:
        if spec.controller != "mpi":
            raise UsageError(f"launcher mpirun runs Horovod's MPI controller, not {spec.controller!r}; "
                             "use controller mpi or launcher horovodrun")
        argv = ["mpirun", "-np", str(spec.np), "-H", host_slots(spec, ctx.hosts),
                "-bind-to", "none", "-map-by", "slot", "-mca", "pml", "ob1", "-mca", "btl", "^openib"]
        for name in sorted({*_ALWAYS_EXPORTED, *self.environment(spec)}):
            argv += ["-x", name]
        return argv + rank_command(spec, ctx)
