"""``hvdbench import nccl-tests|mlperf``: another tool's results taken into a results root as runs (one module a
command, as the command line grows)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hvdbench.core.errors import UsageError
from hvdbench.core.time_to_train import LATEST, ROUNDS
from hvdbench.core.validate import text_problem
from hvdbench.workflows.imports import take

from .flags import store_flag


def cmd_import(args: argparse.Namespace) -> int:
    """Take nccl-tests' output, MLPerf results or a published table into a results root (workflows/imports.py)."""
    problem = text_problem(args.system) if args.system is not None else None
    if problem:
        raise UsageError(f"--system: {problem}")
    return take(args.source, args.files, args.output, system=args.system, round_=args.round, store=args.store).show()


def declare(sub: Any) -> None:
    """hvdbench import nccl-tests|mlperf|table: another tool's results, or a published table, as runs beside
    hvdbench's own."""
    imp = sub.add_parser(
        "import", help="take nccl-tests' output or MLPerf Training results into a results root, as runs",
        description="nccl-tests: each test in its output (all_reduce_perf, all_gather_perf, broadcast_perf, "
                    "alltoall_perf) becomes a run of backend nccl-tests under the results root: its sizes stand in the "
                    "report's collectives table beside hvdbench's own and accept criteria judge them (backend = 'nccl-"
                    "tests'). Its time is nccl-tests' own (each rank's mean over its iterations, averaged over ranks); "
                    "import each run of a test (an interval needs several). mlperf: every result file of a published "
                    "MLPerf Training folder (results/<system>/<benchmark>/result_N.txt, with systems/<system>.json) "
                    "becomes a run to its quality target, converged or not by MLPerf's rule, scored in the report's "
                    "time-to-train section as MLCommons scores it (the olympic mean times scaling.json's factor; void "
                    "where too many runs did not converge or the folder lacks runs), with its logged throughput, batch "
                    "and system (nodes, accelerators, network): a vendor's systems that differ only in node count read "
                    "as one system scaled over nodes. The same output or result twice is refused.")
    imp.set_defaults(func=cmd_import)
    imp.add_argument("source", choices=["nccl-tests", "mlperf", "table"], help="what wrote the files (table: a "
                     "published scaling table, CSV: system, model, nodes, gpus_per_node, batch_per_gpu, throughput "
                     "and optionally gpus, interconnect, variable_update, precision, source)")
    imp.add_argument("files", nargs="+", type=Path, help="nccl-tests: its output, one or more tests a file; mlperf: "
                                                         "a submitter's folder, its results folder or a benchmark's")
    imp.add_argument("-o", "--output", type=Path, required=True, help="the results root")
    store_flag(imp)
    imp.add_argument("--system", default=None, help="the system's label in the report (default: nccl-tests local; "
                                                    "mlperf the submitter and system name its description gives, or "
                                                    "for systems that differ only in node count their shared name)")
    imp.add_argument("--round", default=LATEST, choices=ROUNDS, metavar="ROUND",
                     help=f"mlperf: the MLPerf Training round whose quality targets judge the runs (default {LATEST}; "
                          f"{', '.join(ROUNDS)})")
