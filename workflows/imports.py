"""Another tool's results taken into a results root as runs (nccl-tests' output, MLPerf Training results, a
published scaling table), then recorded in the history store: one line a test, a result or a figure, and how to
report them."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Sequence

from hvdbench.analysis.history.recording import record_and_say
from hvdbench.core.errors import UsageError
from hvdbench.core.validate import inert

from .outcome import Outcome


def take(source: str, files: Sequence[Path], output: Path, *, system: str | None, round_: str,
         store: str | None) -> Outcome:
    """Import the files (``source``: nccl-tests, mlperf or table) into the results root and record its runs."""
    outcome = Outcome()
    if source == "mlperf":
        _mlperf(files, output, system, outcome, round_)
    elif source == "table":
        _table(files, output, system, outcome)
    else:
        _nccl_tests(files, output, system, outcome)
    outcome.heard(record_and_say([output], store))
    return outcome.say(f"report with: hvdbench report {shlex.quote(str(output))}")


def _nccl_tests(files: Sequence[Path], output: Path, system: str | None, outcome: Outcome) -> None:
    from hvdbench.launchers.imported import import_files

    for done in import_files(files, output, system or "local"):
        left = f"; {len(done.test.left)} row(s) left out ({inert(done.test.left[0])} ...)" if done.test.left else ""
        outcome.say(f"{done.spec.id}: {inert(done.test.program)} over {done.spec.np} rank(s) on {done.spec.nodes} "
                    f"node(s), {len(done.test.rows)} size(s){left}")


def _table(files: Sequence[Path], output: Path, system: str | None, outcome: Outcome) -> None:
    """Each published figure a line; a --system label is refused (a table names its own systems)."""
    from hvdbench.launchers.imported_table import import_tables

    if system is not None:
        raise UsageError("--system: a published table names each figure's system (its table or system column)")
    for done in import_tables(files, output):
        point = done.point
        outcome.say(f"{done.spec.id}: {inert(point.system)} {inert(point.model)} on {point.gpus} GPU(s) of "
                    f"{point.nodes} node(s) at {point.batch} a GPU: {point.throughput:,.1f} samples/s published (line "
                    f"{point.line})")


def _mlperf(files: Sequence[Path], output: Path, system: str | None, outcome: Outcome, round_: str) -> None:
    """Each result file a line (its time, converged or why not, its logged throughput); each system's benchmark
    scored as MLCommons scores it."""
    from hvdbench.launchers.imported_mlperf import import_results

    taken = import_results(files, output, system, round_)
    for done in taken:
        run = done.run
        said = "converged" if run.converged else f"did not converge: {inert(run.why)}"
        rate = run.throughput()
        speed = f"; {rate:,.0f} samples/s logged" if rate and not done.left_out else \
            f"; throughput left out: {done.left_out}" if done.left_out else ""
        outcome.say(f"{done.spec.id}: {inert(done.spec.system)} {inert(done.result.benchmark)} on {done.spec.np} "
                    f"accelerator(s), {inert(run.path.rsplit('/', 1)[-1])}: {run.seconds:,.1f} s to train ({said})"
                    f"{speed}")
    labels = {id(done.result): done.spec.system for done in taken}
    for result in {id(done.result): done.result for done in taken}.values():
        score = result.score()
        mean = f"the olympic mean of {len(score.used)} run(s)"
        scaled = f" ({score.raw:,.1f} s) × {score.factor:.4f} (scaling.json)" if score.factor != 1 and score.raw else ""
        said = (f"{score.seconds:,.1f} s ({score.seconds / 60:.2f} min): MLCommons' score, {mean}{scaled}; "
                f"{score.share()}" if score.seconds is not None and score.raw is not None else f"no score: {score.why}")
        described = f" on {result.described.nodes} node(s)" if result.described else \
            " (no system description: its nodes and accelerators unknown, taken as one)"
        outcome.say(f"{inert(labels[id(result)])} {inert(result.benchmark)} ({inert(result.system)}){described}: "
                    f"{said}")
    outcome.say(f"judged by MLPerf Training v{round_}'s quality targets (--round for another round's)")
