"""How a PyTorch rank exchanges its gradients (``--exchange``): Horovod's DistributedOptimizer, PyTorch's
DistributedDataParallel, fully sharded data parallel (FSDP2) or the seeds' parameter server.

Every exchange starts from what the launcher already gave Horovod (rank, size, the hosts): the ranks of a
``torch.distributed`` exchange meet at a store that rank 0 opens on a free port and names to the others
through Horovod, so horovodrun, mpirun, mpiexec and srun runs all work alike. The timed loop's barrier stays
Horovod's. Each exchange leaves the same parameters on every rank (``checksum`` reads the full ones).
"""

from __future__ import annotations

import argparse
import datetime
import os
import socket
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, MutableMapping

import torch
from torch import nn

from hvdbench.core.addresses import IFACE_VARIABLES, named_interface, reachable_address
from hvdbench.core.errors import UsageError
from hvdbench.core.exchanges import EXCHANGES, listed, without_horovod
from .timing import HorovodObjects
from .torchrun import TorchrunWorld

Update = Callable[[torch.optim.Optimizer], None]
MakeOptimizer = Callable[[Iterable[torch.Tensor]], torch.optim.Optimizer]
STORE_TIMEOUT = datetime.timedelta(minutes=10)  # ranks of one job start within minutes of each other
def rendezvous_address(one_host: bool, environ: MutableMapping[str, str]) -> str:
    """Where rank 0's store listens, as the other ranks reach it: MASTER_ADDR where set, else rank 0's own
    reachable address (core/addresses.py)."""
    if environ.get("MASTER_ADDR"):
        return environ["MASTER_ADDR"]
    return reachable_address(one_host, environ, "set MASTER_ADDR to an address of rank 0's host that the other "
                                                "hosts reach")


def gloo_interface(one_host: bool, environ: MutableMapping[str, str]) -> None:
    """Where unset, GLOO_SOCKET_IFNAME (the interface torch.distributed's Gloo uses): loopback when all ranks share
    a host (no host-name lookup on a node without DNS), else the interface Horovod's Gloo or NCCL is told to use
    (without one, Gloo looks the host name up and may land on loopback, which other hosts cannot reach)."""
    if "GLOO_SOCKET_IFNAME" in environ:
        return
    if one_host:
        environ["GLOO_SOCKET_IFNAME"] = "lo"
        return
    iface = named_interface(environ, IFACE_VARIABLES[1:])
    if iface:
        environ["GLOO_SOCKET_IFNAME"] = iface


def init_process_group(objects: HorovodObjects, rank: int, size: int, device: torch.device) -> dict[str, Any]:
    """Start ``torch.distributed`` (NCCL on a GPU, Gloo on the CPU) for the ranks Horovod already joined; the
    facts to record."""
    import torch.distributed as dist

    if dist.is_initialized():  # torchrun's world (suite/torchrun.py): its group already joins the ranks
        return {"backend": "nccl" if device.type == "cuda" else "gloo", "rendezvous":
                f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')} (torchrun)",
                "gloo_interface": os.environ.get("GLOO_SOCKET_IFNAME")}
    hosts = objects.allgather_object(socket.gethostname())
    one_host = len(set(hosts)) == 1
    gloo_interface(one_host, os.environ)
    address = objects.broadcast_object(rendezvous_address(one_host, os.environ) if rank == 0 else None)
    store = None
    if rank == 0:
        store = dist.TCPStore(address, int(os.environ.get("MASTER_PORT", 0)), size, True,
                              timeout=STORE_TIMEOUT, wait_for_workers=False)
    port = objects.broadcast_object(store.port if store is not None else None)
    if store is None:
        store = dist.TCPStore(address, port, size, False, timeout=STORE_TIMEOUT)
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, store=store, rank=rank, world_size=size,
                            device_id=device if device.type == "cuda" else None)
    return {"backend": backend, "rendezvous": f"{address}:{port}",
            "gloo_interface": os.environ.get("GLOO_SOCKET_IFNAME")}


def broadcast_from_rank0(tensors: Iterable[torch.Tensor], group: Any = None) -> None:
    """Every rank takes rank 0's values of these tensors (in place)."""
    import torch.distributed as dist

    for tensor in tensors:
        dist.broadcast(tensor.data, 0, group=group)


