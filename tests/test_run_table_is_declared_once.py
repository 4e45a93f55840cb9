"""The run table is its declared columns (core/run_table.py): the collector's rows hold exactly them, each
value typed as its column says (a bool is no count, 3.0 is, nothing beyond 64 bits is), fields recorded by every
rank combine as declared (first, max, sum, all equal), the swept axes are core/axes.py's, the details table and
accept's selectors read through the same columns, and the in-job environment is one table per scheduler."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from conftest import write_run
from hvdbench.analysis.collect import collect
from hvdbench.analysis.tables.details import DETAILS_SCHEMA
from hvdbench.analysis.verdicts.criteria import TRAINING_KEYS
from hvdbench.core.axes import AXES
from hvdbench.core.job_env import job_env
from hvdbench.core.records import encode, make_record, rank_log_name
from hvdbench.core.run_table import BY_NAME, RUN_COLUMNS, RUNS_SCHEMA, RunColumn, RunFacts, carried, typed
from hvdbench.core.spec import RunSpec


def _facts(values: list[object], field: str = "samples") -> RunFacts:
    return RunFacts(RunSpec(benchmark="mlp", np=len(values)),
                    {"summary": {rank: {"rank": rank, field: v} for rank, v in enumerate(values)}})


@pytest.mark.parametrize("combine, values, expected", [
    ("first", [3.0, 5.0], 3.0), ("max", [3.0, 5.0, 4.0], 5.0), ("sum", [3.0, 5.0, 4.0], 12.0),
    ("all_equal", [2.0, 2.0], 2.0), ("all_equal", [2.0, 3.0], None), ("max", ["x", True], None),
])
def test_a_field_of_every_rank_combines_as_its_column_declares(combine: str, values: list[object],
                                                               expected: float | None) -> None:
    column = RunColumn("samples_total", "float64", "samples over ranks", "summary.samples", "summary", ("samples",),
                       combine)
    assert column.value(_facts(values)) == expected


@pytest.mark.parametrize("value, dtype, cell", [
    (True, "Int64", None), (3.0, "Int64", 3), (3.5, "Int64", None), (10 ** 30, "Int64", None), (2, "float64", 2.0),
    ("7", "float64", None), (1, "boolean", None), (False, "boolean", False), (5, "string", None),
])
def test_a_value_is_a_cell_only_of_its_columns_type(value: object, dtype: str, cell: object) -> None:
    assert typed(value, dtype) == cell


def test_the_columns_are_declared_once_and_the_axes_are_core_axes() -> None:
    names = [c.name for c in RUN_COLUMNS]
    assert len(names) == len(set(names)) == len(RUNS_SCHEMA)
    axis_columns = [c.name for c in RUN_COLUMNS if c.source.startswith("the swept axes")]
    assert axis_columns == list(AXES)
    assert {BY_NAME[n].dtype for n in ("channels_last", "compile", "fp16_allreduce")} == {"bool"}
    assert set(carried("details")) <= set(DETAILS_SCHEMA) and "tuning" in carried("details")
    assert set(TRAINING_KEYS) >= set(AXES) and TRAINING_KEYS["batch_size"] is int and TRAINING_KEYS["compile"] is bool


def test_a_hostile_value_leaves_its_cell_empty_and_the_rest_of_the_row(tmp_path: Path) -> None:
    """A value the record schema lets through but the column cannot hold (an int beyond int64) empties its cell
    alone; a value of the wrong type is caught earlier, by the reader: its record is a malformed line."""
    spec = RunSpec(benchmark="cifar10", np=2, args=("--model", "resnet20"))
    write_run(tmp_path / "big", spec, [[0.1] * 8, [0.1] * 8], env={"parameters": 10 ** 30, "cpu_model": "EPYC"})
    write_run(tmp_path / "typed", spec, [[0.1] * 8, [0.1] * 8], env={"cpu_count": True})
    big, typed = (collect([tmp_path / name]) for name in ("big", "typed"))
    row = big.runs.iloc[0]
    assert row["status"] == "ok" and row["cpu_model"] == "EPYC" and row["model"] == "resnet20"
    assert pd.isna(row["parameters"]) and list(big.runs.columns) == list(RUNS_SCHEMA)
    row = typed.runs.iloc[0]
    assert row["status"] == "ok" and pd.isna(row["cpu_count"]) and row["model"] == "resnet20"
    assert any("cpu_count should be int, got bool" in e for i in typed.file_issues for e in i.examples)


def test_peaks_are_the_busiest_ranks(tmp_path: Path) -> None:
    spec = RunSpec(benchmark="mlp", np=2)
    run_dir = write_run(tmp_path, spec, [[0.01] * 8, [0.01] * 8], summary=False)
    for rank, peak in ((0, 1000), (1, 4000)):
        with (run_dir / rank_log_name(rank)).open("a", encoding="utf-8") as log:
            log.write(encode(make_record("summary", rank=rank, local_rank=rank, size=2, steps=8, samples=256.0,
                                         peak_rss_bytes=peak)))
    assert collect([tmp_path]).runs.iloc[0]["peak_rss_bytes"] == 4000.0


@pytest.mark.parametrize("environ, what, expected", [
    ({"SLURM_JOB_ID": "7", "SLURM_ARRAY_JOB_ID": "6", "SLURM_ARRAY_TASK_ID": "3"}, "job_id", "6_3"),
    ({"SLURM_JOB_ID": "7", "SLURM_JOB_NUM_NODES": "4"}, "num_nodes", "4"),
    ({"PBS_JOBID": "12.pbs", "PBS_TASKNUM": "2"}, "job_id", "12.pbs"),
    ({"FLUX_JOB_ID": "f2", "FLUX_TASK_LOCAL_ID": "3"}, "local_rank", "3"),
    ({"SLURM_JOB_ID": "7", "SLURM_LOCALID": "0", "OMPI_COMM_WORLD_LOCAL_RANK": "5"}, "local_rank", "5"),
    ({"SLURM_JOB_ID": "7", "SLURM_STEP_GPUS": "4,5", "SLURM_JOB_GPUS": "0,1,4,5"}, "gpus", "4,5"),
    ({}, "job_id", None),
])
def test_a_process_reads_its_job_through_one_table(environ: dict[str, str], what: str, expected: str | None) -> None:
    job = job_env(environ)
    assert (job.job_id if what == "job_id" else job.get(what)) == expected
