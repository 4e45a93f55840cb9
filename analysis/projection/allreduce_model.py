"""The arithmetic of the step-time projection: allreduce cost per link class (latency alpha, seconds per
byte beta) fitted from a measured time-vs-size curve, ring and hierarchical allreduce over N ranks on n
nodes, Horovod's fusion of gradients into buffers per cycle, and a step's time between "exchange fully
overlapped with backward" and "not overlapped". Pure numbers: no DataFrame, no framework.

Ring allreduce of ``b`` bytes over ``p`` ranks (reduce-scatter then allgather): ``2(p-1)`` steps, each
sending ``b/p`` bytes over every link of the ring at once, so ``t = 2(p-1)·alpha + 2(p-1)/p·b·beta``
(the bus bandwidth nccl-tests reports is ``1/beta``)."""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from hvdbench.core.errors import UsageError

from .exchange_model import exchange_terms

# Horovod's defaults since 0.21 (HOROVOD_FUSION_THRESHOLD, HOROVOD_CYCLE_TIME), used where a run set neither.
DEFAULT_FUSION_BYTES = 128 * 2**20
DEFAULT_CYCLE_S = 1e-3


@dataclass(frozen=True)
class Link:
    """One link class's allreduce terms: ``alpha_s`` per ring step, ``beta_s`` per byte a rank sends (per
    node, for a link between nodes: the node's whole injection bandwidth), and where they came from.

    A link fitted from a measured curve keeps it (``sizes``, ``times`` at ``ranks``): at the ranks it was
    measured at, an allreduce costs what was measured (interpolated); at other rank counts, that times the
    ratio of the ring formula at the two counts. Curves are not straight lines (protocol switches, a
    cycle's wait below a millisecond), so this keeps every size as measured."""

    name: str
    alpha_s: float
    beta_s: float
    source: str = ""
    sizes: tuple[float, ...] = ()
    times: tuple[float, ...] = ()
    ranks: int = 0
    stream: bool = False  # fitted from a training pattern: sizes are a step's total, streamed through the link

    @property
    def gbs(self) -> float:
        """Bandwidth in GB/s (the bus bandwidth a large ring allreduce reaches)."""
        return 1.0 / self.beta_s / 1e9 if self.beta_s > 0 else math.inf

    def formula_s(self, nbytes: float, ranks: int) -> float:
        """The ring formula with this link's alpha and beta."""
        return 2 * (ranks - 1) * (self.alpha_s + nbytes / ranks * self.beta_s)

    def measured_s(self, nbytes: float) -> float:
        """The measured curve at a size: log-log interpolation between sizes; below the smallest, its time;
        above the largest, its time plus the fitted bandwidth term for the extra bytes."""
        sizes, times = np.asarray(self.sizes), np.asarray(self.times)
        if nbytes <= sizes[0]:
            return float(times[0])
        if nbytes >= sizes[-1]:
            return float(times[-1] + 2 * (self.ranks - 1) / self.ranks * (nbytes - sizes[-1]) * self.beta_s)
        return float(np.exp(np.interp(math.log(nbytes), np.log(sizes), np.log(times))))


# What any link between or within nodes does (a 100 Mbit/s link is 0.0125 GB/s, NVLink 4 is 900 GB/s per GPU):
# a fit outside these says the curve measured something else (noise, a stalled rank, a clock), and a --link
# outside them is a slip of units.
PLAUSIBLE_GBS = (1e-4, 1e4)
PLAUSIBLE_ALPHA_S = 0.1
UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def parse_link(text: str, software: Link | None = None) -> Link:
    """``NAME=GB/s,latency`` (``ib400=50,2us``: 50 GB/s per node, 2 µs; a bare latency is in µs) as a Link
    between nodes. The measured software latency (``software``: the intra-node fit) is added to the wire's,
    since Horovod's and MPI's own per-message cost does not go away with a faster network."""
    match = re.fullmatch(r"\s*([A-Za-z0-9_.+-]+)\s*=\s*([0-9.eE+-]+)\s*,\s*([0-9.eE+-]+)\s*(s|ms|us|µs|ns)?\s*", text)
    if not match:
        raise UsageError(f"--link {text!r}: expected NAME=GB/s,latency (e.g. ib400=50,2us: 50 GB/s per node, 2 µs)")
    name, rate, latency, unit = match.groups()
    try:
        gbs, lat = float(rate), float(latency) * UNITS[unit or "us"]
    except ValueError:
        raise UsageError(f"--link {text!r}: {rate!r} or {latency!r} is not a number") from None
    low, high = PLAUSIBLE_GBS
    if not (low <= gbs <= high) or not (0 <= lat <= PLAUSIBLE_ALPHA_S):
        raise UsageError(f"--link {text!r}: a link has {low:g} to {high:g} GB/s and a latency of 0 to "
                         f"{PLAUSIBLE_ALPHA_S * 1e3:g} ms; got {gbs:g} GB/s and {lat * 1e6:g} µs")
    base = software.alpha_s if software else 0.0
    return Link(name, base + lat, 1.0 / (gbs * 1e9),
                f"--link {name}: {gbs:g} GB/s per node, {lat * 1e6:g} µs + {base * 1e6:.1f} µs measured "
                "software latency")


