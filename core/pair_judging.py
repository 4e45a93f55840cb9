"""Whether the bus bandwidth between sets of nodes says a link is bad (NVIDIA's bring-up practice: a bad cable or
port shows as one pair's low busbw): each pair's busbw at its largest size set against the best any pair reaches (a
pair runs at its slower node's pace: a lone fast pair among slow ones means the others are slow, however many; a bad
node cannot lower the reference), flagged low below LOW of it with the nodes low with every other named, and those
nodes' drain command; against the link's nominal figure too where it is given, the only ground on which a pair is
flagged high (faster than the link can be); two nodes, one pair, are "too few to compare" without it. One rule for
``hvdbench fabric --nccl-tests`` and the report of its results. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

LOW = 0.90  # a pair below this share of its reference is flagged low (above 1 / LOW of the expected figure, high)
Pair = tuple[str, ...]


@dataclass(frozen=True)
class NodeSet:
    """One set of nodes' nccl-tests result: its nodes, how it is named, its busbw (GB/s) at its largest size."""

    nodes: Pair
    where: str
    busbw: float


def _reference(pairs: dict[Pair, float], expected: float | None) -> tuple[float | None, set[Pair]]:
    """What the pairs are judged against: the best any pair reaches (a lone fast pair among slow ones means the others
    are slow, not that it found another path), and the pairs above 1 / LOW of the expected figure, the only ones
    flagged high (faster than the link can be: a path other than the fabric's), which set no reference."""
    high = {nodes for nodes, busbw in pairs.items() if expected is not None and busbw > expected / LOW}
    rest = [busbw for nodes, busbw in pairs.items() if nodes not in high]
    return (max(rest) if rest else None), high


def judge_sets(sets: Sequence[NodeSet], expected: float | None = None) -> list[tuple[str, float, str]]:
    """(where, busbw at the largest size, what it says) for each set. Every pair is set against the best any pair
    reaches (where other pairs share a node with it), below LOW of it flagged low, and a node whose every pair is low
    named; against ``expected`` too (the link's nominal busbw, where given): a set meeting it is never high, only one
    above 1 / LOW of it (faster than the link can be); where one pair alone is fast and nothing is expected, it is
    said that the others are judged slow against it; a lone pair without it: too few to compare."""
    done = list(sets)
    pairs: dict[tuple[str, ...], float] = {d.nodes: d.busbw for d in done if len(d.nodes) == 2}
    top, high = _reference(pairs, expected)
    judged = {d.nodes: _judged(d.nodes, d.busbw, pairs, top, high, expected) for d in done}
    low = [nodes for nodes, said in judged.items() if len(nodes) == 2 and said.startswith("flagged low")]
    every = {n for nodes in pairs for n in nodes if sum(n in p for p in pairs) >= 2
             and sum(n in p for p in low) == sum(n in p for p in pairs)}
    lone = _lone_fast(pairs, top, high, expected, low)
    return [(d.where, d.busbw, judged[d.nodes]
             + "".join(f"; {n} low with every other node" for n in sorted(every) if n in d.nodes and d.nodes in low)
             + (lone if d.nodes not in low and d.nodes in pairs and pairs[d.nodes] == top else ""))
            for d in done]


def _lone_fast(pairs: dict[tuple[str, ...], float], top: float | None, high: set[tuple[str, ...]],
               expected: float | None, low: Sequence[tuple[str, ...]]) -> str:
    """Where the fastest pair is the only one at its pace and nothing is expected: what the others are judged by."""
    if expected is not None or top is None or len(pairs) - len(high) < 2:
        return ""
    at_top = [nodes for nodes, busbw in pairs.items() if nodes not in high and busbw >= LOW * top]
    if len(at_top) != 1 or not low:
        return ""
    return ("; the only pair at this pace: the others are judged slow against it (--expect-busbw, the link's nominal "
            "figure, tells a slow fabric from one fast path)")


def _judged(nodes: tuple[str, ...], busbw: float, pairs: dict[tuple[str, ...], float], top: float | None,
            high: set[tuple[str, ...]], expected: float | None) -> str:
    """What one set's busbw says against the best any pair reaches and the expected figure."""
    said = [] if expected is None else [f"{busbw / expected:.0%} of the {expected:,.1f} GB/s expected"]
    if nodes in high:
        return "flagged high: " + "; ".join(said) + ": faster than the link can be (a node twice, a shared switch?)"
    low = expected is not None and busbw < LOW * expected
    shares = len(nodes) == 2 and any(set(other) & set(nodes) for other in pairs if other != nodes)
    if top and len(nodes) == 2 and len(pairs) > 1:
        said.append(f"{busbw / top:.0%} of the best any pair reaches ({top:,.1f} GB/s)" + (
            "" if shares else ", though no other pair shares a node with it"))
        low = low or busbw < LOW * top
    elif expected is None:
        said.append("too few to compare: no other pair of these nodes (give --expect-busbw, the link's nominal "
                    "figure)" if len(nodes) == 2 else f"{len(nodes)} nodes")
    return ("flagged low: " + "; ".join(said) + " (a link, port or cable of these nodes?)") if low else "; ".join(said)


def drained(judged: Sequence[tuple[str, float, str]]) -> list[str]:
    """The nodes every pair of which was low: those to drain."""
    found = [m.group(1) for _, _, said in judged for m in re.finditer(r"; (\S+) low with every other node", said)]
    return sorted(set(found))


def drain_command(node: str, why: str = "low with every other node") -> list[str]:
    """The command for the engineer to run to take a node out of service (hvdbench changes no node's state)."""
    return ["scontrol", "update", f"NodeName={node}", "State=DRAIN", f"Reason=hvdbench fabric: {node} {why}"]
