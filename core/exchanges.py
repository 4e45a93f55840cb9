"""How a rank's gradients reach the others (``--exchange``): one descriptor per exchange holds everything the
suite knows about it before a rank starts (its frameworks, whether its ranks meet through Horovod, whether the
step model's allreduce describes it, its own options and their defaults, the flags it cannot take). The flags'
check, the plan's skipping, the projection and every list of exchanges read these; the implementations live on
the rank side (suite/exchange.py for PyTorch, suite/tfharness.py for TensorFlow's strategy)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DEFAULT = "horovod"  # the exchange a run without --exchange makes, and the one an independent run stands for


@dataclass(frozen=True)
class Option:
    """A flag of one exchange's own (``--bucket-mb``): its dest, default, help, and its choices or kind (a positive
    number of that kind: ``int`` keeps a whole-number option whole)."""

    dest: str
    default: Any
    help: str
    choices: tuple[str, ...] = ()
    kind: type = float

    @property
    def flag(self) -> str:
        return f"--{self.dest.replace('_', '-')}"


@dataclass(frozen=True)
class Exchange:
    """One way of exchanging gradients, as the suite plans and checks it."""

    name: str
    doc: str  # what it is, one line (--exchange's help, the docs' table)
    frameworks: tuple[str, ...]  # the frameworks whose workloads offer it
    needs_horovod: bool = False  # its ranks meet through Horovod: a launcher that starts none cannot run it
    allreduce: bool = False  # the projection's step model (an allreduce of the gradients) describes it
    options: tuple[Option, ...] = ()  # its own flags
    refuses: tuple[tuple[str, str], ...] = ()  # flags (dest) it cannot take, and why

    def refusal(self, option: str) -> str | None:
        """Why this exchange cannot take ``option`` (a flag's dest), or None."""
        return dict(self.refuses).get(option)


DDP_BUCKET_MB = 25.0  # DistributedDataParallel's own default bucket_cap_mb
EXCHANGES: dict[str, Exchange] = {kind.name: kind for kind in (
    Exchange("horovod", "Horovod's DistributedOptimizer: allreduce of fused gradients, overlapped with backward",
             ("pytorch", "tensorflow"), needs_horovod=True, allreduce=True),
    Exchange("ddp", "PyTorch DistributedDataParallel: bucketed allreduce overlapped with backward (NCCL on GPUs, "
                    "Gloo on CPUs)", ("pytorch",), allreduce=True,
             options=(Option("bucket_mb", DDP_BUCKET_MB, f"its gradient bucket size in MiB (default "
                                                         f"{DDP_BUCKET_MB:g}, DDP's own)"),)),
    Exchange("fsdp", "PyTorch fully sharded data parallel (FSDP2): parameters, gradients and optimizer state sharded",
             ("pytorch",)),
    Exchange("ps", "a parameter server: gradients summed at rank 0's GPU or host memory, updated there, sent back",
             ("pytorch",), options=(Option("ps_device", "gpu", "where gradients are summed and the update is made: "
                                                               "rank 0's GPU (default; the CPU on a CPU run) or host "
                                                               "memory", ("gpu", "cpu")),),
             refuses=(("fp16_allreduce", "the parameter server sums gradients at one place in their own "
                                         "precision"),)),
    Exchange("mirrored", "TensorFlow's MultiWorkerMirroredStrategy, one worker per rank: its own all-reduce (NCCL on "
                         "GPUs, a ring on CPUs) inside the optimizer's step", ("tensorflow",),
             refuses=(("fp16_allreduce", "the strategy all-reduces gradients in their own precision"),
                      ("breakdown", "the strategy all-reduces inside the optimizer's step: no phase of its own"),
                      ("xla", "the strategy's step is not compiled with XLA here"))),
)}


def offered(framework: str) -> tuple[str, ...]:
    """The exchanges a framework's workloads offer, in the registry's order."""
    return tuple(name for name, kind in EXCHANGES.items() if framework in kind.frameworks)


def allreduce_names() -> tuple[str, ...]:
    """The exchanges the projection's step model describes."""
    return tuple(name for name, kind in EXCHANGES.items() if kind.allreduce)


def without_horovod(framework: str) -> tuple[str, ...]:
    """A framework's exchanges whose ranks meet without Horovod (under a launcher that starts none)."""
    return tuple(name for name in offered(framework) if not EXCHANGES[name].needs_horovod)


def own_options() -> dict[str, str]:
    """Every exchange's own flag (dest) and the exchange that owns it; two exchanges declaring one flag are a
    mistake in the registry, named (a flag has one owner, or a run's flags could not say which exchange it tunes)."""
    owners: dict[str, list[str]] = {}
    for name, kind in EXCHANGES.items():
        for option in kind.options:
            owners.setdefault(option.dest, []).append(name)
    shared = {dest: names for dest, names in owners.items() if len(names) > 1}
    if shared:
        dest, names = next(iter(shared.items()))
        raise ValueError(f"--{dest.replace('_', '-')} is declared by the exchanges {listed(tuple(names), 'and')}: "
                         "an exchange's own option has one owner (core/exchanges.py)")
    return {dest: names[0] for dest, names in owners.items()}


def exchange_flags() -> dict[str, int]:
    """The exchange's flags on a run's command line and the values each takes: ``--exchange`` and every exchange's
    own options, as the registry declares them. A run without them is its 1-GPU baseline's configuration (at one rank
    nothing is exchanged), so an exchange's new option leaves the baseline by construction."""
    return {"--exchange": 1, **{Option(dest, None, "").flag: 1 for dest in own_options()}}


def listed(names: tuple[str, ...], last: str = "or") -> str:
    """Names as prose: ``a, b or c``."""
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {last} {names[-1]}"
