"""The exchange of a data-parallel step as a published system's own description allows it: the gradient bytes of
the model, the links within a node (its accelerator's) and between nodes (its NICs' line rate, read from the system's
network text), and the collective algorithm NCCL would pick at that size and node count. Pure numbers.

NCCL chooses among its algorithms by a cost model of each (latency plus bytes over bandwidth) and takes the fastest
(NCCL's tuning: ring, tree, and NVLS/CollNet where the fabric has them). Here: a ring's ``2(N-1)`` steps each wait on
the slowest hop, ``2(N-1)/N`` of the bytes over the link; a tree's latency grows with ``log2`` of the nodes, its
bytes twice over the link; parameter servers (tf_cnn_benchmarks' distributed_replicated, one on each of ``P`` of the
``N`` nodes) load most a node that holds one: its worker pushes ``(P-1)/P`` of the gradients to the other servers and
its server answers the ``N-1`` other workers with ``1/P`` of the parameters each, ``(N+P-2)/P`` of the gradients each
way (a ring's ``2(N-1)/N`` where every node holds one); one node's servers on its CPU (``parameter_server(cpu)``)
hold no variable on a GPU, so each GPU pushes all its gradients and pulls every parameter over its own path to the
host, whatever the GPUs.
Bus bandwidth across nodes is the node's NIC line rate times LINK_EFFICIENCY (what nccl-tests' all_reduce reaches
on a multi-rail node), within a node the accelerator's typical all_reduce bus bandwidth."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from hvdbench.readers.published_table import by_servers

# trained parameters a step all-reduces (the models' published sizes: ResNet-50 25.6 M, BERT-large 335 M, ...)
PARAMETERS = {"resnet": 25.6e6, "resnet50": 25.6e6, "bert": 335e6, "inception3": 23.8e6, "resnet152": 60.2e6,
              "vgg16": 138.4e6}
# all_reduce bus bandwidth within one node, GB/s, by accelerator (nccl-tests' typical figures on an 8-GPU board:
# NVLink 4 H100, NVLink 3 A100, NVLink 2 V100, NVLink 1 P100, PCIe 3 K80)
INTRA_GBS = (("H100", 360.0), ("A100", 230.0), ("V100", 130.0), ("P100", 36.0), ("K80", 6.0))
LINK_EFFICIENCY = 0.9   # of the NICs' line rate a large all_reduce reaches
INTER_ALPHA_S = 5e-6    # a step's latency across nodes (RDMA); over TCP sockets TCP_ALPHA_S
TCP_ALPHA_S = 30e-6
INTRA_ALPHA_S = 2e-6
CPU_SERVER = "parameter server on CPU"
SERVERS = "parameter servers"
ALGORITHMS = ("ring", "tree")  # what NCCL picks between here (NVLS/CollNet: where a target says the fabric has them)
_RATE = re.compile(r"(\d{1,4}(?:\.\d+)?)\s*Gb(?:it)?(?:/s|ps|/sec)", re.I)
_COUNT = re.compile(r"\b(\d{1,3})\s*x\s", re.I)


@dataclass(frozen=True)
class Links:
    """Bus bandwidths (bytes/s; ``inf``: the exchange hidden) within and between nodes, latencies per step, and
    where each came from."""

    intra: float | None
    inter: float | None
    inter_alpha: float = INTER_ALPHA_S
    intra_source: str = ""
    inter_source: str = ""


def node_rate_gbs(network: str) -> float | None:
    """A node's NIC line rate in GB/s from a system description's network text: ``Compute: 8x ConnectX-7 IB NDR
    400Gb/s`` -> 400, ``2x ConnectX-6 IB HDR 200Gb/Sec`` -> 50 (the compute fabric's part where the text names
    storage and management networks too); None where it says no rate."""
    parts = [p.strip() for p in network.split(",") if p.strip()]
    compute = [p for p in parts if p.lower().startswith("compute")]
    for part in compute or [p for p in parts if not p.lower().startswith(("storage", "management"))]:
        match = _RATE.search(part)
        if match:
            count = _COUNT.search(part[:match.start()])
            return (int(count.group(1)) if count else 1) * float(match.group(1)) / 8.0
    return None


def intra_gbs(accelerator: str) -> float | None:
    """The typical all_reduce bus bandwidth within a node of this accelerator, GB/s; None where unknown."""
    return next((gbs for name, gbs in INTRA_GBS if name.lower() in accelerator.lower()), None)


def inter_alpha(network: str) -> float:
    """A step's latency across nodes: RDMA (InfiniBand, RoCE, EFA) or TCP."""
    return INTER_ALPHA_S if re.search(r"\b(IB|InfiniBand|RoCE|EFA|NDR|HDR|EDR)\b", network, re.I) or not network \
        else TCP_ALPHA_S


