"""``hvdbench import nccl-tests|mlperf``: another tool's results taken into a results root as runs (one module a
command, as the command line grows)."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from hvdbench.analysis.history.recording import record_after
from hvdbench.core.errors import UsageError
from hvdbench.core.time_to_train import LATEST, ROUNDS
from hvdbench.core.validate import inert, text_problem

from .flags import store_flag


def cmd_import(args: argparse.Namespace) -> int:
    """Take nccl-tests' output (launchers/imported.py) or MLPerf results (launchers/imported_mlperf.py) into a results
    root; one line a test or a result, and how to report them."""
    problem = text_problem(args.system) if args.system is not None else None
    if problem:
        raise UsageError(f"--system: {problem}")
    if args.source == "mlperf":
        _mlperf(args)
    elif args.source == "table":
        _table(args)
    else:
        _nccl_tests(args)
    record_after([args.output], args.store)
    print(f"report with: hvdbench report {shlex.quote(str(args.output))}")
    return 0


def _nccl_tests(args: argparse.Namespace) -> None:
    from hvdbench.launchers.imported import import_files

    for done in import_files(args.files, args.output, args.system or "local"):
        left = f"; {len(done.test.left)} row(s) left out ({inert(done.test.left[0])} ...)" if done.test.left else ""
        print(f"{done.spec.id}: {inert(done.test.program)} over {done.spec.np} rank(s) on {done.spec.nodes} node(s), "
              f"{len(done.test.rows)} size(s){left}")


def _table(args: argparse.Namespace) -> None:
    """Each published figure a line; a --system label is refused (a table names its own systems)."""
    from hvdbench.launchers.imported_table import import_tables

    if args.system is not None:
        raise UsageError("--system: a published table names each figure's system (its table or system column)")
    for done in import_tables(args.files, args.output):
        point = done.point
        print(f"{done.spec.id}: {inert(point.system)} {inert(point.model)} on {point.gpus} GPU(s) of {point.nodes} "
              f"node(s) at {point.batch} a GPU: {point.throughput:,.1f} samples/s published (line {point.line})")


def _mlperf(args: argparse.Namespace) -> None:
    """Each result file a line (its time, converged or why not, its logged throughput); each system's benchmark
    scored as MLCommons scores it."""
    from hvdbench.launchers.imported_mlperf import import_results

    taken = import_results(args.files, args.output, args.system, args.round)
    for done in taken:
        run = done.run
        said = "converged" if run.converged else f"did not converge: {inert(run.why)}"
        rate = run.throughput()
        speed = f"; {rate:,.0f} samples/s logged" if rate and not done.left_out else \
            f"; throughput left out: {done.left_out}" if done.left_out else ""
        print(f"{done.spec.id}: {inert(done.spec.system)} {inert(done.result.benchmark)} on {done.spec.np} "
              f"accelerator(s), {inert(run.path.rsplit('/', 1)[-1])}: {run.seconds:,.1f} s to train ({said}){speed}")
    labels = {id(done.result): done.spec.system for done in taken}
    for result in {id(done.result): done.result for done in taken}.values():
        score = result.score()
        mean = f"the olympic mean of {len(score.used)} run(s)"
        scaled = f" ({score.raw:,.1f} s) × {score.factor:.4f} (scaling.json)" if score.factor != 1 and score.raw else ""
        said = (f"{score.seconds:,.1f} s ({score.seconds / 60:.2f} min): MLCommons' score, {mean}{scaled}; "
                f"{score.share()}" if score.seconds is not None and score.raw is not None else f"no score: {score.why}")
        described = f" on {result.described.nodes} node(s)" if result.described else \
            " (no system description: its nodes and accelerators unknown, taken as one)"
        print(f"{inert(labels[id(result)])} {inert(result.benchmark)} ({inert(result.system)}){described}: {said}")
    print(f"judged by MLPerf Training v{args.round}'s quality targets (--round for another round's)")


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