class Exchange:
    """One rank's gradient exchange: what a Trainer calls around its step. ``prepare`` gives every rank the same
    starting parameters (in fp32, before any cast), ``wrap`` returns the module to train, ``optimizer`` the
    optimizer to step (None where this rank updates nothing), ``after_backward`` completes the exchange,
    ``update`` applies the step, ``parameters`` the full parameters (for the checksum)."""

    name = "none"  # its descriptor's name in core/exchanges.py (EXCHANGES), which says what it can do
    optimizer_holds_model = True  # the optimizer's parameters are the model's (zeroing its gradients zeroes all)

    @classmethod
    def start(cls, world: "World") -> "Exchange":
        """This exchange for one rank of ``world`` (its process group, where it needs one, already started)."""
        return cls()

    def __init__(self) -> None:
        self.module: nn.Module | None = None
        self.facts: dict[str, Any] = {"name": self.name}

    def prepare(self, model: nn.Module) -> None:
        """Make the starting parameters equal on every rank."""

    def wrap(self, model: nn.Module) -> nn.Module:
        self.module = model
        return model

    def optimizer(self, make: MakeOptimizer) -> torch.optim.Optimizer | None:
        assert self.module is not None
        return make(self.module.parameters())

    def after_backward(self, optimizer: torch.optim.Optimizer | None) -> None:
        """Complete the gradient exchange that backward started (or do it)."""

    def update(self, optimizer: torch.optim.Optimizer | None, step: Update, scaler: Any) -> None:
        """Apply the step: ``step(optimizer)`` steps it (through the loss scaler where there is one)."""
        if optimizer is not None:
            step(optimizer)

    def parameters(self) -> Iterator[torch.Tensor]:
        assert self.module is not None
        return (p.detach() for p in self.module.parameters())

    def close(self) -> None:
        """End the process group this exchange started (``make_exchange`` records its backend), if any."""
        import torch.distributed as dist

        if "backend" in self.facts and dist.is_initialized():
            dist.destroy_process_group()


class Independent(Exchange):
    """No exchange: each rank trains alone (``--independent``, the ideal-scaling baseline)."""


class HorovodExchange(Exchange):
    """Horovod's DistributedOptimizer: backward's hooks start each gradient's allreduce (fused in Horovod's
    buffer), ``synchronize`` waits for them, the step then skips Horovod's own synchronize."""

    name = "horovod"

    def __init__(self, hvd: Any, compression: Any) -> None:
        super().__init__()
        self.hvd, self.compression = hvd, compression

    @classmethod
    def start(cls, world: "World") -> Exchange:
        return cls(world.hvd, world.compression())

    def prepare(self, model: nn.Module) -> None:
        self.hvd.broadcast_parameters(model.state_dict(), root_rank=0)  # fp32: Horovod 0.28 cannot send bf16

    def optimizer(self, make: MakeOptimizer) -> torch.optim.Optimizer:
        assert self.module is not None
        return self.hvd.DistributedOptimizer(make(self.module.parameters()),
                                             named_parameters=self.module.named_parameters(),
                                             compression=self.compression, op=self.hvd.Average)

    def after_backward(self, optimizer: torch.optim.Optimizer | None) -> None:
        optimizer.synchronize()  # type: ignore[union-attr]

    def update(self, optimizer: torch.optim.Optimizer | None, step: Update, scaler: Any) -> None:
        with optimizer.skip_synchronize():  # type: ignore[union-attr]
            step(optimizer)  # type: ignore[arg-type]


class DdpExchange(Exchange):
    """PyTorch's DistributedDataParallel: gradients bucketed (``--bucket-mb``, DDP's ``bucket_cap_mb``) and each
    bucket's allreduce started as backward fills it, overlapping the rest of backward; the parameters and
    buffers start as rank 0's. ``--fp16-allreduce`` sends the buckets as fp16 (DDP's fp16_compress_hook)."""

    name = "ddp"

    @classmethod
    def start(cls, world: "World") -> Exchange:
        return cls(world.device, world.flags.bucket_mb, world.flags.fp16_allreduce)

    def __init__(self, device: torch.device, bucket_mb: float, fp16: bool) -> None:
        super().__init__()
        self.device, self.bucket_mb, self.fp16 = device, bucket_mb, fp16
        self.facts.update(bucket_mb=bucket_mb, fp16_buckets=fp16)

    def wrap(self, model: nn.Module) -> nn.Module:
        from torch.nn.parallel import DistributedDataParallel

        self.module = model
        ddp = DistributedDataParallel(model, device_ids=[self.device.index] if self.device.type == "cuda" else None,
                                      bucket_cap_mb=self.bucket_mb)
        if self.fp16:
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
        return ddp