def exchange_terms(grad_bytes: float, ranks: int, nodes: int, alpha: float, algorithm: str,
                   intra_alpha: float = INTRA_ALPHA_S, servers: int | None = None) -> tuple[float, float]:
    """An exchange's latency (seconds) and the bytes it moves over its bottleneck link (time = latency + bytes /
    bus bandwidth), for ``ranks`` ranks on ``nodes`` nodes by ``algorithm`` (ring, tree, parameter servers, a
    parameter server on one node's CPU); ``alpha`` a step's latency across nodes, ``intra_alpha`` within one;
    ``servers`` the nodes that hold a parameter server (None: every node; on one node none crosses a NIC)."""
    if ranks <= 1:
        return 0.0, 0.0
    if nodes <= 1:
        alpha = intra_alpha
    if algorithm == "tree" and nodes > 1:
        return 2 * (math.log2(nodes) * alpha + (ranks // nodes - 1) * intra_alpha), 2 * grad_bytes
    if algorithm == CPU_SERVER:
        return 2 * alpha, 2 * grad_bytes
    if algorithm == SERVERS:
        spread = ranks if nodes <= 1 else nodes
        held = min(servers, spread) if servers and nodes > 1 else spread
        return 2 * alpha, (held + spread - 2) / held * grad_bytes
    return 2 * (ranks - 1) * alpha, 2 * (ranks - 1) / ranks * grad_bytes


def exchange_s(grad_bytes: float, ranks: int, nodes: int, links: Links, algorithm: str,
               servers: int | None = None) -> float:
    """Seconds a step's exchange takes (exchange_terms over the link it crosses: within a node on one node, between
    nodes else; ``servers``: the nodes holding a parameter server); 0 for one rank or a link that hides it; NaN where
    the link it needs is unknown."""
    if ranks <= 1:
        return 0.0
    bandwidth = links.intra if nodes <= 1 else links.inter
    if bandwidth is None:
        return math.nan
    if math.isinf(bandwidth):
        return 0.0
    latency, moved = exchange_terms(grad_bytes, ranks, nodes, links.inter_alpha, algorithm, servers=servers)
    return latency + moved / bandwidth


def chosen_algorithm(grad_bytes: float, ranks: int, nodes: int, links: Links, exchange: str = "",
                     forced: str | None = None) -> str:
    """The algorithm an exchange runs: the one forced, parameter servers where the figures say so (on one node's CPU
    where they say ``(cpu)``), else the one NCCL would pick (the fastest by the cost model: ring for large messages
    on few nodes, tree where latency grows)."""
    if forced:
        return forced
    if by_servers(exchange):
        return CPU_SERVER if nodes <= 1 and "(cpu)" in exchange.lower() else SERVERS
    if nodes <= 1:
        return "ring"
    times = {name: exchange_s(grad_bytes, ranks, nodes, links, name) for name in ALGORITHMS}
    finite = {k: v for k, v in times.items() if math.isfinite(v)}
    return min(finite, key=lambda k: finite[k]) if finite else "ring"
