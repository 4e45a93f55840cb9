"""SLURM warns a job of its time limit (SIGUSR2) while its task waits on the run's process: where every rank has
already logged its summary, the limit would end a teardown, not a measurement, and the run is kept ok (on a loaded
machine a retry measured whole was once recorded as a timeout and lost); where a rank has not, or a loss was not
finite, it is the timeout it always was."""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from hvdbench.core.metrics import logged_outcome
from hvdbench.core.records import RecordWriter, rank_log_name
from hvdbench.core.spec import RunFolder, RunSpec, RunStatus
from hvdbench.launchers.slurm_task import TaskAttempt

pytestmark = pytest.mark.slow  # it starts a process (a sleeping stand-in for the ranks' launcher)


def _logged(run: Path, ranks: int, summaries: int, finite: bool = True) -> None:
    """Each of ``ranks`` ranks' log with its env and steps; the first ``summaries`` of them with their summary."""
    for rank in range(ranks):
        with RecordWriter(run / rank_log_name(rank), rank=rank, local_rank=rank, size=ranks) as writer:
            writer.write("env", benchmark="mlp", model="mlp", unit="samples", flags={"batch_size": 32})
            for step in range(4):
                writer.write("step", step=step, warmup=step < 1, duration=0.01, samples=32, loss=1.0)
            if rank < summaries:
                writer.write("summary", steps=3, loss_finite=finite)


def _warned(tmp_path: Path, summaries: int, finite: bool = True) -> RunStatus:
    """A two-rank run's first task, SLURM's time-limit warning sent to it while its process sleeps; how it ended."""
    spec = RunSpec(benchmark="mlp", np=2, nodes=1, launcher="srun")
    run = tmp_path / spec.id
    _logged(run, 2, summaries, finite)
    attempt = TaskAttempt(spec, RunFolder(run), job=None, first=True, retries=0)
    timer = threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGUSR2))
    previous = signal.getsignal(signal.SIGUSR2), signal.getsignal(signal.SIGTERM)
    timer.start()
    try:
        status = attempt.run([sys.executable, "-c", "import time; time.sleep(60)"], dict(os.environ), run / "task.log",
                             write_command=False)
    finally:
        timer.cancel()
        signal.signal(signal.SIGUSR2, previous[0])
        signal.signal(signal.SIGTERM, previous[1])
    assert status.seconds < 30, status  # the warning ended the process; it did not run out its sleep
    assert RunStatus.read(run) == status  # what the run shows is how the attempt ended
    return status


def test_a_warning_after_every_rank_logged_its_summary_keeps_the_run_ok(tmp_path: Path) -> None:
    status = _warned(tmp_path, summaries=2)
    assert status.status == "ok", status
    assert "after every rank had logged its summary" in status.message


@pytest.mark.parametrize("summaries, finite", [(1, True), (2, False)], ids=["a rank without summary", "a NaN loss"])
def test_a_warning_before_the_run_is_measured_whole_is_a_timeout(tmp_path: Path, summaries: int,
                                                                 finite: bool) -> None:
    status = _warned(tmp_path, summaries, finite)
    assert status.status == "timeout" and status.message == "job None neared its time limit", status


def test_a_summary_with_a_loss_that_was_not_finite_fails_the_rank_logs(tmp_path: Path) -> None:
    _logged(tmp_path, 2, summaries=2, finite=False)
    outcome = logged_outcome(tmp_path, 2)
    assert outcome.status == "failed" and outcome.reason == "rank 0: a loss was not finite", outcome
