"""The child process of the SimGrid second opinion (analysis/projection/simulated.py): one platform, one ring, one
simulation (SimGrid's engine is one a process), its figures printed as one JSON line.

The platform: the job's nodes on leaf switches of ``nodes_per_leaf`` nodes, each node's link to its leaf at the
node's injection bandwidth with the whole per-step latency on it (so every route costs one latency, as the formula's
does, and only contention differs), each leaf's uplink to a non-blocking core at ``nodes_per_leaf × bandwidth /
taper``; links split-duplex (a ring's send and receive do not share a direction). The ring: each node sends its
chunk to the next and waits for the previous one's, ``steps`` times (every step of a ring moves the same chunks
between the same neighbours, so a few steps are every step). Max-min sharing (CM02), no TCP factors, no cross
traffic: SimGrid's flow model at its plainest, so that on a non-blocking fabric it is the formula."""

from __future__ import annotations

import json
import random
import sys
import time
from typing import Any


def _platform(sg: Any, nodes: int, per_leaf: int, taper: float, gbs: float, alpha_s: float,
              placement: str, seed: int) -> list[Any]:
    """The hosts in ring order: packed (leaf after leaf) or scattered (the same leaves, the ring's order at random)."""
    zone = sg.NetZone.create_dijkstra_zone("fabric")
    core = zone.create_router("core")
    leaves = []
    for leaf in range(-(-nodes // per_leaf)):
        router = zone.create_router(f"leaf{leaf}")
        up = zone.create_split_duplex_link(f"up{leaf}", per_leaf * gbs * 1e9 / taper)
        zone.add_route(router, core, None, None, [sg.LinkInRoute(up, sg.LinkInRoute.UP)], True)
        leaves.append(router)
    order = list(range(nodes))
    if placement == "scattered":
        random.Random(seed).shuffle(order)
    hosts = []
    for position in order:
        host = zone.create_host(f"node{position}", 1e9)
        nic = zone.create_split_duplex_link(f"nic{position}", gbs * 1e9).set_latency(alpha_s / 2)
        zone.add_route(host.netpoint, leaves[position // per_leaf], None, None,
                       [sg.LinkInRoute(nic, sg.LinkInRoute.UP)], True)
        hosts.append(host)
    zone.seal()
    return hosts


def _rank(sg: Any, i: int, n: int, chunk: int, steps: int, ended: list[float]) -> None:
    mine, after = sg.Mailbox.by_name(f"ring{i}"), sg.Mailbox.by_name(f"ring{(i + 1) % n}")
    for _ in range(steps):
        sent = after.put_async(None, chunk)
        mine.get()
        sent.wait()
    ended.append(sg.Engine.clock)


def main(argv: list[str]) -> int:
    """argv[0]: a JSON object (nodes, chunk_bytes, gbs, alpha_s, nodes_per_leaf, taper, placement, steps, seed)."""
    from hvdbench.analysis.projection.simulated import simgrid_module

    args = json.loads(argv[0])
    sg = simgrid_module()
    engine = sg.Engine(["hvdbench", "--cfg=network/model:CM02", "--cfg=network/crosstraffic:0",
                        "--log=root.thres:critical", "--cfg=contexts/factory:thread"])
    hosts = _platform(sg, args["nodes"], args["nodes_per_leaf"], args["taper"], args["gbs"], args["alpha_s"],
                      args["placement"], args["seed"])
    ended: list[float] = []
    for i, host in enumerate(hosts):
        sg.Actor.create(f"rank{i}", host, _rank, sg, i, len(hosts), max(1, int(args["chunk_bytes"])), args["steps"],
                        ended)
    started = time.perf_counter()
    engine.run()
    print(json.dumps({"step_s": max(ended) / args["steps"], "wall_s": time.perf_counter() - started,
                      "version": str(getattr(sg, "simgrid_version", ""))}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
