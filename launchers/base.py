"""The launcher interface and its registry: a launcher turns a RunSpec into an argv, nothing more.

What a launcher can do is an attribute of its class, asked by the sweep, the plan, the executors and
the command line, never inferred from its name. A new launcher is one module in ``launchers/builtin/``
(the package loads every module there when ``hvdbench.launchers`` is imported) plus its row in the
golden-argv test.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Sequence, TypeVar

from hvdbench.core.catalog import get_benchmark
from hvdbench.core import bind as binder
from hvdbench.core.environment import parse_mpi_version
from hvdbench.core.errors import UsageError
from hvdbench.core.gpu_choice import PLACEMENT_VARIABLE
from hvdbench.core.spec import CONTROLLERS, HOROVOD_CONTROLLERS, RunSpec

from hvdbench.core.containers import runtime

# Exported to every rank besides the spec's own knobs, so remote ranks find the same interpreter (a rank in an image:
# PATH alone, to find its runtime; the image has its own Python and libraries: core/containers.HOST_ONLY).
ALWAYS_EXPORTED = ("PATH", "LD_LIBRARY_PATH", "PYTHONPATH")


def always_exported(spec: RunSpec) -> tuple[str, ...]:
    """The variables every rank gets from the launching host (ALWAYS_EXPORTED; PATH alone for a run in an image)."""
    return ("PATH",) if spec.container is not None else ALWAYS_EXPORTED
# how srun wires MPI ranks inside a SLURM job (LaunchContext.pmi): the plugin names `srun --mpi=list` shows on
# clusters (PMIx by its generic name or a version, PMI-2, HPE Cray's)
PMI_PLUGINS = ("pmix", "pmix_v2", "pmix_v3", "pmix_v4", "pmix_v5", "pmi2", "cray_shasta")
# Open MPI's MCA parameters of each transport but auto (TRANSPORTS): -mca flags for mpirun, OMPI_MCA_* elsewhere.
# tcp: ob1 over TCP between nodes and shared memory within, named outright: an exclusion such as Horovod's own
# ``btl ^openib`` replaces the site's list (Debian's ``^uct,openib,ofi``) and so lets the OFI transport carry the
# traffic on a fabric. ``vader`` is Open MPI 4's shared memory (5 keeps the name as an alias of ``sm``).
OPEN_MPI_TRANSPORT = {"ucx": (("pml", "ucx"), ("osc", "ucx")), "tcp": (("pml", "ob1"), ("btl", "self,vader,tcp"))}


@dataclass(frozen=True)
class LaunchContext:
    """Where a command runs: the interpreter for the ranks, the run directory, the hosts, how to reach
    them (ssh port and key, for horovodrun and mpirun; or ``scheduler``, the job's scheduler whose hosts they
    are, SCHEDULERS' name), under SLURM srun's PMI plugin, and whether the
    scheduler chose the GPUs (its CUDA_VISIBLE_DEVICES stands; the placement travels as HVDBENCH_DEVICES);
    ``root`` is the results folder, mounted into the run's container (its spec's) where it has one."""

    python: str
    run_dir: Path
    hosts: tuple[str, ...] = ("localhost",)
    ssh_port: int | None = None
    ssh_identity_file: Path | None = None
    pmi: str = "pmix"
    scheduler_gpus: bool = False
    scheduler: str | None = None

    @property
    def root(self) -> Path:
        """The results folder: the run directory's parent, mounted into a container at its own path."""
        return self.run_dir.parent


