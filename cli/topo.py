"""``hvdbench topo``: the node's GPU and NIC topology and the placements it offers."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .flags import rank_counts


def cmd_topo(args: argparse.Namespace) -> int:
    """Print the topology and its placements."""
    from hvdbench.core.node_topology import NodeTopology, node_topology
    from hvdbench.core.topology import link_rank, read_topology_file
    from hvdbench.launchers.placement import by_link_class, default_counts, exhaustive

    node = NodeTopology(read_topology_file(args.file)) if args.file else node_topology()
    topo = node.topology
    counts = args.gpus or default_counts(topo)
    planner = exhaustive if args.exhaustive else by_link_class
    placements = {k: planner(topo, k) for k in counts}
    if args.json:
        print(json.dumps({"topology": topo.to_json(), "disagreements": list(node.disagreements),
                          "notes": list(node.notes),
                          "placements": {str(k): [{**asdict(p), "visible_devices": p.visible_devices} for p in ps]
                                         for k, ps in placements.items()}}, indent=2))
        return 0
    print(f"topology from {topo.source}: {len(topo.gpus)} GPU(s), {len(topo.nics)} NIC(s)\n")
    print(topo.matrix_text())
    for line in node.disagreements:
        print(f"NVML and nvidia-smi disagree: {line}")
    for line in node.notes:
        print(f"note: {line}")
    print("\nlinks between GPUs, fastest first: " + ", ".join(sorted(topo.gpu_classes(), key=link_rank)))
    nearest = topo.nearest_nics()
    if nearest:
        print("nearest NIC of each GPU: " + ", ".join(f"GPU{g} {nic} ({link})" for g, nic, link in nearest))
    warning = topo.nic_warning()
    if warning:
        print(f"warning: {warning}")
    for k, found in placements.items():
        print(f"\nplacements of {k} GPU(s):")
        for placement in found:
            print("  " + placement.describe())
    return 0


def declare(sub: Any) -> None:
    """hvdbench topo: the node's topology and placements."""
    topo = sub.add_parser("topo", help="show this node's GPU topology and named placements",
                          description="Read the GPU/NIC link matrix (NVML, else nvidia-smi, or --file) and list "
                                      "named placements for 2, 4, ... GPUs.")
    topo.set_defaults(func=cmd_topo)
    topo.add_argument("--file", type=Path, default=None,
                      help="a saved 'nvidia-smi topo -m' output (or 'hvdbench topo --json') instead of this machine")
    topo.add_argument("--gpus", type=rank_counts, default=None, help="GPU counts to plan (default 2,4,...,all)")
    topo.add_argument("--exhaustive", action="store_true", help="every subset up to symmetry, labelled by ids")
    topo.add_argument("--json", action="store_true", help="print JSON for other tools")
