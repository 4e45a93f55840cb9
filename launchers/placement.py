"""Named GPU placements: for k GPUs of a node, one subset per slowest-link class, ``all``, or every
subset up to symmetry; each with the CPUs and NUMA nodes its ranks should be bound to."""

from __future__ import annotations

import itertools
import reprlib
from dataclasses import dataclass
from typing import Iterator, Sequence

from hvdbench.core.errors import UsageError

from hvdbench.core.topology import Topology, format_cpus, link_rank

EXHAUSTIVE_LIMIT = 200_000  # subsets examined at most in exhaustive mode


@dataclass(frozen=True)
class Placement:
    """A set of GPUs of one node, named by its slowest link (``NV2:0,3``), ``all``, or its ids (``013``)."""

    name: str
    devices: tuple[int, ...]
    slowest: str | None
    cpus: tuple[int, ...]
    numa_nodes: tuple[int, ...]

    @property
    def visible_devices(self) -> str:
        """The one CUDA_VISIBLE_DEVICES list every rank of a job gets (each takes its local rank in it)."""
        return ",".join(map(str, self.devices))

    def describe(self) -> str:
        """One line for people."""
        numa = ",".join(map(str, self.numa_nodes)) or "?"
        return (f"{self.name:<16} GPUs {self.visible_devices:<16} slowest {self.slowest or '-':<5} "
                f"NUMA {numa:<4} CPUs {format_cpus(self.cpus) or '?'}")


def _placement(topo: Topology, name: str, devices: Sequence[int]) -> Placement:
    gpus = [topo.gpus[d] for d in devices]
    cpus = tuple(sorted({c for g in gpus for c in g.cpus}))
    numa = tuple(sorted({g.numa_node for g in gpus if g.numa_node is not None}))
    return Placement(name, tuple(devices), topo.slowest(devices), cpus, numa)


def check_devices(topo: Topology, devices: Sequence[int]) -> None:
    """GPU ids that exist on this node, each once; else a UsageError naming the bad ones."""
    count = len(topo.gpus)
    bad = sorted({d for d in devices if not 0 <= d < count})
    if bad:
        raise UsageError(f"GPU id(s) {reprlib.repr(bad)} do not exist: this node has {count} GPU(s), ids 0-{count - 1}")
    if len(set(devices)) != len(devices):
        raise UsageError(f"GPU ids repeat in {reprlib.repr(list(devices))}")


def _check_k(topo: Topology, k: int) -> None:
    if not 1 <= k <= len(topo.gpus):
        raise UsageError(f"cannot place {k} GPU(s): this node has {len(topo.gpus)}")


def _numa_span(topo: Topology, devices: Sequence[int]) -> int:
    return len({topo.gpus[d].numa_node for d in devices})


def by_link_class(topo: Topology, k: int) -> list[Placement]:
    """For each link class present, one k-GPU subset whose slowest link is that class, fastest first.

    Among candidates the one spanning the fewest NUMA nodes wins, then the lowest ids. k equal to the
    node's GPU count gives ``all``; k = 1 gives GPU 0.
    """
    _check_k(topo, k)
    count = len(topo.gpus)
    if k == count:
        return [_placement(topo, "all", range(count))]
    if k == 1:
        return [_placement(topo, "single:0", (0,))]
    best: dict[str, tuple[int, tuple[int, ...]]] = {}
    for subset in _subsets(topo, k):
        slowest = topo.slowest(subset)
        assert slowest is not None
        key = (_numa_span(topo, subset), subset)
        if slowest not in best or key < best[slowest]:
            best[slowest] = key
    return [_placement(topo, f"{cls}:{','.join(map(str, best[cls][1]))}", best[cls][1])
            for cls in sorted(best, key=link_rank)]


ENUMERATE_UP_TO = 16  # GPUs a node may have for every subset to be examined (C(16, 8) = 12,870)


def _subsets(topo: Topology, k: int) -> Iterator[tuple[int, ...]]:
    """The k-GPU subsets to choose placements from: all of them on a node of up to 16 GPUs; on larger
    ones (an NVL32 or NVL72 domain), for each link class, subsets grown from each pair joined by that class
    while every link stays at least as fast, so the search is polynomial and every class present is found."""
    count = len(topo.gpus)
    if count <= ENUMERATE_UP_TO:
        yield from itertools.combinations(range(count), k)
        return
    for cls in topo.gpu_classes():
        limit = link_rank(cls)
        seeds = [(a, b) for a in range(count) for b in range(a + 1, count) if topo.link(a, b) == cls][:64]
        for a, b in seeds:
            chosen = [a, b]
            for g in range(count):
                if len(chosen) == k:
                    break
                if g not in chosen and all(link_rank(topo.link(g, x)) <= limit for x in chosen):
                    chosen.append(g)
            if len(chosen) == k:
                yield tuple(sorted(chosen))


def _signature(topo: Topology, subset: Sequence[int]) -> tuple[object, ...]:
    pairs = sorted((topo.link(a, b) for a, b in itertools.combinations(subset, 2)), key=link_rank)
    degrees = sorted(tuple(sorted((topo.link(a, b) for b in subset if b != a), key=link_rank)) for a in subset)
    return tuple(pairs), tuple(degrees), _numa_span(topo, subset)


def exhaustive(topo: Topology, k: int) -> list[Placement]:
    """Every k-GPU subset up to symmetry (same links between and around its GPUs, same NUMA span),
    labelled by its ids (``013``), slowest link first."""
    _check_k(topo, k)
    subsets: Iterator[tuple[int, ...]] = itertools.combinations(range(len(topo.gpus)), k)
    seen: dict[tuple[object, ...], tuple[int, ...]] = {}
    for index, subset in enumerate(subsets):
        if index >= EXHAUSTIVE_LIMIT:
            raise UsageError(f"more than {EXHAUSTIVE_LIMIT} subsets of {k} GPUs: use the per-class placements")
        seen.setdefault(_signature(topo, subset), subset)
    sep = "" if len(topo.gpus) <= 10 else "-"
    found = [_placement(topo, sep.join(map(str, s)), s) for s in seen.values()]
    return sorted(found, key=lambda p: (link_rank(p.slowest) if p.slowest else (0, 0), p.devices))


def explicit(topo: Topology, devices: Sequence[int]) -> Placement:
    """A placement the user names by ids, checked against the node."""
    check_devices(topo, devices)
    return _placement(topo, f"{topo.slowest(devices) or 'single'}:{','.join(map(str, devices))}", devices)


def cpu_slots(count: int, cpus: Sequence[int]) -> list[Placement]:
    """``count`` slots of a node without GPUs, each an even share of the CPUs (``cpu:<n>``): the units
    screening compares where there is no GPU to screen."""
    if not 1 <= count <= len(cpus):
        raise UsageError(f"cannot make {count} CPU slot(s) from {len(cpus)} CPU(s)")
    share = len(cpus) // count
    ordered = sorted(cpus)
    return [Placement(f"cpu:{i}", (), None, tuple(ordered[i * share:(i + 1) * share]), ()) for i in range(count)]


def default_counts(topo: Topology) -> list[int]:
    """GPU counts worth planning on a node: 2, 4, 8 ... up to its size."""
    counts, k = [], 2
    while k < len(topo.gpus):
        counts.append(k)
        k *= 2
    return counts + [len(topo.gpus)] if len(topo.gpus) > 1 else [1]
