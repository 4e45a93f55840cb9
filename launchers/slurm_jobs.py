"""The SLURM job of one run, as submitit's parameters (nodes, tasks, GPUs, partition and the rest), and the
partition checked against the runs before anything is submitted (sinfo)."""

from __future__ import annotations

import re
import subprocess
from typing import Any, Callable, Sequence

from hvdbench.core.spec import RunSpec

from .base import launcher_class
from .job_shape import NodeShape, NodeShapes, cpus_a_rank, cpus_per_rank, gpus_needed, shapes_of
from .slurm_options import SlurmOptions

SIGNAL_AHEAD_S = 90  # the most seconds before its time limit that a job is told it will be stopped


def rank_cpus(options: SlurmOptions, spec: RunSpec, shape: NodeShape | NodeShapes | None) -> tuple[int, str]:
    """CPUs a rank of a SLURM job is given, and why (launchers/job_shape.py): slurm.cpus_per_task, else the
    partition's nodes' share as sinfo says it, or what its loader needs."""
    return cpus_a_rank(spec, shape, fixed=options.cpus_per_task, gpus=options.gpus, asked="sinfo",
                       key="slurm.cpus_per_task", where="the partition's nodes")


def job_parameters(options: SlurmOptions, spec: RunSpec, name: str, retries: int = 0,
                   shape: NodeShape | NodeShapes | None = None) -> dict[str, Any]:
    """submitit's parameters for one run: nodes, one task per GPU (one task per node where the launcher
    starts every rank from the first task), GPUs per node, CPUs a task (rank_cpus: the partition's nodes'
    ``shape`` where sinfo said it), partition, account and the rest."""
    per_task = launcher_class(spec.launcher).task_per_rank
    extra: dict[str, Any] = {}
    for directive in options.directives:
        key, sep, value = directive.lstrip("-").partition("=")
        extra[key.replace("-", "_")] = value if sep else True
    if spec.host is not None:  # a run pinned to one node (screening every node)
        extra["nodelist"] = spec.host
    params: dict[str, Any] = {
        "name": f"hvdbench-{name}", "timeout_min": options.time_min, "nodes": spec.nodes,
        "tasks_per_node": spec.ranks_per_node if per_task else 1,
        "slurm_srun_args": [f"--mpi={options.mpi}", "--kill-on-bad-exit=1"] if per_task else [],
        "slurm_setup": list(options.setup),
        "slurm_additional_parameters": extra,
    }
    # a typed GPU goes where submitit takes text (its gpus_per_* take counts alone): --gres=gpu:TYPE:N, or
    # --gpus-per-task=TYPE:1 among the additional parameters; one GPU a task only where a task is a rank (a launcher
    # that starts every rank from one task per node asks the node's GPUs, as without gpus_per_task)
    if options.gpus and options.gpus_per_task and per_task:  # each task (rank) gets one GPU, whichever SLURM picks
        if options.gpu_type:
            extra["gpus_per_task"] = f"{options.gpu_type}:1"
        else:
            params["gpus_per_task"] = 1
    elif options.gpus:
        # a placement's job has the node to itself (each run checks what it was granted before its ranks start)
        count = gpus_needed(spec)
        if options.gpu_type:
            params["slurm_gres"] = f"gpu:{options.gpu_type}:{count}"
        else:
            params["gpus_per_node"] = count
        if spec.devices is not None:
            params["slurm_exclusive"] = True
    cpus = rank_cpus(options, spec, shape)[0]
    if options.cpus_per_task is None and not per_task:  # one task per node holds every rank of the node
        params["cpus_per_task"] = spec.ranks_per_node * cpus
    elif options.cpus_per_task is None and cpus > 1:  # a rank and its loader's workers, or the node's share
        params["cpus_per_task"] = cpus
    optional: tuple[tuple[str, str | int | None], ...] = (
        ("slurm_partition", options.partition), ("slurm_account", options.account), ("slurm_qos", options.qos),
        ("slurm_constraint", options.constraint), ("cpus_per_task", options.cpus_per_task), ("mem_gb", options.mem_gb))
    for parameter, given in optional:
        if given is not None:
            params[parameter] = given
    if options.exclusive:
        params["slurm_exclusive"] = True
    if retries:  # SLURM may start the job again: after a node failure or preemption, or when a run asks (run_task)
        extra["requeue"] = True
    if options.array_parallelism:
        params["slurm_array_parallelism"] = options.array_parallelism
    # SLURM warns the job (SIGUSR2) a quarter of its time limit ahead, at most 90 s: the run records a timeout
    params["slurm_signal_delay_s"] = min(SIGNAL_AHEAD_S, options.time_min * 15)
    return params


