"""Sweeps whose ranks a submitted run's own tasks cannot start (pyxis: srun's ``--container-*`` flags reach only the
tasks of an srun that gets them), submitted as one batch job per shape (nodes x ranks per node) whose batch step is
the in-allocation sweep of that shape: the sbatch template's body, sized from the sweep (nodes, a task and GPU per
rank, CPUs for a rank and its loader, time for every run of the shape one after another, partition, account, QOS).
Building the script is pure; ``submit`` writes it beside the results and hands it to sbatch."""

from __future__ import annotations

import math
import re
import shlex
import shutil
import sys
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from hvdbench.core.containers import Container
from hvdbench.core.errors import LaunchError, UsageError
from hvdbench.core.spec import RunSpec, RunStatus
from hvdbench.core.tags import write_tags
from hvdbench.core.validate import inert

from .slurm_jobs import NodeShapes, job_parameters, node_shape, partition_problem, rank_cpus
from .slurm_options import SlurmOptions

SCRIPTS = "slurm-jobs"  # where the scripts go, under the results root (beside submitit's folders)
SIGNAL = "B:USR2@120"  # the batch step hears of the time limit 2 minutes ahead (the template's own)
# submitit's parameter names as sbatch's options (those a sized job carries; the rest are submitit's own)
SBATCH_NAMES = {"name": "job-name", "nodes": "nodes", "tasks_per_node": "ntasks-per-node",
                "gpus_per_node": "gpus-per-node", "gpus_per_task": "gpus-per-task", "cpus_per_task": "cpus-per-task",
                "slurm_gres": "gres", "slurm_partition": "partition", "slurm_account": "account", "slurm_qos": "qos",
                "slurm_constraint": "constraint", "slurm_exclusive": "exclusive", "mem_gb": "mem"}


@dataclass(frozen=True)
class AllocationJob:
    """One shape's job: its nodes and ranks per node, the runs its sweep step runs, its script."""

    nodes: int
    per_node: int
    runs: tuple[str, ...]
    script: str
    step: str = ""  # what its sweep starts for its first run, as the allocation's step (node1 … for its nodes)

    @property
    def shape(self) -> str:
        """How ``sweep --shape`` names it: NODESxRANKS."""
        return f"{self.nodes}x{self.per_node}"


def shape_of(spec: RunSpec) -> str:
    """A run's shape as ``--shape`` names it."""
    return f"{spec.nodes}x{spec.ranks_per_node}"


def directives(params: dict[str, Any], minutes: int) -> list[str]:
    """The ``#SBATCH`` lines of submitit's job parameters, the time limit ``minutes``."""
    lines = [f"#SBATCH --time={minutes}"]
    for key, option in SBATCH_NAMES.items():
        value = params.get(key)
        if value is None or value is False:
            continue
        if value is True:
            lines.append(f"#SBATCH --{option}")
        else:
            lines.append(f"#SBATCH --{option}={value}{'G' if key == 'mem_gb' else ''}")
    for key, value in sorted((params.get("slurm_additional_parameters") or {}).items()):
        lines.append(f"#SBATCH --{key.replace('_', '-')}" + ("" if value is True else f"={value}"))
    return lines


def container_argv(container: Container | None) -> list[str]:
    """The --container-* flags that give the in-allocation sweep the container (none: the sweep file's own)."""
    if container is None:
        return []
    out = ["--container-image", container.image, "--container-runtime", container.runtime,
           "--container-python", container.python]
    for source, dest in container.mounts:
        out += ["--container-mount", f"{source}:{dest}"]
    for name in container.env:
        out += ["--container-env", name]
    return out


def allocation_jobs(specs: Sequence[RunSpec], options: SlurmOptions, *, name: str, sweep_file: Path, root: Path,
                    command: Sequence[str], container: Container | None,
                    shape_of_nodes: NodeShapes | None = None) -> list[AllocationJob]:
    """One job per shape of ``specs``: the allocation its largest runs need, time for all its runs in turn (each
    its own limit, ``options.time_min``), its batch step ``command sweep FILE --in-allocation --shape NxG``; CPUs a
    rank from the partition's nodes where sinfo said them (``shape_of_nodes``, slurm_jobs.rank_cpus)."""
    shapes: dict[str, list[RunSpec]] = {}
    for spec in specs:
        shapes.setdefault(shape_of(spec), []).append(spec)
    jobs = []
    for shape, group in shapes.items():
        widest = max(group, key=lambda s: (s.devices is not None, len(s.devices or ())))
        params = job_parameters(options, widest, f"{name}-{shape}", shape=shape_of_nodes)
        params["cpus_per_task"] = max(job_parameters(options, s, name, shape=shape_of_nodes).get("cpus_per_task") or 1
                                      for s in group)
        cpus, why = rank_cpus(options, widest, shape_of_nodes)
        minutes = options.time_min * len(group)
        step = [*command, "sweep", str(sweep_file.resolve()), "--in-allocation", "--shape", shape, "-o",
                str(root.resolve()), "--no-report", *container_argv(container)]
        script = "\n".join([
            "#!/bin/bash",
            f"# hvdbench: the {len(group)} run(s) of shape {shape} (nodes x ranks per node) of {sweep_file.name}, one "
            "after another in this allocation, each with its own limit;",
            f"# the time asks {options.time_min} min a run. Made by hvdbench submit; resubmitting resumes.",
            f"# CPUs a rank: {cpus} ({why}).",
            *directives(params, minutes),
            f"#SBATCH --output={root.resolve() / SCRIPTS / f'{shape}-%j.out'}",
            f"#SBATCH --signal={SIGNAL}",
            "set -euo pipefail",
            *options.setup,
            f"exec {shlex.join(step)}", ""])
        jobs.append(AllocationJob(widest.nodes, widest.ranks_per_node, tuple(s.id for s in group), script,
                                  first_step(group[0], options, root)))
    return jobs


