"""The ranks' world when torchrun started them: torch.distributed alone, no Horovod. It answers what the harness
asks of Horovod (rank, size, local rank and size, a barrier, object collectives, NCCL's version) so that the same
harness, records and exchanges (DDP, FSDP, the parameter server) run under PyTorch's own launcher."""

from __future__ import annotations

import atexit
import os
from typing import Any, Mapping

import torch
import torch.distributed as dist

# Set by torchrun's agent in every rank it starts (and by nothing else).
TORCHRUN_VARIABLE = "TORCHELASTIC_RUN_ID"


def launched_by_torchrun(environ: Mapping[str, str] | None = None) -> bool:
    """Whether torchrun started this process."""
    return bool((os.environ if environ is None else environ).get(TORCHRUN_VARIABLE))


def nccl_version_code() -> int | None:
    """NCCL's version as Horovod codes it (major x 10000 + minor x 100 + patch), or None without NCCL."""
    if not torch.cuda.is_available():
        return None
    try:
        major, minor, patch = torch.cuda.nccl.version()[:3]
    except (AttributeError, RuntimeError, TypeError, ValueError):
        return None
    return major * 10000 + minor * 100 + patch


class TorchrunWorld:
    """torch.distributed's default group (Gloo for CPU tensors, NCCL for CUDA tensors where CUDA exists) and a
    Gloo group for the harness's barrier and object collectives, started from torchrun's variables."""

    controller = "c10d"
    without_horovod = True  # what the framework-free harness asks (it cannot import this module's torch)

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._env = os.environ if environ is None else environ
        self._objects: Any = None

    def init(self) -> "TorchrunWorld":
        backend = "cpu:gloo,cuda:nccl" if torch.cuda.is_available() else "gloo"
        dist.init_process_group(backend)
        self._objects = dist.new_group(backend="gloo")
        atexit.register(self.shutdown)
        return self

    def rank(self) -> int:
        return dist.get_rank()

    def size(self) -> int:
        return dist.get_world_size()

    def local_rank(self) -> int:
        return int(self._env.get("LOCAL_RANK", "0"))

    def local_size(self) -> int:
        return int(self._env.get("LOCAL_WORLD_SIZE", str(self.size())))

    def cross_rank(self) -> int:
        return int(self._env.get("GROUP_RANK", "0"))

    def cross_size(self) -> int:
        return int(self._env.get("GROUP_WORLD_SIZE", "1"))

    def barrier(self) -> None:
        dist.barrier(group=self._objects)

    def allgather_object(self, obj: Any, name: str | None = None) -> list[Any]:
        out: list[Any] = [None] * self.size()
        dist.all_gather_object(out, obj, group=self._objects)
        return out

    def broadcast_object(self, obj: Any, root_rank: int = 0, name: str | None = None) -> Any:
        box = [obj]
        dist.broadcast_object_list(box, src=root_rank, group=self._objects)
        return box[0]

    def shutdown(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()

    def info(self) -> dict[str, Any]:
        """The env record's facts of this world (where Horovod's runs record Horovod's)."""
        return {"launcher": "torchrun", "backend": str(dist.get_backend()), "run_id": self._env.get(TORCHRUN_VARIABLE),
                "nccl_version": nccl_version_code(), "rendezvous": f"{self._env.get('MASTER_ADDR')}:"
                f"{self._env.get('MASTER_PORT')}", "layout": {"local_size": self.local_size(),
                                                               "cross_rank": self.cross_rank(),
                                                               "cross_size": self.cross_size()}}
