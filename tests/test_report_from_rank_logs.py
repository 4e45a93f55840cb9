"""The report computes speedup and efficiency from rank logs and lists what it could not use."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import write_run
from hvdbench.analysis.collect import RUNS_SCHEMA, STEPS_SCHEMA, collect
from hvdbench.analysis.report.build import build_report
from hvdbench.analysis.tables.scaling import scaling_table
from hvdbench.core.errors import ReportError
from hvdbench.core.spec import RunSpec

ARGS = ("--model", "resnet20", "--batch-size", "32")


def _spec(np_: int, **kw: object) -> RunSpec:
    return RunSpec(benchmark="cifar10", args=ARGS, np=np_, **kw)  # type: ignore[arg-type]


def test_speedup_and_efficiency_against_one_rank(tmp_path: Path) -> None:
    write_run(tmp_path, _spec(1), [[0.10] * 20])
    write_run(tmp_path, _spec(2), [[0.125] * 20, [0.125] * 20])
    table = scaling_table(collect([tmp_path]))
    assert list(table["np"]) == [1, 2]
    one, two = table.iloc[0], table.iloc[1]
    assert np.isclose(one["throughput"], 320.0) and np.isclose(two["throughput"], 512.0)
    assert np.isclose(two["speedup"], 1.6) and np.isclose(two["efficiency"], 0.8)
    assert np.isclose(one["speedup"], 1.0)


def test_repeats_combine_into_one_row_with_an_interval_over_repeats(tmp_path: Path) -> None:
    for repeat, d in enumerate([0.10, 0.11, 0.09]):
        write_run(tmp_path, _spec(1, repeat=repeat), [[d] * 10])
    table = scaling_table(collect([tmp_path]))
    assert len(table) == 1
    row = table.iloc[0]
    assert row["repeats"] == 3 and row["ci_method"].startswith("3 runs resampled, blocks of steps within each")
    assert np.isclose(row["throughput"], np.exp(np.mean(np.log([320.0, 320 / 1.1, 320 / 0.9]))))  # geometric mean
    assert row["ci_low"] <= row["throughput"] <= row["ci_high"]


def test_dataframes_have_the_declared_schema_even_when_empty(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    coll = collect([tmp_path / "empty"])
    assert list(coll.runs.columns) == list(RUNS_SCHEMA) and list(coll.steps.columns) == list(STEPS_SCHEMA)
    assert [str(t) for t in coll.runs.dtypes] == list(RUNS_SCHEMA.values())


def test_truncated_rank_log_marks_the_run_incomplete_and_the_rest_is_reported(tmp_path: Path) -> None:
    write_run(tmp_path, _spec(1), [[0.1] * 10])
    broken = write_run(tmp_path, _spec(2), [[0.1] * 10, [0.1] * 10])
    log = broken / "rank-1.jsonl"
    text = log.read_text()
    log.write_text(text[: text.rindex('{"hvdbench":1,"kind":"summary"') + 30])  # cut inside the summary
    with open(broken / "rank-0.jsonl", "a") as handle:
        handle.write("[1,0]<stdout>:{\"hvdbench\":1,\"kind\":\"step\"\n")  # a second malformed line
    text_table, paths = build_report([tmp_path], tmp_path / "report")
    runs = collect([tmp_path]).runs.set_index("run_id")
    assert runs.loc[_spec(2).id, "status"] == "incomplete"
    assert "no summary from rank(s) [1]" in runs.loc[_spec(2).id, "reason"]
    assert "2 malformed log line(s) in 2 file(s)" in text_table
    report = paths["markdown"].read_text()
    assert "## Runs left out" in report and _spec(2).id in report
    assert "rank-1.jsonl | 1 | line 16: truncated or malformed record" in report
    assert paths["scaling"].read_text().count("\n") == 2  # header + the 1-rank row


def test_failed_status_is_the_reason_shown(tmp_path: Path) -> None:
    write_run(tmp_path, _spec(1), [[0.1] * 5])
    failed = write_run(tmp_path, _spec(2), [[0.1] * 5, [0.1] * 5], summary=False)
    (failed / "status.json").write_text('{"status": "timeout", "returncode": null, "seconds": 9, '
                                        '"message": "no end after 9 s; every rank was killed"}')
    runs = collect([tmp_path]).runs.set_index("run_id")
    assert runs.loc[_spec(2).id, "reason"] == "timeout: no end after 9 s; every rank was killed"


@pytest.mark.parametrize("setup, message", [
    (lambda p: p, "no runs found under"),
    (lambda p: p / "missing", "does not exist"),
    (lambda p: (p / "file.txt").write_text("x") and p / "file.txt", "is not a directory"),
])
def test_report_over_nothing_usable_is_a_report_error(tmp_path: Path, setup, message: str) -> None:
    with pytest.raises(ReportError, match=message):
        build_report([setup(tmp_path)], tmp_path / "out")


def test_report_when_no_run_completed_says_why(tmp_path: Path) -> None:
    write_run(tmp_path, _spec(2), [[0.1] * 5, [0.1] * 5], summary=False)
    with pytest.raises(ReportError, match=r"no complete run to report: .*no summary from rank\(s\) \[0, 1\]"):
        build_report([tmp_path], tmp_path / "out")
