"""The report reads a rank log the fast way (one typed pass) where every record is well formed, the careful
way (record by record) where not: both give the same columns, records and counts, for logs of every shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hvdbench.analysis import rank_logs
from hvdbench.core.records import encode, make_record

HEAD = {"rank": 1, "local_rank": 1, "size": 2, "host": "n1", "time": 5.0}


def step(i: int, **extra: Any) -> dict[str, Any]:
    fields = {"step": i, "warmup": i < 2, "duration": 0.25 + i / 100, "samples": 32, "loss": 2.5, **extra}
    return make_record("step", **HEAD, mono=10.0 + i, **fields)


def line(rec: dict[str, Any]) -> str:
    return encode(rec).rstrip("\n")


ENV = line(make_record("env", **HEAD, mono=9.0, benchmark="mlp", unit="samples"))
SUMMARY = line(make_record("summary", **HEAD, mono=30.0, steps=8, samples=256.0, window_s=2.0))
def TELEMETRY(i: int) -> str:  # noqa: N802 - a record maker beside the constants it is used among
    return line(make_record("telemetry", **HEAD, mono=10.5 + i, rss_bytes=1000 + i))


WELL_FORMED = [ENV, *(line(step(i)) for i in range(10)), SUMMARY]

LOGS: dict[str, list[str]] = {
    "harness": WELL_FORMED,
    "mpirun prefixes and other output": [f"[1,1]<stdout>:{x}" for x in WELL_FORMED] + ["Epoch 1", "", "  "],
    "breakdown phases": [ENV, *(line(step(i, phases={"forward": 0.1, "exchange": 0.05})) for i in range(5))],
    "loss absent and null": [line(make_record("step", **HEAD, mono=1.0, step=0, duration=0.5, samples=4)),
                             line(step(1, loss=None))],
    "integer duration": [line(step(0, duration=1)), line(step(1))],
    "repeated step": [line(step(0)), line(step(1)), line(step(1))],
    "non-positive duration": [line(step(0, duration=0)), line(step(1, duration=-1)), line(step(2))],
    "infinite duration": [line(step(0, duration=1e999)), line(step(1))],
    "string duration": [line(step(0, duration="0.5")), line(step(1))],
    "float step index": [line(step(0)), line({**step(1), "step": 1.0})],
    "boolean loss": [line(step(0, loss=True)), line(step(1))],
    "phase not a number": [line(step(0, phases={"forward": "x", "backward": 0.2})), line(step(1))],
    "phases null": [line(step(0, phases=None)), line(step(1, phases={"compute": 0.3}))],
    "truncated record": [*WELL_FORMED[:4], WELL_FORMED[4][:40], *WELL_FORMED[5:]],
    "unknown kind": [ENV, json.dumps({"hvdbench": 1, "kind": "gossip", "rank": 1, "size": 2}), line(step(0))],
    "other schema version": [ENV, line({**step(0), "hvdbench": 99}), line(step(1))],
    "rank not an integer": [line({**step(0), "rank": "1"}), line(step(1))],
    "two records on a line": [ENV + " " + line(step(0)), line(step(1))],
    "summary of the wrong type": [ENV, line(step(0)), line({**make_record("summary", **HEAD, mono=1.0), "steps": "8"})],
    "extra step counts": [line(step(0, sentences=12)), line(step(1, sentences=13))],
    "empty": [],
    "telemetry among the steps": [ENV, *(x for i in range(12) for x in (line(step(i)), TELEMETRY(i))), SUMMARY],
    "one telemetry in the middle": [ENV, *(line(step(i)) for i in range(6)), TELEMETRY(6),
                                    *(line(step(i)) for i in range(6, 12)), SUMMARY],
}
ENDINGS = {"\\n": "\n", "\\r\\n": "\r\n", "no final newline": ""}


def read_both(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[rank_logs.RankLog, rank_logs.RankLog, bool]:
    fast_used = rank_logs._typed_pass(path, path.read_bytes(), rank_logs.ParseStats()) is not None
    fast = rank_logs.read_log(path)
    with monkeypatch.context() as patch:
        patch.setattr(rank_logs, "_typed_pass", lambda *args: None)
        careful = rank_logs.read_log(path)
    return fast, careful, fast_used


@pytest.mark.parametrize("ending", list(ENDINGS))
@pytest.mark.parametrize("name", list(LOGS))
def test_fast_and_careful_reads_agree(name: str, ending: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "rank-1.jsonl"
    end = ENDINGS[ending]
    path.write_bytes(("".join(x + (end or "\n") for x in LOGS[name]) if end else "\n".join(LOGS[name])).encode())
    fast, careful, fast_used = read_both(path, monkeypatch)
    assert fast.steps.keys() == careful.steps.keys()
    for column in fast.steps:
        np.testing.assert_array_equal(fast.steps[column], careful.steps[column], err_msg=column)
        assert fast.steps[column].dtype == careful.steps[column].dtype, column
    assert (fast.others, fast.malformed, fast.examples, fast.ranks, fast.start, fast.end) == \
        (careful.others, careful.malformed, careful.examples, careful.ranks, careful.start, careful.end)
    well_formed = name in {"harness", "mpirun prefixes and other output", "breakdown phases", "loss absent and null",
                           "integer duration", "repeated step", "non-positive duration", "extra step counts",
                           "summary of the wrong type", "empty", "telemetry among the steps",
                           "one telemetry in the middle"}
    assert fast_used == well_formed  # the usual logs take the fast way; anything odd the careful one


def test_the_fast_way_counts_what_it_keeps_out(tmp_path: Path) -> None:
    path = tmp_path / "rank-1.jsonl"
    path.write_text("".join(x + "\n" for x in LOGS["repeated step"] + LOGS["non-positive duration"][:2]))
    log = rank_logs.read_log(path)
    assert log.steps["step"].tolist() == [0, 1]
    # a repeated index is no malformed line: it makes the run inconsistent
    assert log.malformed == 2 and log.repeated == 1
    assert log.examples == ["2 step record(s) without an integer step, a finite positive duration, numeric samples "
                            "and loss and a true/false warm-up flag"]