def _sinfo(partition: str | None, run: Callable[..., Any]) -> list[tuple[str, str, str, int | None]] | None:
    """(node, GRES, partition, CPUs) lines of sinfo, None where sinfo cannot say."""
    argv = ["sinfo", "-h", "-N", "-o", "%N|%G|%P|%c"] + (["-p", partition] if partition else [])
    try:
        out = run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    lines = [line.strip().split("|", 3) for line in out.stdout.splitlines() if line.strip()]
    return [(parts[0], parts[1], parts[2], int(parts[3]) if len(parts) > 3 and parts[3].isdigit() else None)
            for parts in lines if len(parts) >= 3]


def partition_nodes(partition: str | None, run: Callable[..., Any] = subprocess.run) -> list[tuple[str, int | None]]:
    """(node, GPUs it declares) for every node of the partition (the default one where None), from sinfo;
    empty where sinfo cannot say (then sbatch judges)."""
    return [(node, gpus) for node, gpus, _ in _partition(partition, run)]


def _partition(partition: str | None, run: Callable[..., Any]) -> list[tuple[str, int | None, int | None]]:
    """(node, GPUs it declares, CPUs) for every node of the partition (the default one where None)."""
    nodes: dict[str, tuple[int | None, int | None]] = {}
    for node, gres, part, cpus in _sinfo(partition, run) or []:
        if (partition is None and not part.endswith("*")) or (partition is not None and part.rstrip("*") != partition):
            continue  # not the default partition, or not the one named
        counts = [int(m.group(1)) for m in re.finditer(r"gpu(?::[\w.-]+)?:(\d+)", gres)]
        nodes[node] = (sum(counts) if counts else (0 if gres in ("(null)", "") else None), cpus)
    return [(node, gpus, cpus) for node, (gpus, cpus) in nodes.items()]


def node_shape(partition: str | None, run: Callable[..., Any] = subprocess.run) -> NodeShapes | None:
    """The partition's node shapes (CPUs and GPUs) as sinfo says them, each once; a run is sized from those that can
    hold it (job_shape.NodeShapes); None where sinfo cannot say, or says no node's CPUs."""
    return shapes_of(sorted({NodeShape(cpus, gpus) for _, gpus, cpus in _partition(partition, run) if cpus},
                            key=lambda n: (n.cpus, n.gpus or 0)))


def no_default_partition(run: Callable[..., Any] = subprocess.run) -> str | None:
    """Where no partition is named and the cluster has no default one (sbatch would refuse every job): one line
    naming its partitions; None where it has a default, or sinfo cannot say."""
    lines = _sinfo(None, run)
    if not lines or any(part.endswith("*") for _, _, part, _ in lines):
        return None
    names = sorted({part for _, _, part, _ in lines})
    return (f"no slurm.partition given and this cluster has no default partition: give slurm.partition (or "
            f"--partition) one of {', '.join(names[:12])}{' ...' if len(names) > 12 else ''}")


def partition_problems(specs: Sequence[RunSpec], options: SlurmOptions,
                       run: Callable[..., Any] = subprocess.run) -> list[str]:
    """Every run the partition cannot hold (more nodes than it has, more GPUs a node than its nodes declare, more
    CPUs a node than the nodes that hold it have), a line each, before anything is submitted; [] where it holds
    them all, or sinfo cannot say."""
    if not specs:
        return []
    if options.partition is None and (missing := no_default_partition(run)):
        return [missing]
    nodes = partition_nodes(options.partition, run)
    if not nodes:
        return []
    where = f"partition {options.partition}" if options.partition else "the default partition"
    shapes = node_shape(options.partition, run)
    gpus = [g for _, g in nodes if g is not None]
    found = []
    for spec in specs:
        each = options.cpus_per_task or cpus_per_rank(spec)
        least = shapes.least_cpus(spec, options.gpus) if shapes is not None else None
        if spec.nodes > len(nodes):
            found.append(f"run {spec.id} needs {spec.nodes} nodes but {where} has {len(nodes)}")
        elif options.gpus and len(gpus) == len(nodes) and sum(g >= gpus_needed(spec) for g in gpus) < spec.nodes:
            found.append(f"run {spec.id} needs {gpus_needed(spec)} GPU(s) on each of {spec.nodes} node(s) but "
                         f"{where}'s nodes declare {', '.join(map(str, sorted(set(gpus))))}")
        elif least is not None and each * spec.ranks_per_node > least:
            found.append(f"run {spec.id} asks {each} CPU(s) for each of its {spec.ranks_per_node} rank(s) a node (a "
                         f"rank and its loader's workers) but {where}'s smallest nodes that hold it have {least}: "
                         "fewer --loader-workers, or fewer ranks a node")
    return found


def partition_problem(specs: Sequence[RunSpec], options: SlurmOptions,
                      run: Callable[..., Any] = subprocess.run) -> str | None:
    """Every run the partition cannot hold, in one line (partition_problems); None where it holds them all."""
    found = partition_problems(specs, options, run)
    if len(found) <= 1:
        return found[0] if found else None
    return f"{len(found)} runs cannot be submitted: " + "; ".join(found)