class Launcher(ABC):
    """Builds the command line of one run; building is pure, running is the executor's job.

    Capabilities (class attributes), asked everywhere instead of the launcher's name:
    ``controllers``: the Horovod controllers it starts, its default first; ``controller_note``: why
    it starts only those; ``needs_hosts``: a run over several nodes needs a host list (else the
    scheduler places the ranks); ``task_per_rank``: inside a SLURM job each task is one rank (else the
    job's first task starts every rank over the allocation's hosts); ``transports``: the MPI
    transports (TRANSPORTS) it can select, ``transport_note`` why only those, ``transport_variables``
    the variables each sets (a launcher with flags for them sets none); ``version_command``: the argv
    whose output tells which MPI its tool is, one of ``mpi_flavours`` (core/environment.py's names;
    ``mpi_name`` in messages), judged by ``flavour_problem`` before any run starts; ``starts_horovod``: its ranks
    meet through Horovod (else through torch.distributed alone: PyTorch workloads with an exchange of their own);
    ``reaches_hosts_by_ssh``: it starts remote processes with ssh (in a SLURM job, ssh through srun: srun_ssh.py);
    ``srun_across_nodes``: over several nodes it starts its processes as srun steps (SLURM jobs only)."""

    name: ClassVar[str]
    controllers: ClassVar[tuple[str, ...]] = HOROVOD_CONTROLLERS
    starts_horovod: ClassVar[bool] = True
    controller_note: ClassVar[str] = ""
    needs_hosts: ClassVar[bool] = True
    task_per_rank: ClassVar[bool] = False
    transports: ClassVar[tuple[str, ...]] = ("auto",)
    transport_note: ClassVar[str] = ""
    transport_variables: ClassVar[dict[str, tuple[tuple[str, str], ...]]] = {}
    version_command: ClassVar[tuple[str, ...]] = ()
    reaches_hosts_by_ssh: ClassVar[bool] = False  # starts its remote processes with ssh (in a SLURM job: srun's)
    srun_across_nodes: ClassVar[bool] = False  # over several nodes its processes start as srun steps
    mpi_flavours: ClassVar[tuple[str, ...]] = ()
    mpi_name: ClassVar[str] = ""

    @abstractmethod
    def command(self, spec: RunSpec, ctx: LaunchContext) -> list[str]:
        """The argv that starts every rank of spec."""

    def environment(self, spec: RunSpec, scheduler_gpus: bool = False) -> dict[str, str]:
        """Variables the command needs on top of the caller's: the spec's knobs and its GPUs (the
        placement's node-physical ids; made the only visible ones unless a scheduler chose the GPUs)."""
        env = spec.env_dict
        if spec.devices is not None:
            ids = ",".join(str(d) for d in spec.devices)
            env[PLACEMENT_VARIABLE] = ids
            if not scheduler_gpus:
                env["CUDA_VISIBLE_DEVICES"] = ids
        env.update(self.transport_variables.get(spec.transport or "auto", ()))
        return env

    @classmethod
    def flavour_problem(cls, version_output: str) -> str | None:
        """Why the tool that ``version_command`` asked is not the MPI this launcher's syntax is for, naming
        the launcher whose it is (None: it is, or the launcher asks no MPI)."""
        if not cls.version_command:
            return None
        found, tool = parse_mpi_version(version_output)["implementation"], cls.version_command[0]
        if found in cls.mpi_flavours:
            return None
        if found is None:
            first = next((line.strip() for line in version_output.splitlines() if line.strip()), "nothing")
            return f"{tool} on PATH is not {cls.mpi_name}: it says {first[:80]!r}"
        instead = [other.name for other in _REGISTRY.values() if found in other.mpi_flavours]
        return f"{tool} on PATH is {found}, not {cls.mpi_name}" + (f": use launcher {instead[0]}" if instead else "")

    @classmethod
    def check_transport(cls, transport: str | None) -> None:
        """A UsageError for a transport this launcher cannot select."""
        if (transport or "auto") not in cls.transports:
            why = f" ({cls.transport_note})" if cls.transport_note else ""
            raise UsageError(f"launcher {cls.name} selects transport {' or '.join(cls.transports)} only{why}, "
                             f"not {transport!r}")

    @classmethod
    def controllers_text(cls) -> str:
        """What the launcher starts, for messages: ``runs Horovod's mpi controller only (why)``."""
        only = " only" if len(cls.controllers) == 1 else ""
        why = f" ({cls.controller_note})" if cls.controller_note else ""
        return f"runs Horovod's {' or '.join(cls.controllers)} controller{only}{why}"

    def check_controller(self, controller: str) -> None:
        """A UsageError for a controller this launcher does not start."""
        if controller not in self.controllers:
            raise UsageError(f"launcher {self.name} {self.controllers_text()}, not {controller!r}; "
                             f"use controller {self.controllers[0]}")