def ring_allreduce_s(nbytes: float, ranks: int, link: Link) -> float:
    """Ring allreduce time: ``2(p-1)·alpha + 2(p-1)/p·bytes·beta``, anchored to the link's measured curve
    where it has one; nothing to do on one rank."""
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    value = link.formula_s(nbytes, ranks)
    if link.sizes:
        value *= link.measured_s(nbytes) / link.formula_s(nbytes, link.ranks)
    return value


def flat_allreduce_s(nbytes: float, nodes: int, per_node: int, intra: Link, inter: Link | None) -> float:
    """One ring through all ``nodes × per_node`` ranks: within a node on the intra-node link; across nodes
    the ring runs at the pace of its slower link (the node's link carries one ring edge each way)."""
    ranks = nodes * per_node
    if nodes <= 1:
        return ring_allreduce_s(nbytes, ranks, intra)
    assert inter is not None
    if per_node == 1:  # no hop within a node
        return ring_allreduce_s(nbytes, ranks, inter)
    return max(ring_allreduce_s(nbytes, ranks, intra), ring_allreduce_s(nbytes, ranks, inter))


def hierarchical_allreduce_s(nbytes: float, nodes: int, per_node: int, intra: Link, inter: Link | None) -> float:
    """Horovod's hierarchical allreduce: reduce-scatter within each node, an allreduce across nodes of each
    local rank's 1/g share (the g local ranks at once, sharing the node's link: together a ring of the whole
    buffer over the nodes), allgather within the node: ``ring(bytes, g, intra) + ring(bytes, nodes, inter)``."""
    if nodes <= 1:
        return ring_allreduce_s(nbytes, per_node, intra)
    assert inter is not None
    return ring_allreduce_s(nbytes, per_node, intra) + ring_allreduce_s(nbytes, nodes, inter)


def _anchor(link: Link, nbytes: float) -> float:
    """How far the link's measured curve sits from its own ring formula at this size (1: no curve): what the
    software and protocol add at that size, carried to another algorithm's formula over the same link."""
    if not link.sizes or nbytes <= 0:
        return 1.0
    return link.measured_s(nbytes) / link.formula_s(nbytes, link.ranks)


def tree_allreduce_s(nbytes: float, nodes: int, per_node: int, intra: Link, inter: Link | None) -> float:
    """NCCL's double binary tree: a chain through a node's ranks and two trees across nodes (each node a leaf of
    one), reduce up then broadcast down, pipelined: latency ``2(log2(nodes)·alpha_inter + (g-1)·alpha_intra)``,
    every byte twice over the slower of the two links (exchange_model.exchange_terms, the terms the back-test on
    published results checks). Within one node NCCL rings."""
    if nodes <= 1:
        return ring_allreduce_s(nbytes, per_node, intra)
    if nbytes <= 0:
        return 0.0
    assert inter is not None
    latency, moved = exchange_terms(nbytes, nodes * per_node, nodes, inter.alpha_s, "tree", intra.alpha_s)
    per_byte = max(inter.beta_s, intra.beta_s if per_node > 1 else 0.0)
    return (latency + moved * per_byte) * _anchor(inter, nbytes)


