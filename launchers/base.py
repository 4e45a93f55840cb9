"""The launcher interface and its registry: a launcher turns a RunSpec into an argv, nothing more."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path
from typing import ClassVar, Sequence, TypeVar

from hvdbench.suite.catalog import get_benchmark
from hvdbench.suite.errors import UsageError
from hvdbench.suite.spec import RunSpec


@dataclass(frozen=True)
class LaunchContext:
    """Where a command runs: the interpreter for the ranks, the run directory, the hosts, how to reach
    them (ssh port and key, for horovodrun and mpirun) and, under SLURM, srun's PMI plugin."""

    python: str
    run_dir: Path
    hosts: tuple[str, ...] = ("localhost",)
    ssh_port: int | None = None
    ssh_identity_file: Path | None = None
    pmi: str = "pmix"


class Launcher(ABC):
    """Builds the command line of one run; building is pure, running is the executor's job."""

    name: ClassVar[str]

    @abstractmethod
    def command(self, spec: RunSpec, ctx: LaunchContext) -> list[str]:
        """The argv that starts every rank of spec."""

    def environment(self, spec: RunSpec) -> dict[str, str]:
        """Variables the command needs on top of the caller's: the spec's knobs and its GPUs."""
        env = spec.env_dict
        if spec.devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(d) for d in spec.devices)
        return env


def rank_command(spec: RunSpec, ctx: LaunchContext) -> list[str]:
    """What each rank runs: the benchmark script, its arguments and where to log; behind the CPU binder
    when the spec binds each local rank to its GPU's CPUs."""
    script = get_benchmark(spec.benchmark).path
    bind = ["-m", "hvdbench.suite.bind", ";".join(spec.cpus), "--"] if spec.cpus else []
    return [ctx.python, *bind, str(script), *spec.args, "--log-dir", str(ctx.run_dir)]


def host_slots(spec: RunSpec, hosts: Sequence[str]) -> str:
    """``host:slots,...`` for the first spec.nodes hosts; fewer hosts than nodes is an error."""
    if len(hosts) < spec.nodes:
        raise UsageError(f"run {spec.id} needs {spec.nodes} node(s) but {len(hosts)} host(s) were given")
    return ",".join(f"{host}:{spec.ranks_per_node}" for host in hosts[: spec.nodes])


_REGISTRY: dict[str, type[Launcher]] = {}
L = TypeVar("L", bound=type[Launcher])


def register(cls: L) -> L:
    """Class decorator: make a launcher available by its name."""
    _REGISTRY[cls.name] = cls
    return cls


def _builtins() -> None:
    """Register the launchers that ship with hvdbench (their modules import this one)."""
    import_module("hvdbench.launchers.mpi")
    import_module("hvdbench.launchers.srun")


def get_launcher(name: str) -> Launcher:
    """A launcher by name; an unknown name is a UsageError listing the known ones."""
    _builtins()
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise UsageError(f"unknown launcher {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def launcher_names() -> list[str]:
    """Names of every registered launcher."""
    _builtins()
    return sorted(_REGISTRY)