def rank_command(spec: RunSpec, ctx: LaunchContext) -> list[str]:
    """What each rank runs: the benchmark script, its arguments and where to log; behind the CPU binder
    when the spec binds each local rank to its GPU's CPUs. In a container, the image's interpreter runs the
    image's hvdbench (the script as a module: no path of this checkout), inside the runtime's command."""
    benchmark = get_benchmark(spec.benchmark)
    bind = ["-m", binder.__name__, ";".join(spec.cpus), "--"] if spec.cpus else []
    tail = [*spec.args, "--log-dir", str(ctx.run_dir)]
    container = spec.container
    if container is None:
        return [ctx.python, *bind, str(benchmark.path), *tail]
    rt = runtime(container.runtime)
    problem = rt.launcher_problem([spec.launcher])
    if problem:
        raise UsageError(problem)
    return rt.wrap(container, ctx.root, [container.python, *bind, "-m", benchmark.module, *tail], not on_cpu(spec))


def container_env(spec: RunSpec) -> tuple[str, ...]:
    """The variables the user named to pass into the image (--container-env): an MPI launcher exports them to every
    rank's host like the run's knobs (the image's runtime passes the host's environment in)."""
    return spec.container_env or ()


def on_cpu(spec: RunSpec) -> bool:
    """Whether the benchmark is told to run on the CPU (``--device cpu``): no GPU to hand into a container."""
    args = list(spec.args)
    return "--device=cpu" in args or any(a == "--device" and b == "cpu" for a, b in zip(args, args[1:]))


def container_flags(spec: RunSpec, ctx: LaunchContext) -> list[str]:
    """srun's flags that put its tasks in the run's image, where the runtime is srun's plugin (pyxis)."""
    container = spec.container
    if container is None:
        return []
    return runtime(container.runtime).flags(container, ctx.root, [name for name, _ in spec.env])


def run_hosts(spec: RunSpec, hosts: Sequence[str]) -> list[str]:
    """The hosts of a run: the first spec.nodes of ``hosts`` (the spec's own host where it is pinned to one);
    fewer hosts than nodes is an error."""
    if spec.host is not None:
        return [spec.host]
    if len(hosts) < spec.nodes:
        raise UsageError(f"run {spec.id} needs {spec.nodes} node(s) but {len(hosts)} host(s) were given")
    return list(hosts[: spec.nodes])


def host_slots(spec: RunSpec, hosts: Sequence[str]) -> str:
    """``host:slots,...`` for the run's hosts (``run_hosts``)."""
    return ",".join(f"{host}:{spec.ranks_per_node}" for host in run_hosts(spec, hosts))


def ssh_options(ctx: LaunchContext) -> list[str]:
    """ssh's own flags for the port and key, when the hosts need them."""
    out = ["-p", str(ctx.ssh_port)] if ctx.ssh_port else []
    return out + (["-i", str(ctx.ssh_identity_file)] if ctx.ssh_identity_file else [])


_REGISTRY: dict[str, type[Launcher]] = {}
L = TypeVar("L", bound=type[Launcher])


def register(cls: L) -> L:
    """Class decorator: make a launcher available by its name."""
    _REGISTRY[cls.name] = cls
    return cls


def launcher_class(name: str) -> type[Launcher]:
    """A launcher's class by name (its capabilities); an unknown name is a UsageError listing the known ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UsageError(f"unknown launcher {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def get_launcher(name: str) -> Launcher:
    """A launcher by name; an unknown name is a UsageError listing the known ones."""
    return launcher_class(name)()


def launcher_names() -> list[str]:
    """Names of every registered launcher."""
    return sorted(_REGISTRY)


def default_controllers(launchers: Sequence[str]) -> dict[str, str]:
    """Each launcher's controller when none is named: the first one every listed launcher starts (so
    launchers compared in one sweep run the same controller), else each launcher's own default."""
    classes = [launcher_class(name) for name in launchers]
    common = [c for c in CONTROLLERS if all(c in cls.controllers for cls in classes)]
    return {cls.name: common[0] if common else cls.controllers[0] for cls in classes}
