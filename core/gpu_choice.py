"""Which GPU a rank computes on, from what the launcher and the scheduler gave it. Pure: no framework.

Placements name node-physical GPU ids (what ``nvidia-smi`` shows). A launcher outside a scheduler
makes exactly those visible (``CUDA_VISIBLE_DEVICES``); under SLURM the scheduler has already chosen
(its step's or job's GPU variables, read through ``job_env``, hold the physical ids it granted, ``CUDA_VISIBLE_DEVICES``
the same GPUs, often renumbered from 0 by cgroups), so the placement travels as ``HVDBENCH_DEVICES``
and each rank finds its GPU among what was granted. A rank that sees exactly one GPU uses it, whatever
its local rank (``--gpus-per-task=1``, ``--gpu-bind``).
"""

from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from .errors import UsageError
from .job_env import job_env

PLACEMENT_VARIABLE = "HVDBENCH_DEVICES"


def _ids(text: str | None, name: str = PLACEMENT_VARIABLE) -> tuple[int, ...] | None:
    """``0,4`` as (0, 4); None where unset or empty. Anything else (``-1``, ``0,0``, a UUID) is a UsageError
    naming the variable: placements and SLURM's grants name node-physical GPU ids, each once."""
    if not text or not text.strip():
        return None
    parts = [p.strip() for p in text.split(",")]
    if not all(p.isdigit() for p in parts) or len(set(map(int, parts))) != len(parts):
        raise UsageError(f"{name}={text[:60]!r}: expected distinct GPU ids such as 0,3 (node-physical indices, "
                         "each once)")
    return tuple(int(p) for p in parts)


def visible_devices(env: Mapping[str, str] | None = None) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as its entries (indices, UUIDs), or None where it is unset (every GPU visible)."""
    text = (os.environ if env is None else env).get("CUDA_VISIBLE_DEVICES")
    return None if text is None else [v.strip() for v in text.split(",") if v.strip()]


def granted(env: Mapping[str, str]) -> tuple[int, ...] | None:
    """The node-physical GPU ids the scheduler granted this task (SLURM: its step's, else its job's), or None."""
    found = job_env(env).named("gpus")
    return None if found is None else _ids(found[1], found[0])


def placement_problem(placement: Sequence[int], grant: Sequence[int] | None, where: str) -> str | None:
    """Why a placement cannot run on what the scheduler granted on one node (None where it can)."""
    if grant is None:
        return None
    outside = [d for d in placement if d not in grant]
    if not outside:
        return None
    return (f"placement GPU(s) {','.join(map(str, outside))} not among the GPUs SLURM granted on {where} "
            f"({','.join(map(str, grant)) or 'none'}); ask the job for the node's GPUs (--gpus-per-node covering "
            "every id, or --exclusive)")


@dataclass(frozen=True)
class GpuChoice:
    """The rank's GPU: its index among the visible devices (what the framework calls it), its
    node-physical id where known, and the evidence: what was visible, granted and placed."""

    cuda_index: int
    physical: int | None
    how: str
    visible: str | None
    granted: tuple[int, ...] | None
    placement: tuple[int, ...] | None

    def record(self) -> dict[str, Any]:
        """Plain fields for the env record."""
        out = asdict(self)
        for name in ("granted", "placement"):
            out[name] = None if out[name] is None else list(out[name])
        return out


def choose_gpu(local_rank: int, env: Mapping[str, str] | None = None, count: int | None = None,
               host: str | None = None) -> GpuChoice:
    """The GPU of ``local_rank`` given the environment and the number of GPUs the framework sees (None:
    unknown, e.g. on a CPU run, judged from CUDA_VISIBLE_DEVICES); a UsageError in one line where none fits."""
    env = os.environ if env is None else env
    visible_text, visible = env.get("CUDA_VISIBLE_DEVICES"), visible_devices(env)
    grant, placement = granted(env), _ids(env.get(PLACEMENT_VARIABLE))
    seen = count if count is not None else (len(visible) if visible is not None else None)

    def physical_of(index: int) -> int | None:
        if grant is not None and visible is not None and len(grant) == len(visible):
            return grant[index]
        if visible is not None and index < len(visible) and visible[index].isdigit():
            return int(visible[index])
        return index if visible is None else None

    if placement is not None:
        if local_rank >= len(placement):
            raise UsageError(f"local rank {local_rank} has no GPU in placement {','.join(map(str, placement))}")
        want = placement[local_rank]
        problem = placement_problem(placement, grant, host or socket.gethostname())
        if problem:
            raise UsageError(problem)
        if grant is not None and (visible is None or len(visible) == len(grant)):
            index, how = grant.index(want), "placement among the GPUs SLURM granted"
        elif visible is not None and str(want) in visible:
            index, how = visible.index(str(want)), "placement among CUDA_VISIBLE_DEVICES"
        elif visible is None:
            index, how = want, "placement (every GPU visible)"
        else:
            raise UsageError(f"placement GPU {want} is not visible to local rank {local_rank} "
                             f"(CUDA_VISIBLE_DEVICES={visible_text})")
        if seen is not None and index >= seen:
            raise UsageError(f"placement GPU {want} is CUDA device {index} but only {seen} are visible "
                             f"(CUDA_VISIBLE_DEVICES={visible_text or 'unset'})")
        return GpuChoice(index, want, how, visible_text, grant, placement)
    if seen == 1:
        return GpuChoice(0, physical_of(0), "the only visible GPU", visible_text, grant, None)
    if seen is not None and local_rank >= seen:
        raise UsageError(f"local rank {local_rank} has no GPU: {seen} visible "
                         f"(CUDA_VISIBLE_DEVICES={visible_text if visible_text is not None else 'unset'})")
    return GpuChoice(local_rank, physical_of(local_rank), "local rank", visible_text, grant, None)


def shared_gpu_problem(used: Sequence[tuple[str, str | None]]) -> str | None:
    """Why these ranks cannot run together: two ranks on one host computing on the same GPU (``used[r]``
    is rank r's host and its GPU's bus id, None on the CPU), which NCCL refuses at its first call; None
    where every rank has its own GPU or the ranks train on CPUs."""
    owners: dict[tuple[str, str], list[int]] = {}
    for rank, (host, gpu) in enumerate(used):
        if gpu is not None:
            owners.setdefault((host, gpu), []).append(rank)
    shared = [(where, ranks) for where, ranks in owners.items() if len(ranks) > 1]
    if not shared:
        return None
    (host, gpu), ranks = shared[0]
    return (f"ranks {', '.join(map(str, ranks))} on {host} all compute on GPU {gpu}: NCCL needs a GPU of its own "
            f"for every rank; run at most as many ranks per node as it has GPUs, or --device cpu")


def choice_record(local_rank: int) -> dict[str, Any]:
    """The env record's ``gpu_choice`` of a rank that pinned no GPU (a CPU run): what it was given all the same,
    judged from the environment, or why that would not fit."""
    try:
        return choose_gpu(local_rank).record()
    except UsageError as exc:
        return {"problem": str(exc)}