# NVLink SHARP's gain on a ring's bus bandwidth within an 8-GPU H100 board: ~480 against ~370 GB/s (NCCL's
# maintainers, NVIDIA/nccl#1442 and nccl-tests#212: "a 30% improvement")
NVLS_GAIN = 1.3
COLLNET_RADIX = 32  # nodes a SHARP aggregation switch level gathers (a 64-port switch: 32 down, 32 up)


def nvls_allreduce_s(nbytes: float, nodes: int, per_node: int, intra: Link, inter: Link | None) -> float:
    """NCCL's NVLS: the NVSwitch reduces (a ring's bandwidth term over NVLS_GAIN, two latencies); across nodes
    NVLS_TREE, a tree of the whole buffer pipelined with the switch's reduction (latencies add, the slower
    bandwidth term rules)."""
    if nbytes <= 0 or per_node * nodes <= 1:
        return 0.0
    within = 2 * (per_node - 1) / per_node * nbytes * intra.beta_s / NVLS_GAIN if per_node > 1 else 0.0
    latency = 2 * intra.alpha_s if per_node > 1 else 0.0
    if nodes <= 1:
        return (latency + within) * _anchor(intra, nbytes)
    assert inter is not None
    across = 2 * nbytes * inter.beta_s
    return (latency + 2 * math.log2(nodes) * inter.alpha_s + max(within, across)) * _anchor(inter, nbytes)


def collnet_allreduce_s(nbytes: float, nodes: int, per_node: int, intra: Link, inter: Link | None) -> float:
    """NCCL's CollNet (SHARP in the InfiniBand switches), as its ideal: within the node a ring's reduce-scatter
    and all-gather; across nodes each node's bytes go once up an aggregation tree of COLLNET_RADIX-wide switch
    levels and the sum once down (a latency a level each way, not a step per node), pipelined with the node's
    part. Measure it (NCCL_ALGO=CollNet) where the figure matters."""
    if nodes <= 1:
        return ring_allreduce_s(nbytes, per_node, intra)
    if nbytes <= 0:
        return 0.0
    assert inter is not None
    levels = max(1, math.ceil(math.log(nodes) / math.log(COLLNET_RADIX)))
    within = 2 * (per_node - 1) / per_node * nbytes * intra.beta_s if per_node > 1 else 0.0
    latency = 2 * levels * inter.alpha_s + (2 * (per_node - 1) * intra.alpha_s if per_node > 1 else 0.0)
    return (latency + max(within, nbytes * inter.beta_s)) * _anchor(inter, nbytes)


ALGORITHMS: dict[str, Callable[[float, int, int, Link, Link | None], float]] = {
    "ring": flat_allreduce_s, "hierarchical": hierarchical_allreduce_s, "tree": tree_allreduce_s,
    "nvls": nvls_allreduce_s, "collnet": collnet_allreduce_s}
CHOSEN = "nccl"  # the algorithm NCCL would pick at each buffer's size and node count, among the fabric's


@dataclass(frozen=True)
class Fabric:
    """What a cluster's fabric offers NCCL beyond ring and tree: NVLink SHARP in the node's NVSwitch (NVLS) and
    SHARP aggregation in the switches between nodes (CollNet)."""

    nvls: bool = False
    collnet: bool = False

    def algorithms(self) -> tuple[str, ...]:
        """The algorithms NCCL chooses among on this fabric."""
        return ("ring", "tree", *(("nvls",) if self.nvls else ()), *(("collnet",) if self.collnet else ()))

    def refuses(self, algorithm: str) -> str | None:
        """Why ``algorithm`` cannot be forced on this fabric (None: it can)."""
        if algorithm == "nvls" and not self.nvls:
            return "nvls needs NVLink SHARP within a node: a target whose intra_node says nvls = true"
        if algorithm == "collnet" and not self.collnet:
            return "collnet needs SHARP switches between nodes: a target whose inter_node says collnet = true"
        return None


def nccl_pick(nbytes: float, nodes: int, per_node: int, intra: Link | None, inter: Link | None,
              fabric: Fabric = Fabric()) -> str:
    """The algorithm NCCL would run a buffer of ``nbytes`` with: the fastest of the fabric's by their cost (NCCL's
    tuning model: latency plus bytes over bandwidth, the least taken); ring where only one link is known."""
    link = intra or inter
    if link is None or nbytes <= 0:
        return "ring"
    times = {name: ALGORITHMS[name](nbytes, nodes, per_node, link, inter) for name in fabric.algorithms()
             if nodes > 1 or name in ("ring", "nvls")}
    return min(times, key=lambda name: (times[name], name != "ring"))


