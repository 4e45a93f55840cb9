"""horovodrun: Horovod's own launcher, on one box or a host list, with the Gloo or the MPI controller."""

from __future__ import annotations

from typing import Callable

from hvdbench.core.spec import RunSpec

from ..base import LaunchContext, Launcher, host_slots, rank_command, register

_MIB = 1024 * 1024


def _on(value: str) -> bool:
    return value.strip().lower() not in ("", "0", "false", "no", "off")


def _mib(value: str) -> str | None:
    return str(int(value) // _MIB) if value.isdigit() and int(value) % _MIB == 0 else None


def _in_run_dir(value: str, ctx: LaunchContext) -> str:
    """A relative file name lands in the run directory."""
    return value if value.startswith("/") else str(ctx.run_dir / value)


# Horovod knobs horovodrun has flags for: name -> the flags for a value (none where it does not fit a flag).
_HOROVODRUN_FLAGS: dict[str, Callable[[str, LaunchContext], list[str]]] = {
    "HOROVOD_FUSION_THRESHOLD": lambda v, _: ["--fusion-threshold-mb", m] if (m := _mib(v)) else [],
    "HOROVOD_CYCLE_TIME": lambda v, _: ["--cycle-time-ms", v],
    "HOROVOD_CACHE_CAPACITY": lambda v, _: ["--cache-capacity", v],
    "HOROVOD_HIERARCHICAL_ALLREDUCE":
        lambda v, _: ["--hierarchical-allreduce" if _on(v) else "--no-hierarchical-allreduce"],
    "HOROVOD_HIERARCHICAL_ALLGATHER":
        lambda v, _: ["--hierarchical-allgather" if _on(v) else "--no-hierarchical-allgather"],
    "HOROVOD_TIMELINE": lambda v, ctx: ["--timeline-filename", _in_run_dir(v, ctx)],
    "HOROVOD_TIMELINE_MARK_CYCLES": lambda v, _: ["--timeline-mark-cycles"] if _on(v) else [],
    "HOROVOD_AUTOTUNE": lambda v, _: ["--autotune"] if _on(v) else [],
    "HOROVOD_AUTOTUNE_LOG": lambda v, ctx: ["--autotune-log-file", _in_run_dir(v, ctx)],
    "HOROVOD_GLOO_IFACE": lambda v, _: ["--network-interfaces", v],
}


@register
class Horovodrun(Launcher):
    """``horovodrun -np N -H host:slots --gloo|--mpi [knob flags] python script ...``; Horovod knobs
    that horovodrun has flags for become flags (the rest reach the ranks through the environment)."""

    name = "horovodrun"
    reaches_hosts_by_ssh = True  # it checks ssh to every remote host and starts Gloo's workers through it
    transport_note = "with --mpi it passes Open MPI its own flags, ob1 over TCP; use launcher mpirun to choose"

    def command(self, spec: RunSpec, ctx: LaunchContext) -> list[str]:
        self.check_controller(spec.controller)
        self.check_transport(spec.transport)
        argv = ["horovodrun", "-np", str(spec.np), "-H", host_slots(spec, ctx.hosts), f"--{spec.controller}"]
        for name, value in spec.env:
            if name in _HOROVODRUN_FLAGS:
                argv += _HOROVODRUN_FLAGS[name](value, ctx)
        if ctx.ssh_port:
            argv += ["--ssh-port", str(ctx.ssh_port)]
        if ctx.ssh_identity_file:
            argv += ["--ssh-identity-file", str(ctx.ssh_identity_file)]
        return argv + rank_command(spec, ctx)
