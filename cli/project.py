"""``hvdbench project``: throughput, efficiency and time to train projected to N nodes."""

from __future__ import annotations

import argparse
from pathlib import Path



def cmd_project(args: argparse.Namespace) -> int:
    """Project each workload to the node counts; print the inputs and the table, write the section."""
    from hvdbench.analysis.projection.shown import write_projection
    from hvdbench.analysis.projection.target import load_target

    target = load_target(args.target) if args.target else None
    out = args.output or (Path(args.dirs[0]) / "report")
    algorithms = ("ring", "hierarchical") if args.algorithm == "both" else (args.algorithm,)
    text, paths = write_projection(args.dirs, out, args.nodes, args.gpus_per_node, args.link, algorithms, args.warmup,
                                   target, args.keep_measured_compute)
    print(text)
    print(f"projection: {paths['markdown']}, {paths['csv']} and {paths['plot']}")
    return 0
