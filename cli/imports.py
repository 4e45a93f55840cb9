"""``hvdbench import nccl-tests|mlperf``: another tool's results taken into a results root as runs (one module a
command, as the command line grows)."""

from __future__ import annotations

import argparse
import shlex

from hvdbench.analysis.history.recording import record_after
from hvdbench.core.errors import UsageError
from hvdbench.core.validate import inert, text_problem


def cmd_import(args: argparse.Namespace) -> int:
    """Take nccl-tests' output (launchers/imported.py) or MLPerf results (launchers/imported_mlperf.py) into a results
    root; one line a test or a result, and how to report them."""
    problem = text_problem(args.system) if args.system is not None else None
    if problem:
        raise UsageError(f"--system: {problem}")
    if args.source == "mlperf":
        _mlperf(args)
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


def _mlperf(args: argparse.Namespace) -> None:
    """Each result file a line; each system's benchmark scored as MLPerf scores it."""
    from hvdbench.launchers.imported_mlperf import import_results

    taken = import_results(args.files, args.output, args.system)
    for done in taken:
        said = "converged" if done.run.converged else "did not converge"
        print(f"{done.spec.id}: {inert(done.spec.system)} {inert(done.result.benchmark)}, "
              f"{inert(done.run.path.rsplit('/', 1)[-1])}: {done.run.seconds:,.1f} s to train ({said})")
    for result in {id(done.result): done.result for done in taken}.values():
        score = result.score()
        said = (f"{score.score_s:,.1f} s ({score.score_s / 60:.2f} min), olympic mean of {len(score.used)} run(s)"
                if score.score_s is not None else f"no score: {score.why}")
        print(f"{inert(result.system)} {inert(result.benchmark)}: {said}")
