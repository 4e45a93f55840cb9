"""hvdbench's run to a quality target written as an MLPerf Training result file (mlcommons logging's ``:::MLLOG``
events), in the order and with the events MLPerf's common training rules require (mlperf-logging's compliance
checker, common.yaml and open_common.yaml): the submission's facts, a cache clear, the initialisation (from the
rank's start to the clock's start, the model built and the data read), the run's start, each block of training up to
an evaluation with the evaluation inside it, and the run's stop with its status. Division ``open``, status
``research``. The one rule it cannot meet is its benchmark's name, which is not one of MLPerf's: the checker refuses
any other name (``submission_benchmark``'s line says so in its metadata), so the file is an MLPerf-format log of a
run of hvdbench's, not an MLPerf result."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Sequence

MLLOG = ":::MLLOG "
NOT_MLPERF = ("not one of MLPerf Training's benchmarks: mlperf-logging's compliance checker refuses this name, and "
              "this file is hvdbench's run in MLPerf's log format, not an MLPerf result")


def mllog_line(key: str, time_s: float, value: Any = None, event_type: str = "POINT_IN_TIME",
               **metadata: Any) -> str:
    """One event as mlcommons logging writes it: ``:::MLLOG {"namespace": "", "time_ms": ..., "event_type": ...,
    "key": ..., "value": ..., "metadata": {...}}``."""
    event = {"namespace": "", "time_ms": int(round(time_s * 1000)), "event_type": event_type, "key": key,
             "value": value, "metadata": metadata}
    return MLLOG + json.dumps(event, allow_nan=False)


@dataclass(frozen=True)
class Evaluation:
    """One evaluation on the way to the target: the epoch trained by then, the value measured, and when (wall clock,
    seconds) its block of training began and the evaluation began and ended."""

    epoch: float
    value: float
    block_start_s: float
    eval_start_s: float
    eval_stop_s: float


@dataclass(frozen=True)
class RunLog:
    """What the file says of the run besides its evaluations."""

    benchmark: str
    platform: str
    global_batch: int
    seed: int
    metric: str  # accuracy or loss: what the evaluations' values are
    target: float
    train_samples: int
    eval_samples: int
    init_start_s: float
    run_start_s: float
    run_stop_s: float
    converged: bool


def _head(log: RunLog) -> list[str]:
    at = log.init_start_s
    return [mllog_line("submission_benchmark", at, log.benchmark, note=NOT_MLPERF),
            mllog_line("submission_org", at, "hvdbench"), mllog_line("submission_division", at, "open"),
            mllog_line("submission_status", at, "research"), mllog_line("submission_platform", at, log.platform),
            mllog_line("cache_clear", at, True), mllog_line("init_start", at, event_type="INTERVAL_START"),
            mllog_line("seed", at, log.seed), mllog_line("global_batch_size", at, log.global_batch),
            mllog_line("gradient_accumulation_steps", at, 1), mllog_line("train_samples", at, log.train_samples),
            mllog_line("eval_samples", at, log.eval_samples),
            mllog_line("eval_target", at, log.target, metric=log.metric),
            mllog_line("init_stop", log.run_start_s, event_type="INTERVAL_END"),
            mllog_line("run_start", log.run_start_s, event_type="INTERVAL_START")]


def result_lines(log: RunLog, evaluations: Sequence[Evaluation]) -> list[str]:
    """The run as an MLPerf Training result file's lines: what ``readers.mlperf.read_result`` reads back to the same
    time to train, and mlperf-logging's checker passes but for the benchmark's name. Each block of training ends at
    an evaluation (``epoch_count`` the epochs since the one before, ``first_epoch_num`` where it began)."""
    out = _head(log)
    before = 0.0
    for e in evaluations:
        out += [mllog_line("block_start", e.block_start_s, event_type="INTERVAL_START", first_epoch_num=before,
                           epoch_count=max(e.epoch - before, 1e-9)),
                mllog_line("eval_start", e.eval_start_s, event_type="INTERVAL_START", epoch_num=e.epoch),
                mllog_line("eval_accuracy", e.eval_stop_s, e.value, epoch_num=e.epoch, metric=log.metric),
                mllog_line("eval_stop", e.eval_stop_s, event_type="INTERVAL_END", epoch_num=e.epoch),
                mllog_line("block_stop", e.eval_stop_s, event_type="INTERVAL_END", first_epoch_num=before)]
        before = e.epoch
    out.append(mllog_line("run_stop", log.run_stop_s, event_type="INTERVAL_END",
                          status="success" if log.converged else "aborted"))
    return out
