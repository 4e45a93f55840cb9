"""The record parser reads records behind launcher prefixes and counts bad lines without failing."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from hvdbench.core.records import (ParseStats, RecordWriter, encode, make_record, parse_line, parse_lines,
                                         read_records)


def _record(step: int) -> str:
    return encode(make_record("step", rank=1, local_rank=1, size=2, step=step, warmup=False,
                              duration=0.5, samples=32, loss=2.0)).rstrip("\n")


@pytest.mark.parametrize("prefix", ["", "[1,0]<stdout>:", "[1,1]<stdout>: ", "1: ", "worker-3 | 2026-11-22 "])
def test_record_found_behind_any_prefix(prefix: str) -> None:
    record = parse_line(prefix + _record(7))
    assert record is not None
    assert (record["kind"], record["rank"], record["step"]) == ("step", 1, 7)


def test_plain_output_is_not_a_record() -> None:
    assert parse_line("[1,0]<stdout>:Epoch 1 loss 2.3 {json-looking: no}") is None


def test_truncated_and_malformed_lines_are_counted_not_fatal() -> None:
    good = _record(1)
    lines = [
        "[1,0]<stdout>:" + good,
        "[1,0]<stdout>:" + good[: len(good) // 2],          # truncated mid-record (a killed rank)
        '{"hvdbench":1,"kind":"bogus","rank":0,"size":1}',   # unknown kind
        '{"hvdbench":1,"kind":"step","rank":"zero","size":1}',  # rank not an integer
        "some launcher chatter",
        "",
        good,
    ]
    stats = ParseStats()
    records = list(parse_lines(lines, stats))
    assert [r["step"] for r in records] == [1, 1]
    assert (stats.records, stats.malformed, stats.other_lines) == (2, 3, 1)
    assert stats.examples and stats.examples[0].startswith("line 2: truncated or malformed record")


def test_long_lines_that_mpirun_cut_into_interleaved_chunks_are_put_back_together() -> None:
    # what `mpirun --tag-output` printed for two ranks' env records (each over 2,048 bytes), as seen here
    env = [encode(make_record("env", rank=r, local_rank=r, size=2, flags={"pad": "x" * 2500})).rstrip("\n")
           for r in (0, 1)]
    one, zero = "[1,1]<stdout>:", "[1,0]<stdout>:"
    lines = [one + env[1][:2048] + zero + env[0][:2048] + one + env[1][2048:], zero + env[0][2048:],
             zero + _record(3), "[1,0]<stdout>:Epoch 1 done"]
    stats = ParseStats()
    records = list(parse_lines(lines, stats))
    assert [(r["kind"], r["rank"]) for r in records] == [("env", 1), ("env", 0), ("step", 1)]
    assert records[0]["flags"]["pad"] == "x" * 2500 and (stats.malformed, stats.other_lines) == (0, 1)
    cut = list(parse_lines([one + env[1][:2048] + zero + env[0][:100]], stats := ParseStats()))
    assert cut == [] and stats.malformed == 2  # both ranks' lines end unfinished: counted, not fatal


def test_writer_emits_one_whole_line_per_record_and_echoes_it(tmp_path: Path) -> None:
    echo = io.StringIO()
    with RecordWriter(tmp_path / "rank-0.jsonl", rank=0, local_rank=0, size=2, echo=echo) as writer:
        writer.write("phase", phase="timed", steps=3)
        writer.write("summary", throughput=10.5)
    lines = (tmp_path / "rank-0.jsonl").read_text().splitlines()
    assert len(lines) == 2 and echo.getvalue().splitlines() == lines
    assert [r["kind"] for r in read_records(tmp_path / "rank-0.jsonl")] == ["phase", "summary"]


def test_file_with_a_cut_last_line_keeps_every_whole_record(tmp_path: Path) -> None:
    path = tmp_path / "rank-1.jsonl"
    path.write_text("\n".join(_record(i) for i in range(5)) + "\n" + _record(5)[:40], encoding="utf-8")
    stats = ParseStats()
    assert [r["step"] for r in read_records(path, stats)] == [0, 1, 2, 3, 4]
    assert stats.malformed == 1
