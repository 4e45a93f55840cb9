"""A rank's step columns file (core/columns.py, Arrow IPC beside its log) reads exactly as its JSON lines do, for
every log shape a writer can produce; it is written only for a log its writer started, and read only while the log
still holds what the writer left (nothing appended, cut or changed at its end, the file itself whole and regular)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from hvdbench.analysis import rank_logs
from hvdbench.core import columns
from hvdbench.core.columns import Kept, columns_path, write_columns
from hvdbench.core.records import RecordWriter, decode_json

from test_rank_logs_read_alike import LOGS, step


def _written(lines: list[str]) -> bool:
    """Whether a writer could have written these lines (one whole record each)."""
    try:
        return all(isinstance(decode_json(x), dict) for x in lines)
    except Exception:  # noqa: BLE001 - any line that is no record
        return False


def _assert_same(a: rank_logs.RankLog, b: rank_logs.RankLog) -> None:
    assert a.steps.keys() == b.steps.keys()
    for name in a.steps:
        np.testing.assert_array_equal(a.steps[name], b.steps[name], err_msg=name)
        assert a.steps[name].dtype == b.steps[name].dtype, name
    assert (a.others, a.malformed, a.examples, a.ranks, a.start, a.end, a.repeated, a.too_short) == \
        (b.others, b.malformed, b.examples, b.ranks, b.start, b.end, b.repeated, b.too_short)


@pytest.mark.parametrize("name", [name for name, lines in LOGS.items() if lines and _written(lines)])
def test_every_writable_log_reads_the_same_from_its_columns(name: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "COLUMNS_FROM", 1)
    log = tmp_path / "rank-1.jsonl"
    log.write_text("".join(x + "\n" for x in LOGS[name]))
    kept = Kept(1, 2)
    for x in LOGS[name]:
        kept.keep(decode_json(x), x + "\n")
    side = write_columns(log, kept)
    from_json = rank_logs._read_json(log)
    if side is None:  # a field of another type: left to the JSON reader, which counts it
        assert not kept.typed or not kept.step
        return
    from_columns = rank_logs._from_columns(log)
    assert from_columns is not None, name
    _assert_same(from_columns, from_json)


def _writer_log(path: Path, steps: int = 300) -> Path:
    with RecordWriter(path, rank=0, local_rank=0, size=1) as writer:
        writer.write("env", benchmark="mlp", unit="samples")
        for i in range(steps):
            writer.write("step", step=i, duration=0.01 + i * 1e-5, samples=32, warmup=i < 3,
                         loss=None if i % 7 == 0 else 1.5, phases={"forward": 0.004} if i % 2 else {})
        writer.write("summary", steps=steps - 3, samples=32.0 * (steps - 3), window_s=1.0)
    return path


def test_the_writer_leaves_columns_that_read_as_its_lines(tmp_path: Path) -> None:
    log = _writer_log(tmp_path / "rank-0.jsonl")
    assert columns_path(log).is_file()
    from_columns = rank_logs._from_columns(log)
    assert from_columns is not None and len(from_columns.steps["step"]) == 300
    _assert_same(from_columns, rank_logs._read_json(log))
    assert [x.path for x in rank_logs.read_all([log])] == [str(log)]


def test_few_steps_or_an_appended_log_get_no_columns(tmp_path: Path) -> None:
    assert not columns_path(_writer_log(tmp_path / "rank-0.jsonl", steps=columns.COLUMNS_FROM - 1)).exists()
    earlier = tmp_path / "rank-1.jsonl"
    earlier.write_text(json.dumps(step(0)) + "\n")
    with RecordWriter(earlier, rank=1, local_rank=1, size=2) as writer:  # another writer's lines before its own
        for i in range(columns.COLUMNS_FROM + 5):
            writer.write("step", step=i + 1, duration=0.01, samples=32)
    assert not columns_path(earlier).exists()


@pytest.mark.bad_input
@pytest.mark.parametrize("change", ["appended", "last step changed", "cut", "columns cut", "columns a fifo",
                                    "columns of another log", "a middle step changed", "columns a link",
                                    "log a link", "columns huge"])
def test_columns_that_no_longer_agree_with_the_log_are_not_read(change: str, tmp_path: Path) -> None:
    log = _writer_log(tmp_path / "rank-0.jsonl")
    side = columns_path(log)
    data = log.read_bytes()
    if change == "appended":
        log.write_bytes(data + data.splitlines(keepends=True)[5])
    elif change == "last step changed":  # the same size, another index in the last step record
        lines = data.splitlines(keepends=True)
        lines[-2] = lines[-2].replace(b'"step":299', b'"step":298')
        log.write_bytes(b"".join(lines))
    elif change == "cut":
        log.write_bytes(data[: len(data) // 2])
    elif change == "columns cut":
        side.write_bytes(side.read_bytes()[:200])
    elif change == "columns a fifo":
        side.unlink()
        os.mkfifo(side)
    elif change == "a middle step changed":  # the same size, its end as the writer left it: a digest tells it
        lines = data.splitlines(keepends=True)
        lines[150] = lines[150].replace(b'"duration":0.0114', b'"duration":0.0911')
        assert lines[150] != data.splitlines(keepends=True)[150]
        log.write_bytes(b"".join(lines))
    elif change == "columns a link":  # a link is not followed, wherever it points
        (tmp_path / "elsewhere.arrow").write_bytes(side.read_bytes())
        side.unlink()
        side.symlink_to(tmp_path / "elsewhere.arrow")
    elif change == "columns huge":  # a sparse file far larger than its log: never read into memory
        with side.open("r+b") as handle:
            handle.truncate(3 << 30)
    elif change == "log a link":
        log.rename(tmp_path / "elsewhere.jsonl")
        log.symlink_to(tmp_path / "elsewhere.jsonl")
    else:
        other = _writer_log(tmp_path / "rank-9.jsonl", steps=310)
        side.unlink()
        columns_path(other).rename(side)
    assert rank_logs._from_columns(log) is None
    _assert_same(rank_logs.read_log(log), rank_logs._read_json(log))  # the JSON lines, as ever


def test_a_last_step_far_from_the_end_is_found_past_the_short_tail(tmp_path: Path) -> None:
    """Records after the last step longer than the short tail read first (a profile's operator table): the longer
    tail finds the step, and the columns are read."""
    with RecordWriter(tmp_path / "rank-0.jsonl", rank=0, local_rank=0, size=1) as writer:
        writer.write("env", benchmark="mlp", unit="samples")
        for i in range(300):
            writer.write("step", step=i, duration=0.01, samples=32)
        writer.write("profile", top=[{"name": f"aten::op{i}", "calls": i} for i in range(200)], trace=None)
    log = tmp_path / "rank-0.jsonl"
    assert len(log.read_bytes().splitlines()[-1]) > rank_logs.SHORT_TAIL_BYTES
    from_columns = rank_logs._from_columns(log)
    assert from_columns is not None and from_columns.steps["step"][-1] == 299
    _assert_same(from_columns, rank_logs._read_json(log))


def test_column_quantiles_are_numpys_in_either_memory_order() -> None:
    from hvdbench.analysis.stats import column_medians, column_quantiles

    rng = np.random.default_rng(7)
    for shape in ((1, 3), (2, 5), (9, 4), (300, 17)):
        matrix = rng.random(shape)
        for laid_out in (matrix, np.asfortranarray(matrix)):
            np.testing.assert_allclose(column_quantiles(laid_out, (0.05, 0.5, 0.95)),
                                       np.quantile(matrix, [0.05, 0.5, 0.95], axis=0))
    matrix[4, 2] = np.nan
    np.testing.assert_array_equal(np.isnan(column_medians(matrix)), np.isnan(np.median(matrix, axis=0)))