def step_allreduce(algorithm: str, nodes: int, per_node: int, intra: Link | None, inter: Link | None,
                   step_bytes: float, fabric: Fabric = Fabric()) -> Callable[[float], float]:
    """The cost of one fused buffer in a step that exchanges ``step_bytes`` in all. Over a link fitted from
    isolated calls, each buffer costs what a call of its size costs. Over a link fitted from a training
    pattern (``Link.stream``) the step's buffers follow each other through the link as that pattern's did,
    so each costs its share of the whole step's exchange at that total: a small buffer in the stream waits
    behind the others and passes at the stream's rate, not at the rate a lone message of its size gets."""
    used = inter if nodes > 1 else (intra or inter)

    def one(nbytes: float) -> float:
        name = nccl_pick(nbytes, nodes, per_node, intra, inter, fabric) if algorithm == CHOSEN else algorithm
        return ALGORITHMS[name](nbytes, nodes, per_node, intra or inter, inter)  # type: ignore[arg-type]

    if used is None or not used.stream or step_bytes <= 0:
        return one
    per_byte = one(step_bytes) / step_bytes
    return lambda nbytes: nbytes * per_byte


def fit_link(sizes: Sequence[float] | np.ndarray, times: Sequence[float] | np.ndarray, ranks: int, name: str,
             source: str = "",
             stream: bool = False) -> Link:
    """alpha and beta from a measured allreduce curve at ``ranks`` ranks (``t = 2(p-1)·alpha +
    2(p-1)/p·bytes·beta``): beta from the least-squares slope over the large sizes (within 64x of the
    largest, at least the two largest), where bandwidth rules; alpha from what the smallest size took
    beyond its bandwidth term (never below 0). Small messages pass a shaped link's bucket at line rate and
    large ones meet protocol switches, so one straight line through every size fits neither end. The link
    keeps the curve itself (``Link.measured_s``)."""
    x, y = np.asarray(sizes, dtype=float), np.asarray(times, dtype=float)
    if ranks < 2 or len(x) < 2 or len(np.unique(x)) < 2 or np.any(y <= 0):
        raise ValueError("a link fit needs two or more sizes at two or more ranks, every time positive")
    order = np.argsort(x)
    x, y = x[order], y[order]
    large = x >= x[-1] / 64
    if large.sum() < 2:
        large[-2:] = True
    slope = float(np.polyfit(x[large], y[large], 1)[0]) if len(np.unique(x[large])) >= 2 else 0.0
    if slope <= 0:
        slope = float(y[-1] / x[-1])
    steps = 2 * (ranks - 1)
    alpha = max(0.0, float(y[0] - slope * x[0])) / steps
    return Link(name, alpha, slope * ranks / steps, source, tuple(float(v) for v in x), tuple(float(v) for v in y),
                ranks, stream)


MIN_SIZES = 3


def curve_problem(sizes: Sequence[float] | np.ndarray, times: Sequence[float] | np.ndarray, ranks: int) -> str | None:
    """Why a measured allreduce curve cannot be fitted into a link (None: it can): fewer than MIN_SIZES sizes,
    times that fall as sizes grow (the largest size faster than the smallest), or a fit whose latency or
    bandwidth no link has."""
    x, y = np.asarray(sizes, dtype=float), np.asarray(times, dtype=float)
    if len(np.unique(x)) < MIN_SIZES:
        return (f"{len(np.unique(x))} message size(s): a link fit needs {MIN_SIZES} or more (collectives --min-bytes, "
                "--max-bytes, --factor)")
    order = np.argsort(x)
    x, y = x[order], y[order]
    if np.any(y <= 0) or ranks < 2:
        return "a link fit needs two or more ranks and every time positive"
    if y[-1] <= y[0]:
        return (f"times fall as sizes grow ({y[0] * 1e6:.1f} µs at {x[0]:,.0f} B, {y[-1] * 1e6:.1f} µs at "
                f"{x[-1]:,.0f} B): the curve measured noise, not the link; run it with more --iters")
    link = fit_link(x, y, ranks, "check")
    low, high = PLAUSIBLE_GBS
    if not (low <= link.gbs <= high) or link.alpha_s > PLAUSIBLE_ALPHA_S:
        return (f"the fit gives {link.alpha_s * 1e6:,.1f} µs latency and {link.gbs:,.4g} GB/s, which no link has "
                f"(plausible: {low:g}-{high:g} GB/s, under {PLAUSIBLE_ALPHA_S * 1e3:g} ms)")
    return None


