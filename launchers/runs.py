"""One road from the command line to RunSpecs and back out: a sweep (a file, or one built in memory for
``hvdbench run``) is planned into RunSpecs; one function prints what each would do through the executor
that would do it (here, or as a SLURM job); runs are executed here or submitted."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Protocol, Sequence

from hvdbench.core.catalog import get_benchmark
from hvdbench.core.containers import IMAGE_ID_VARIABLE, Container, image_id, preflight, runtime
from hvdbench.core.environment import parse_mpi_version
from hvdbench.core.errors import UsageError
from hvdbench.core.job_env import job_env
from hvdbench.core.spec import RunSpec

from .base import default_controllers, get_launcher, launcher_class, on_cpu
from .local import LocalExecutor
from .plan import Plan, plan
from .schedulers import scheduler_of
from .job_shape import gpus_needed
from .sweep import Sweep, Workload, load_sweep, sweep_warnings, until_decided_problem
from hvdbench.core.node_topology import local_topology
from hvdbench.core.topology import Topology, read_topology_file

DEFAULT_SWEEP = Path(__file__).with_name("sweeps") / "demo.yaml"


class Executor(Protocol):
    """What the plan printer needs of an executor: what running one spec would do, how long a run may last, the
    GPUs a node its job is billed."""

    def describe(self, spec: RunSpec) -> str: ...

    def limit_s(self) -> float | None: ...

    def billed_gpus(self, spec: RunSpec) -> int: ...


def benchmark_sweep(benchmark: str, args: Sequence[str], *, np: Sequence[int], launcher: str,
                    controller: str | None, repeats: int, system: str, timeout: float,
                    devices: Sequence[int] | None, topology: Path | None, transport: str = "auto",
                    retries: int = 0) -> Sweep:
    """The sweep of ``hvdbench run``: one benchmark with its arguments at each rank count on this node, on
    the first N of ``devices`` where given; no baseline added (the rank counts are the user's)."""
    get_benchmark(benchmark).check(args)  # a bad benchmark flag fails here, in the benchmark's own words
    chosen = controller or default_controllers([launcher])[launcher]
    get_launcher(launcher).check_controller(chosen)
    get_launcher(launcher).check_transport(transport)
    if devices is not None:
        too_many = [n for n in np if n > len(devices)]
        if too_many:
            raise UsageError(f"--np {','.join(map(str, too_many))} needs more GPUs than --devices "
                             f"{','.join(map(str, devices))} gives")
    return Sweep(path=Path("hvdbench run"), name="run", system=system, launchers=((launcher, chosen),),
                 repeats=repeats, timeout=timeout, transport=transport, retries=retries,
                 workloads=(Workload(benchmark, tuple(args)),), np=tuple(np),
                 placements=(tuple(devices),) if devices is not None else (), baseline=False, topology=topology)


def sweep_topology(sweep: Sweep) -> Topology | None:
    """The node topology a sweep's placements are planned on: its saved file, else this node's (none for
    CPU slots)."""
    if sweep.topology is not None:
        return read_topology_file(sweep.topology)
    return local_topology() if sweep.placements and not sweep.cpu_slots else None


# What `hvdbench screen` runs when given no benchmark: long enough for a steady interval, short per GPU.
SCREEN_GPU = ("imagenet", ("--model", "resnet50", "--batch-size", "64", "--precision", "amp", "--steps", "60",
                           "--warmup-steps", "10", "--telemetry-interval", "0.5"))
SCREEN_CPU = ("cifar10", ("--model", "resnet20", "--batch-size", "16", "--steps", "30", "--warmup-steps", "3",
                          "--device", "cpu", "--telemetry-interval", "0.5"))


def _overridden(defaults: Sequence[str], given: Sequence[str]) -> tuple[str, ...]:
    """``defaults`` (``--flag value`` pairs) without the flags ``given`` names, then ``given``: a flag the
    user gives replaces the default's, never doubles it."""
    named = {arg.split("=", 1)[0] for arg in given if arg.startswith("--")}
    pairs = zip(defaults[::2], defaults[1::2])
    return tuple(item for flag, value in pairs if flag not in named for item in (flag, value)) + tuple(given)


def screen_sweep(benchmark: str | None, args: Sequence[str], *, topology: Path | None, cpu_slots: int | None,
                 pairs: bool, launcher: str, system: str, timeout: float) -> Sweep:
    """The sweep of ``hvdbench screen``: the benchmark on every GPU of the node alone, then (``pairs``) on
    one pair of GPUs per link class; on a node without GPUs, on ``cpu_slots`` CPU slots alone."""
    default = SCREEN_CPU if cpu_slots else SCREEN_GPU
    name, bench_args = (benchmark, tuple(args)) if benchmark else (default[0], _overridden(default[1], args))
    if cpu_slots and "--threads" not in bench_args:
        cores = len(os.sched_getaffinity(0)) // cpu_slots
        if cores < 1:
            raise UsageError(f"--cpu-slots {cpu_slots}: this machine has {len(os.sched_getaffinity(0))} CPU(s)")
        bench_args += ("--threads", str(cores))
    get_benchmark(name).check(bench_args)
    return Sweep(path=Path("hvdbench screen"), name="screen", system=system,
                 launchers=((launcher, default_controllers([launcher])[launcher]),), timeout=timeout,
                 workloads=(Workload(name, bench_args),), np=(1,) if cpu_slots or not pairs else (1, 2),
                 placements=("each",), baseline=False, topology=topology, cpu_slots=cpu_slots)


SCREEN_MODES = {"gpu": "each GPU (or CPU slot) alone, one after another, then one pair per link class",
                "node": "every GPU of the node at once, each training alone (--independent), then all together",
                "both": "gpu, then node"}


def screen_plan(sweep: Sweep, topo: Topology | None, mode: str) -> Plan:
    """What ``hvdbench screen --mode`` runs on a node: ``gpu`` the sweep as built; ``node`` every GPU (or CPU slot)
    of the node at once, each rank training alone, then all ranks together, both under the node's full power
    and heat; ``both`` the one, then the other."""
    if mode not in SCREEN_MODES:
        raise UsageError(f"--mode {mode}: valid: {', '.join(SCREEN_MODES)}")
    plans = [plan(sweep, topo)] if mode in ("gpu", "both") else []
    if mode in ("node", "both"):
        count = sweep.cpu_slots or (len(topo.gpus) if topo is not None else 0)
        if count < 2:
            raise UsageError(f"--mode {mode}: a node of {count} GPU(s) or slot(s) has nothing to load at once; "
                             "--mode gpu screens it (on a node without GPUs, --cpu-slots 2 or more)")
        plans.append(plan(replace(sweep, np=(count,), placements=("all",), independent=(True, False)), topo))
    return Plan(tuple(s for p in plans for s in p.specs), frozenset(b for p in plans for b in p.baselines),
                tuple(n for p in plans for n in p.skipped))


def pin_to_hosts(planned: Plan, hosts: Sequence[str]) -> Plan:
    """The plan run on each host in turn (one node each): how a cluster's every node is screened."""
    if len(hosts) < 2:
        return planned
    return Plan(tuple(replace(spec, host=host) for host in hosts for spec in planned.specs), planned.baselines,
                planned.skipped)


def here_gpus() -> int | None:
    """The GPUs this node shows a process started here (NVML, narrowed by CUDA_VISIBLE_DEVICES), or None."""
    from hvdbench.core.gpu import visible_gpu_count

    return visible_gpu_count()


def load(file: Path, output: Path | None, hosts: Sequence[str] | None = None, here: bool = False,
         adjust: Callable[[Sweep], Sweep] = lambda sweep: sweep, scheduled: bool = False) -> tuple[Sweep, Plan, Path]:
    """A sweep file, its plan and its results root (``output``, else the file's, else results/<name>);
    ``hosts`` (an allocation's) replace the file's; ``here``: the runs go on this node, planned to its GPUs;
    ``adjust``: what the command line changes in the file's sweep (its container) before it is planned;
    ``scheduled``: each run becomes a job whose first task starts every rank over the job's own hosts."""
    sweep = adjust(load_sweep(file))
    stray = until_decided_problem(sweep)
    if stray:
        raise UsageError(f"{file}: {stray}")
    if scheduled and sweep.until_decided:
        raise UsageError(f"{file}: until_decided: each round's verdict is looked at where the runs are started "
                         "(hvdbench sweep, or run); hvdbench submit runs a fixed plan: leave until_decided out, or "
                         "run the file with hvdbench sweep in an allocation")
    for line in sweep_warnings(sweep):
        print(f"hvdbench: warning: {line}", file=sys.stderr)
    if hosts:
        sweep = replace(sweep, hosts=tuple(hosts))
    planned = plan(sweep, sweep_topology(sweep), here_gpus() if here else None, scheduled=scheduled)
    return sweep, planned, output or sweep.output or Path("results") / sweep.name


def describe_plan(planned: Plan, executor: Executor, root: Path) -> Iterator[str]:
    """Every run of a plan with what its executor would do (or every job, where its executor puts several runs in
    one: a screen's job a node), the combinations left out, and a total."""
    jobs = getattr(executor, "describe_jobs", None)
    shown = jobs(planned.specs) if jobs is not None else None
    for spec in planned.specs if shown is None else ():
        mark = " (baseline)" if spec.id in planned.baselines else ""
        yield f"{spec.id}{mark}: {executor.describe(spec)}"
    yield from shown or ()
    for note in planned.skipped:
        yield f"skipped: {note}"
    yield (f"{len(planned.specs)} run(s), {len(planned.baselines)} of them 1-GPU baselines added for speedup; "
           f"results in {root}{node_hours(planned, executor)}")


def node_hours(planned: Plan, executor: Executor) -> str:
    """The most node-hours a plan holds, and GPU-hours as allocations are billed (an exclusive job every GPU of its
    nodes) where its runs use GPUs, as the dry run's total says them; empty where no run has a limit."""
    limit = executor.limit_s()
    if limit is None or not planned.specs:
        return ""
    hours = sum(spec.nodes for spec in planned.specs) * limit / 3600
    on_gpus = [spec for spec in planned.specs if not on_cpu(spec)]
    billed = {spec.id: executor.billed_gpus(spec) for spec in on_gpus}
    gpus = sum(spec.nodes * billed[spec.id] for spec in on_gpus) * limit / 3600
    whole = any(billed[spec.id] > gpus_needed(spec) for spec in on_gpus)
    said = f", GPU-hours: at most {gpus:,.1f}" + (" (exclusive jobs billed every GPU of their nodes)" if whole else "")
    return (f"; node-hours: at most {hours:,.1f}{said if gpus else ''} (every run's nodes for its whole "
            f"{limit / 60:g}-minute limit; a run that ends sooner gives its node back)")


def local_executor(sweep: Sweep, root: Path, *, resume: bool, timeout: float | None = None,
                   hosts: tuple[str, ...] | None = None, retries: int | None = None,
                   environment: Mapping[str, str] | None = None) -> LocalExecutor:
    """The executor of a sweep on this machine (or inside an allocation, with its hosts)."""
    return LocalExecutor(root, timeout=timeout or sweep.timeout, resume=resume, hosts=hosts or sweep.hosts,
                         ssh_port=sweep.ssh_port, ssh_identity_file=sweep.ssh_identity_file,
                         pmi=scheduler_of(sweep).pmi() or "pmix",
                         retries=sweep.retries if retries is None else retries, environment=environment)


@dataclass(frozen=True)
class Prepared:
    """What the checks before running here found: the environment the ranks get besides their own (the image's id,
    for their record), and warnings to say (one line each)."""

    environment: dict[str, str]
    warnings: list[str]


def prepare_here(sweep: Sweep, specs: Sequence[RunSpec], root: Path) -> Prepared:
    """The one recipe every command that runs things here follows before the first run (run, sweep, screen, fit):
    each launcher's tool is the MPI its syntax is for; the container's runtime, image and mounts can start the ranks;
    the host's MPI against the image's (a warning); the image's id as its runtime names it."""
    launchers = sorted({spec.launcher for spec in specs})
    check_launchers(launchers)
    if sweep.container is None:
        return Prepared({}, [])
    preflight(sweep.container, root, launchers, gpu=not all(on_cpu(spec) for spec in specs))
    found = image_id(sweep.container)
    return Prepared({IMAGE_ID_VARIABLE: found} if found else {}, mpi_mismatch(sweep.container, launchers, root))


def check_launchers(names: Iterable[str], run: Callable[..., Any] = subprocess.run) -> None:
    """Ask each launcher's tool which MPI it is (``mpirun --version``...) and refuse, in one line, one whose
    syntax does not apply; a tool not on PATH here is left to the node that runs it."""
    for name in sorted(set(names)):
        launcher = launcher_class(name)
        if not launcher.version_command or shutil.which(launcher.version_command[0]) is None:
            continue
        try:
            out = run(list(launcher.version_command), capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as exc:
            raise UsageError(f"launcher {name}: {' '.join(launcher.version_command)} failed ({exc})") from None
        problem = launcher.flavour_problem(f"{out.stdout}\n{out.stderr}")
        if problem:
            raise UsageError(f"launcher {name}: {problem}")


def mpi_mismatch(container: Container, launchers: Iterable[str], root: Path,
                 run: Callable[..., Any] = subprocess.run) -> list[str]:
    """Where MPI starts ranks from outside the image (the hybrid model of Apptainer, Charliecloud, podman), the
    host's MPI and the image's must be one implementation at one major.minor version: a line for each launcher whose
    version command (``mpirun --version``) answers differently here and inside the image, or not at all inside."""
    rt = runtime(container.runtime)
    said = []
    for name in sorted(set(launchers)):
        argv = list(launcher_class(name).version_command)
        if not argv or rt.flags(container, root, ()) or shutil.which(argv[0]) is None:
            continue  # no MPI tool, a runtime whose launcher puts the tasks in the image itself, none here
        host, image = (parse_mpi_version(_output(run, cmd)) for cmd in (argv, rt.wrap(container, root, argv, False)))
        if host["implementation"] is None:
            continue
        if image["implementation"] is None:
            said.append(f"launcher {name}: the image {container.image} answers no {argv[0]} --version: with MPI "
                        f"outside the image the ranks inside need the same MPI ({host['implementation']} "
                        f"{host['version']} here)")
        elif (host["implementation"], _minor(host["version"])) != (image["implementation"], _minor(image["version"])):
            said.append(f"launcher {name}: the host's MPI is {host['implementation']} {host['version']}, the image's "
                        f"{image['implementation']} {image['version']}: with MPI outside the image they must be one "
                        "implementation at one major.minor version, or the ranks fail to start or wire up")
    return said


def _output(run: Callable[..., Any], argv: list[str]) -> str | None:
    try:
        done = run(argv, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{done.stdout}\n{done.stderr}" if done.returncode == 0 else None


def _minor(version: str | None) -> str:
    return ".".join(str(version or "").split(".")[:2])


def fits_allocation(spec: RunSpec) -> bool:
    """Whether a run fits the SLURM allocation this process runs in (nodes, and tasks where SLURM says)."""
    job = job_env()
    nodes, tasks = job.number("num_nodes") or 1, job.number("num_tasks")
    return spec.nodes <= nodes and (tasks is None or spec.np <= tasks)
