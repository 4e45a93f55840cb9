"""``hvdbench project``: throughput, efficiency and time to train projected to N nodes."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hvdbench.core.errors import UsageError
from hvdbench.core.flags import non_negative_int, positive_int

from .flags import rank_counts


def cmd_project(args: argparse.Namespace) -> int:
    """Project each workload to the node counts; print the inputs and the table, write the section."""
    from hvdbench.analysis.projection.allreduce_model import Fabric
    from hvdbench.analysis.projection.shown import write_projection
    from hvdbench.analysis.projection.target import load_target

    out = args.output or (Path(args.dirs[0]) / "report")
    if args.backtest:
        from hvdbench.analysis.projection.backtest_shown import write_backtest

        if args.batch_per_gpu or args.global_batch:
            raise UsageError("--batch-per-gpu/--global-batch: not with --backtest, which predicts each size at the "
                             "batch it ran")
        forced = None if args.algorithm in (None, "both") else args.algorithm
        text, path = write_backtest(args.dirs, out, args.fit_nodes, args.link, forced)
        print(text)
        print(f"back-test: {path}")
        return 0
    if args.fit_nodes:
        raise UsageError("--fit-nodes: goes with --backtest")
    from hvdbench.analysis.projection.at_batch import MOST_BATCH, BatchAsked

    if max(args.batch_per_gpu or 0, args.global_batch or 0) > MOST_BATCH:
        raise UsageError(f"--batch-per-gpu/--global-batch: at most {MOST_BATCH:,} samples: beyond any training run")
    batch = BatchAsked(args.batch_per_gpu, args.global_batch) if args.batch_per_gpu or args.global_batch else None
    target = load_target(args.target) if args.target else None
    refused = (target.nccl_fabric() if target else Fabric()).refuses(args.algorithm or "")
    if refused:
        raise UsageError(f"--algorithm {args.algorithm}: {refused}")
    algorithms = {None: None, "both": ("ring", "hierarchical")}.get(args.algorithm, (args.algorithm,))
    text, paths = write_projection(args.dirs, out, args.nodes, args.gpus_per_node, args.link, algorithms, args.warmup,
                                   target, args.keep_measured_compute, batch)
    print(text)  # its inputs end with the projection's track record on published results
    print(f"projection: {paths['markdown']}, {paths['csv']} and {paths['plot']}")
    return 0


def declare(sub: Any) -> None:
    """hvdbench project: throughput and efficiency at N nodes."""
    project = sub.add_parser(
        "project", help="project throughput and efficiency to N nodes from a few measurements",
        description="Fit a step-time model per workload from the results (compute from the --independent twin or "
                    "--breakdown, gradient bytes, Horovod's fusion threshold and cycle time, allreduce latency and "
                    "bandwidth per link class from the collectives benchmark within a node and across nodes, the "
                    "overlap the measured runs show) and project throughput, speedup and efficiency at each node "
                    "count, for the measured interconnect and each --link; writes projection.md, .csv and .svg.")
    project.set_defaults(func=cmd_project)
    project.add_argument("dirs", nargs="+", type=Path, help="results roots or run directories")
    project.add_argument("--nodes", type=rank_counts, default=None,
                         help="node counts to project, e.g. 1,2,4,16,256 (default: the target's, else 1,2,...,64)")
    project.add_argument("--gpus-per-node", type=positive_int, default=None,
                         help="ranks per node (default: the target's, else the most ranks measured on one node)")
    project.add_argument("--target", default=None, metavar="FILE|NAME",
                         help="a target cluster in one TOML file (nodes, GPUs per node, the bus within a node, NICs "
                              "between nodes, efficiency_below), or a shipped one: dgx-h100, hgx-a100, pcie-8gpu")
    project.add_argument("--keep-measured-compute", action="store_true",
                         help="with --target whose GPU model is not the one measured: project the measured compute "
                              "over the target's links anyway (every row then says what its compute was measured on)")
    project.add_argument("--link", action="append", default=[], metavar="NAME=GB/s,latency",
                         help="a what-if interconnect: bandwidth per node in GB/s (all its NICs) and latency "
                              "(us by default; e.g. ib400x8=400,2us); repeatable")
    project.add_argument("--algorithm", choices=("nccl", "ring", "tree", "hierarchical", "nvls", "collnet", "both"),
                         default=None,
                         help="allreduce across nodes: nccl (the one NCCL would pick at each size and node count, "
                              "among ring, tree and what the target's fabric has: nvls, collnet), one forced, "
                              "Horovod's hierarchical allreduce, or both (ring and hierarchical); default: nccl and "
                              "hierarchical with a --target or runs NCCL carried, else ring and hierarchical; with "
                              "--backtest: ring or tree forced (default: NCCL's pick)")
    project.add_argument("--backtest", action="store_true",
                         help="fit each workload measured at three sizes or more on one system (one's own runs, "
                              "MLPerf results or a published table taken in with hvdbench import) on its smallest "
                              "sizes, predict every larger one at its own per-GPU batch beside what was measured; "
                              "writes backtest.csv (with --link: the same sizes over another interconnect too)")
    project.add_argument("--fit-nodes", type=rank_counts, default=None, metavar="N,M",
                         help="with --backtest: the sizes (node counts; GPUs where all ran on one node) to fit on "
                              "(default: the two smallest)")
    batch = project.add_mutually_exclusive_group()
    batch.add_argument("--batch-per-gpu", type=positive_int, default=None, metavar="B",
                       help="project each workload at B samples a GPU at every node count (compute fitted as a power "
                            "of the batch across the batches its runs measured: a batch sweep, axes: batch_size)")
    batch.add_argument("--global-batch", type=positive_int, default=None, metavar="G",
                       help="project each workload at a global batch of G, shared by the GPUs of each node count "
                            "(strong scaling: each GPU's share shrinks as nodes grow, and its compute with it)")
    project.add_argument("-o", "--output", type=Path, default=None, help="where to write (default DIR/report)")
    project.add_argument("--warmup", type=non_negative_int, default=None, metavar="N",
                         help="leave out exactly the first N steps of every run (default: detected)")