def fusion_schedule(grad_bytes: float, tensors: int, backward_s: float, fusion_bytes: float, cycle_s: float,
                    allreduce: Callable[[float], float], overlaps: bool = True) -> tuple[list[float], float]:
    """The buffers Horovod's background thread reduces in one step, and when the last one ends (seconds
    from the start of backward), with the exchange overlapped as well as it can be.

    Gradients (``tensors`` equal shares of ``grad_bytes``) become ready evenly over backward (all at its end
    where the framework exchanges after backward, ``overlaps=False``); each cycle, at least ``cycle_s`` after
    the last and not before the previous allreduces end, fuses what is ready into buffers of at most
    ``fusion_bytes`` and reduces them one after another."""
    tensors = max(1, int(tensors))
    each = grad_bytes / tensors
    ready = [backward_s * (i + 1) / tensors if overlaps else backward_s for i in range(tensors)]
    threshold = max(fusion_bytes, each)  # a tensor larger than the threshold goes alone
    buffers: list[float] = []
    tick, busy, done = 0.0, 0.0, 0
    while done < tensors:
        tick = max(tick + cycle_s, busy, ready[done])
        waiting = bisect.bisect_right(ready, tick, lo=done) - done
        current = 0.0
        for _ in range(waiting):
            if current and current + each > threshold:
                buffers.append(current)
                busy = max(busy, tick) + allreduce(current)
                current = 0.0
            current += each
        buffers.append(current)
        busy = max(busy, tick) + allreduce(current)
        done += waiting
    return buffers, busy


@dataclass(frozen=True)
class StepModel:
    """A workload's step on one rank: compute (no exchange), its backward share, and its gradients."""

    compute_s: float
    backward_s: float
    grad_bytes: float
    tensors: int
    fusion_bytes: float = DEFAULT_FUSION_BYTES
    cycle_s: float = DEFAULT_CYCLE_S
    overlaps: bool = True  # the framework starts allreduces during backward (PyTorch's hooks)

    def bounds(self, allreduce: Callable[[float], float]) -> tuple[float, float, float]:
        """(exchange seconds on its own, step fully overlapped, step not overlapped): the exchange is the
        fused buffers' allreduces plus half a cycle's wait; fully overlapped, the step ends when the last
        buffer's allreduce ends after backward (never before compute); not overlapped, compute + exchange."""
        buffers, end = fusion_schedule(self.grad_bytes, self.tensors, self.backward_s, self.fusion_bytes,
                                       self.cycle_s, allreduce, self.overlaps)
        exchange = sum(allreduce(b) for b in buffers) + self.cycle_s / 2
        if exchange <= self.cycle_s / 2:  # one rank: nothing exchanged
            return 0.0, self.compute_s, self.compute_s
        tail = max(0.0, end - self.backward_s) + self.cycle_s / 2
        full = self.compute_s + min(tail, exchange)
        return exchange, full, self.compute_s + exchange

    def step_s(self, allreduce: Callable[[float], float], overlap: float) -> float:
        """The step at a fraction ``overlap`` of the way from not overlapped (0) to fully overlapped (1)."""
        _, full, none = self.bounds(allreduce)
        return none - overlap * (none - full)

    def overlap_of(self, allreduce: Callable[[float], float], measured_step_s: float) -> float:
        """The overlap fraction a measured step implies (clipped to [0, 1]); 1 where the bounds coincide."""
        _, full, none = self.bounds(allreduce)
        if none - full <= 1e-12:
            return 1.0
        return float(min(1.0, max(0.0, (none - measured_step_s) / (none - full))))

    def scaled(self, compute_s: float) -> "StepModel":
        """The same step with another compute time (a bootstrap draw), backward scaled alike."""
        return replace(self, compute_s=compute_s, backward_s=self.backward_s * compute_s / self.compute_s)
