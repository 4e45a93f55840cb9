"""One road from the command line to RunSpecs and back out: a sweep (a file, or one built in memory for
``hvdbench run``) is planned into RunSpecs; one function prints what each would do through the executor
that would do it (here, or as a SLURM job); runs are executed here or submitted."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, Protocol, Sequence

from hvdbench.suite.catalog import get_benchmark
from hvdbench.suite.errors import UsageError
from hvdbench.suite.spec import RunSpec

from .base import default_controllers, get_launcher
from .local import LocalExecutor
from .plan import Plan, plan
from .sweep import Sweep, Workload, load_sweep
from .topology import Topology, local_topology, read_topology_file

DEFAULT_SWEEP = Path(__file__).with_name("sweeps") / "demo.yaml"


class Executor(Protocol):
    """What the plan printer needs of an executor: what running one spec would do."""

    def describe(self, spec: RunSpec) -> str: ...


def benchmark_sweep(benchmark: str, args: Sequence[str], *, np: Sequence[int], launcher: str,
                    controller: str | None, repeats: int, system: str, timeout: float,
                    devices: Sequence[int] | None, topology: Path | None) -> Sweep:
    """The sweep of ``hvdbench run``: one benchmark with its arguments at each rank count on this node, on
    the first N of ``devices`` where given; no baseline added (the rank counts are the user's)."""
    get_benchmark(benchmark).check(args)  # a bad benchmark flag fails here, in the benchmark's own words
    chosen = controller or default_controllers([launcher])[launcher]
    get_launcher(launcher).check_controller(chosen)
    if devices is not None:
        too_many = [n for n in np if n > len(devices)]
        if too_many:
            raise UsageError(f"--np {','.join(map(str, too_many))} needs more GPUs than --devices "
                             f"{','.join(map(str, devices))} gives")
    return Sweep(path=Path("hvdbench run"), name="run", system=system, launchers=((launcher, chosen),),
                 repeats=repeats, timeout=timeout, workloads=(Workload(benchmark, tuple(args)),), np=tuple(np),
                 placements=(tuple(devices),) if devices is not None else (), baseline=False, topology=topology)


def sweep_topology(sweep: Sweep) -> Topology | None:
    """The node topology a sweep's placements are planned on: its saved file, else this node's."""
    if sweep.topology is not None:
        return read_topology_file(sweep.topology)
    return local_topology() if sweep.placements else None


def load(file: Path, output: Path | None) -> tuple[Sweep, Plan, Path]:
    """A sweep file, its plan and its results root (``output``, else the file's, else results/<name>)."""
    sweep = load_sweep(file)
    return sweep, plan(sweep, sweep_topology(sweep)), output or sweep.output or Path("results") / sweep.name


def describe_plan(planned: Plan, executor: Executor, root: Path) -> Iterator[str]:
    """Every run of a plan with what its executor would do, the combinations left out, and a total."""
    for spec in planned.specs:
        mark = " (baseline)" if spec.id in planned.baselines else ""
        yield f"{spec.id}{mark}: {executor.describe(spec)}"
    for note in planned.skipped:
        yield f"skipped: {note}"
    yield (f"{len(planned.specs)} run(s), {len(planned.baselines)} of them 1-GPU baselines added for speedup; "
           f"results in {root}")


def local_executor(sweep: Sweep, root: Path, *, resume: bool, timeout: float | None = None,
                   hosts: tuple[str, ...] | None = None) -> LocalExecutor:
    """The executor of a sweep on this machine (or inside an allocation, with its hosts)."""
    return LocalExecutor(root, timeout=timeout or sweep.timeout, resume=resume, hosts=hosts or sweep.hosts,
                         ssh_port=sweep.ssh_port, ssh_identity_file=sweep.ssh_identity_file, pmi=sweep.slurm.mpi)


def fits_allocation(spec: RunSpec) -> bool:
    """Whether a run fits the SLURM allocation this process runs in (nodes, and tasks where SLURM says)."""
    nodes = int(os.environ.get("SLURM_JOB_NUM_NODES") or os.environ.get("SLURM_NNODES") or 1)
    tasks = os.environ.get("SLURM_NTASKS")
    return spec.nodes <= nodes and (tasks is None or not tasks.isdigit() or spec.np <= int(tasks))