def shard_units(model: nn.Module) -> list[nn.Module]:
    """The modules FSDP shards as units of their own, last first: the outermost modules with parameters that are
    elements of an ``nn.ModuleList`` or ``nn.Sequential`` (a Transformer's blocks, a ResNet's bottlenecks, an MLP's
    layers; not the layers inside a block). The model itself is sharded last and holds the rest."""
    units: list[nn.Module] = []

    def visit(module: nn.Module) -> None:
        container = isinstance(module, (nn.ModuleList, nn.Sequential))
        for child in module.children():
            if container and not isinstance(child, (nn.ModuleList, nn.ModuleDict)) \
                    and any(True for _ in child.parameters()):
                units.append(child)
            else:
                visit(child)

    visit(model)
    return units[::-1]


class FsdpExchange(Exchange):
    """PyTorch's fully sharded data parallel (FSDP2, ``fully_shard``): each rank holds 1/size of every parameter,
    gradient and optimizer state; a unit's parameters are gathered for its forward and backward and freed after,
    and its gradients reduce-scattered. ``--fp16-allreduce`` reduces the gradients in fp16."""

    name = "fsdp"

    @classmethod
    def start(cls, world: "World") -> Exchange:
        return cls(world.flags.fp16_allreduce)

    def __init__(self, fp16: bool) -> None:
        super().__init__()
        self.fp16 = fp16
        self.facts.update(fp16_reduce=fp16)

    def prepare(self, model: nn.Module) -> None:
        broadcast_from_rank0(model.state_dict().values())

    def wrap(self, model: nn.Module) -> nn.Module:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        policy = MixedPrecisionPolicy(reduce_dtype=torch.float16 if self.fp16 else None)
        units = shard_units(model)
        for unit in units:
            fully_shard(unit, mp_policy=policy)
        fully_shard(model, mp_policy=policy)
        self.facts.update(units=len(units) + 1)
        self.module = model
        return model

    def parameters(self) -> Iterator[torch.Tensor]:
        assert self.module is not None
        for p in self.module.parameters():
            yield p.full_tensor().detach() if hasattr(p, "full_tensor") else p.detach()