def first_step(spec: RunSpec, options: SlurmOptions, root: Path) -> str:
    """The step the allocation's sweep starts for ``spec``: its launcher's whole line over the allocation's nodes
    (node1, node2 … standing for the names SLURM gives them), the image's flags in it (pyxis: srun's own)."""
    from .base import LaunchContext, get_launcher

    hosts = tuple(f"node{i}" for i in range(1, spec.nodes + 1))
    ctx = LaunchContext(python=sys.executable, run_dir=(root / spec.id).resolve(), pmi=options.mpi, hosts=hosts,
                        scheduler="slurm")
    return shlex.join(get_launcher(spec.launcher).command(spec, ctx))


def submit(jobs: Iterable[AllocationJob], root: Path, specs: Sequence[RunSpec],
           run: Callable[..., Any] = subprocess.run) -> list[tuple[str, str]]:
    """Write each job's script under the results root, hand it to ``sbatch --parsable`` and mark its runs submitted
    with the job's id; (shape, job id) of each."""
    folder = root / SCRIPTS
    folder.mkdir(parents=True, exist_ok=True)
    by_id = {spec.id: spec for spec in specs}
    out = []
    for job in jobs:
        path = folder / f"{job.shape}.sbatch"
        path.write_text(job.script, encoding="utf-8")
        try:
            done = run(["sbatch", "--parsable", str(path)], capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:
            raise LaunchError(f"sbatch {path}: {exc}") from None
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            raise LaunchError(f"sbatch refused the job of shape {job.shape}: {said[-1] if said else done.returncode}")
        job_id = job_id_of(done.stdout)
        for run_id in job.runs:
            by_id[run_id].write(root / run_id)
            RunStatus("submitted", None, 0.0, f"job {job_id} submitted (shape {job.shape})",
                      job_id=job_id).write(root / run_id)
        out.append((job.shape, job_id))
    return out


def job_id_of(said: str) -> str:
    """The job id in what ``sbatch --parsable`` printed (``9003`` or ``9003;cluster``), or in a wrapper's chattier
    ``Submitted batch job 9003``; a LaunchError naming what it printed where no id is there (never a sentence taken
    for an id)."""
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    for line in reversed(lines):
        parsable = re.fullmatch(r"(\d+)(?:_\d+)?(?:;[\w.-]+)?", line)
        if parsable:
            return parsable.group(1)
    chatty = re.search(r"Submitted batch job (\d+)", said)
    if chatty:
        return chatty.group(1)
    raise LaunchError(f"sbatch printed no job id ({inert((lines or ['nothing'])[-1])[:120]}): the job may be queued; "
                      "check squeue before submitting again")


def job_hours(jobs: Sequence[AllocationJob], options: SlurmOptions) -> float:
    """Node-hours the jobs may hold at most (every run its whole limit)."""
    return sum(job.nodes * math.ceil(options.time_min * len(job.runs)) / 60 for job in jobs)


def job_gpu_hours(jobs: Sequence[AllocationJob], options: SlurmOptions) -> float:
    """GPU-hours the jobs may hold at most (a GPU a rank, every run its whole limit); 0 where they ask no GPU."""
    return sum(job.nodes * job.per_node * math.ceil(options.time_min * len(job.runs)) / 60 for job in jobs) \
        if options.gpus else 0.0


def submit_shapes(specs: Sequence[RunSpec], options: SlurmOptions, *, name: str, sweep_file: Path, root: Path,
                  container: Container | None, dry_run: bool, tags: Mapping[str, str] | None = None,
                  say: Callable[[str], None] = print) -> None:
    """The sweep's runs as one allocation job a shape: with ``dry_run`` each job's script said, else each
    submitted (its shape and job id said, the runs' tags written first); node- and GPU-hours beside."""
    nodes = node_shape(options.partition) if shutil.which("sinfo") else None
    jobs = allocation_jobs(specs, options, name=name, sweep_file=sweep_file, root=root,
                           command=[sys.executable, "-m", "hvdbench.cli"], container=container, shape_of_nodes=nodes)
    hours = job_hours(jobs, options)
    problem = partition_problem(specs, options)  # the dry run refuses what the submit would: every run named
    if dry_run:
        for job in jobs:
            names = ", ".join(f"node{i}" for i in range(1, job.nodes + 1))
            say(f"# {root / SCRIPTS / (job.shape + '.sbatch')}: {len(job.runs)} run(s)\n{job.script}"
                + (f"# the allocation's step runs, for its first run ({names}: its nodes as SLURM names them): "
                   f"{job.step}\n" if job.step else ""))
        gpus = job_gpu_hours(jobs, options)
        if problem:
            raise UsageError(f"the submit would refuse this plan: {problem}")
        say(f"{len(jobs)} job(s), one per shape, {len(specs)} run(s); node-hours: at most {hours:.1f}"
            + (f", GPU-hours: at most {gpus:.1f}" if gpus else ""))
        return
    if shutil.which("sbatch") is None:
        raise UsageError("SLURM submission needs sbatch on PATH: this machine has no SLURM client")
    if problem:
        raise UsageError(problem)
    write_tags(root, [spec.id for spec in specs], tags or {})
    for shape, job_id in submit(jobs, root, specs):
        say(f"shape {shape}: job {job_id}")
    say(f"submitted {len(jobs)} job(s), one per shape, for {len(specs)} run(s); "
        f"follow with: hvdbench status {shlex.quote(str(root))}")