class ParameterServer(Exchange):
    """The seeds' parameter server: every rank's gradients summed at one place (rank 0's device, or host memory
    with ``--ps-device cpu``), averaged and applied there by the only optimizer, the new parameters sent back to
    every rank. A loss scale (amp on a GPU) is kept by rank 0: it skips a step whose summed gradients are not
    finite, backs the scale off or grows it as GradScaler would, and every rank takes its scale."""

    name = "ps"

    @classmethod
    def start(cls, world: "World") -> Exchange:
        return cls(world.hvd.rank(), world.hvd.size(), world.device, world.flags.ps_device)

    def __init__(self, rank: int, size: int, device: torch.device, where: str) -> None:
        super().__init__()
        import torch.distributed as dist

        self.rank, self.size, self.device = rank, size, device
        self.host = where == "cpu" or device.type == "cpu"
        # host memory on a GPU run: a Gloo group beside NCCL's, as the gradients cross host memory
        self.group = dist.new_group(backend="gloo") if self.host and device.type == "cuda" else None
        self.place = torch.device("cpu") if self.host else device
        self.optimizer_holds_model = not self.host or device.type == "cpu"  # rank 0's copy in host memory: not
        self.facts.update(ps_device="cpu" if self.host else "gpu", reduce="sum to rank 0, average there")
        self.masters: list[torch.Tensor] = []
        self.trained: list[torch.Tensor] = []
        self.elements = 0
        self.copied: list[tuple[torch.Tensor, int]] = []  # (parameter, its index) that take the broadcast values
        self.good_steps = 0

    def prepare(self, model: nn.Module) -> None:
        broadcast_from_rank0(model.state_dict().values())

    def wrap(self, model: nn.Module) -> nn.Module:
        self.module = model
        self.trained = [p for p in model.parameters() if p.requires_grad]
        self.elements = sum(p.numel() for p in self.trained)  # what is reduced and broadcast each step
        if self.rank == 0:
            self.masters = [p if p.device == self.place else p.detach().to(self.place).requires_grad_()
                            for p in self.trained]
        own = {id(master) for master in self.masters}  # rank 0's own parameters: its step updates them in place
        self.copied = [(p, i) for i, p in enumerate(self.trained) if id(p) not in own]
        return model

    def optimizer(self, make: MakeOptimizer) -> torch.optim.Optimizer | None:
        return make(self.masters) if self.rank == 0 else None

    def after_backward(self, optimizer: torch.optim.Optimizer | None) -> None:
        import torch.distributed as dist
        from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in self.trained]
        flat = _flatten_dense_tensors(grads).to(self.place)
        dist.reduce(flat, 0, group=self.group)
        if self.rank == 0:
            flat /= self.size
            for master, grad in zip(self.masters, _unflatten_dense_tensors(flat, self.masters)):
                master.grad = grad

    def update(self, optimizer: torch.optim.Optimizer | None, step: Update, scaler: Any) -> None:
        import torch.distributed as dist
        from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

        scale = 0.0
        if self.rank == 0:
            assert optimizer is not None
            scale = self._root_step(optimizer, scaler)
            flat = _flatten_dense_tensors([m.detach() for m in self.masters])
        else:
            flat = torch.empty(self.elements, dtype=self.trained[0].dtype, device=self.place)
        dist.broadcast(flat, 0, group=self.group)
        if self.copied:
            values = _unflatten_dense_tensors(flat, self.trained)
            with torch.no_grad():
                for param, index in self.copied:
                    param.copy_(values[index])
        if scaler is not None:  # every rank has one or none (the same flags and device kind): the scale crosses
            carried = torch.tensor([scale], dtype=torch.float64, device=self.place)
            dist.broadcast(carried, 0, group=self.group)
            scaler.update(new_scale=float(carried.item()))

    def _root_step(self, optimizer: torch.optim.Optimizer, scaler: Any) -> float:
        """Rank 0's step on the averaged gradients; the loss scale every rank takes next (0 without one)."""
        if scaler is None:
            optimizer.step()
            return 0.0
        current = float(scaler.get_scale())
        finite = all(bool(torch.isfinite(m.grad).all()) for m in self.masters if m.grad is not None)
        if not finite:
            self.good_steps = 0
            return current * scaler.get_backoff_factor()
        for master in self.masters:
            if master.grad is not None:
                master.grad.div_(current)
        optimizer.step()
        self.good_steps += 1
        if self.good_steps >= scaler.get_growth_interval():
            self.good_steps = 0
            return current * scaler.get_growth_factor()
        return current


@dataclass(frozen=True)
class World:
    """What an exchange starts from on one rank: the flags, Horovod (or torchrun's stand-in), the rank's device,
    and Horovod's compression (made on demand: only Horovod's exchange asks for it)."""

    flags: argparse.Namespace
    hvd: Any
    device: torch.device
    compression: Callable[[], Any]


IMPLEMENTATIONS: dict[str, type[Exchange]] = {cls.name: cls for cls in (HorovodExchange, DdpExchange, FsdpExchange,
                                                                         ParameterServer)}


def make_exchange(flags: argparse.Namespace, hvd: Any, objects: HorovodObjects, device: torch.device,
                  compression: Callable[[], Any]) -> Exchange:
    """The exchange ``--exchange`` names (``--independent``: none), its process group started where its ranks do
    not meet through Horovod (core/exchanges.py)."""
    if flags.independent:
        return Independent()
    kind = EXCHANGES[flags.exchange]
    if kind.needs_horovod and isinstance(hvd, TorchrunWorld):
        raise UsageError(f"--exchange {kind.name} needs Horovod, which torchrun does not start: --exchange "
                         f"{listed(without_horovod('pytorch'))}, or a launcher that starts Horovod")
    started = {} if kind.needs_horovod else init_process_group(objects, hvd.rank(), hvd.size(), device)
    exchange = IMPLEMENTATIONS[kind.name].start(World(flags, hvd, device, compression))
    exchange.facts.update(started)
    return exchange


def scaler_for(exchange: Exchange, flags: argparse.Namespace, device: torch.device) -> Any:
    """The loss scaler of amp on a GPU (None elsewhere): FSDP's sharded one (it agrees on a non-finite gradient
    across the shards), else PyTorch's."""
    if flags.precision != "amp" or device.type != "cuda":
        return None
    if isinstance(exchange, FsdpExchange):
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

        return ShardedGradScaler("cuda")
    return torch.amp.GradScaler("cuda")



