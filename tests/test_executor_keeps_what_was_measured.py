"""The local executor: a hung run is killed at its timeout, the next runs on, finished runs are skipped."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from hvdbench.launchers.local import LocalExecutor
from hvdbench.launchers.policy import failure_reason
from hvdbench.core.records import RecordWriter
from hvdbench.core.spec import RunStatus
from hvdbench.core.spec import RunSpec

pytestmark = pytest.mark.usefixtures("script_launcher")


def _spec(kind: str) -> RunSpec:
    return RunSpec(benchmark="cifar10", args=(kind,), launcher="script")


def test_hung_run_is_killed_with_its_children_and_the_sweep_goes_on(tmp_path: Path) -> None:
    lines: list[str] = []
    executor = LocalExecutor(tmp_path, timeout=2.0, report=lines.append)
    start = time.monotonic()
    statuses = executor.run_all([_spec("hang"), _spec("crash")])
    assert time.monotonic() - start < 30
    assert [s.status for s in statuses] == ["timeout", "failed"]
    assert "no end after 2 s" in statuses[0].message
    assert statuses[1].returncode == 3 and statuses[1].message == "ValueError: rank 1 exploded"
    assert RunStatus.read(tmp_path / _spec("hang").id) == statuses[0]
    assert len(lines) == 4 and "timeout" in lines[1]
    assert lines[2].startswith("[2/2] [##########..........] now: ") and "1 timeout | 1 left" in lines[2]
    assert "ValueError: rank 1 exploded" in statuses[1].tail


def test_exit_zero_without_summaries_is_not_ok(tmp_path: Path) -> None:
    status = LocalExecutor(tmp_path, timeout=30, report=lambda _: None).run(_spec("quiet"))
    assert status.status == "failed" and status.message == "incomplete: no summary from rank(s) [0]"


def _complete(run_dir: Path) -> Path:
    """A rank log with its summary: what makes a run complete."""
    with RecordWriter(_mkdir(run_dir) / "rank-0.jsonl", rank=0, local_rank=0, size=1) as writer:
        writer.write("summary", steps=1, samples=1.0)
    return run_dir


def test_resume_skips_complete_runs_and_reruns_the_rest(tmp_path: Path) -> None:
    done, failed = _spec("quiet"), _spec("crash")
    RunStatus("ok", 0, 1.0).write(_complete(tmp_path / done.id))
    RunStatus("failed", 1, 1.0, "x").write(_mkdir(tmp_path / failed.id))
    executor = LocalExecutor(tmp_path, timeout=30, report=lambda _: None)
    first, second = executor.run_all([done, failed])
    assert first.message == "already complete, skipped"
    assert second.status == "failed" and second.returncode == 3
    rerun = LocalExecutor(tmp_path, timeout=30, resume=False, report=lambda _: None).run(done)
    assert rerun.message == "incomplete: no summary from rank(s) [0]"
    assert (tmp_path / done.id / "attempt-1" / "rank-0.jsonl").exists()  # the rerun moved it aside


def test_resume_never_deletes_what_was_measured(tmp_path: Path) -> None:
    """A complete run whose status.json is garbage is complete (as the report says), and kept byte for
    byte; a run whose status says ok but whose logs are incomplete runs again, its files moved aside."""
    garbage, hollow = _spec("quiet"), RunSpec(benchmark="cifar10", args=("quiet",), launcher="script", repeat=1)
    kept = _complete(tmp_path / garbage.id)
    (kept / "status.json").write_text("[1, 2, 3]")
    before = (kept / "rank-0.jsonl").read_bytes()
    RunStatus("ok", 0, 1.0).write(_mkdir(tmp_path / hollow.id))
    (tmp_path / hollow.id / "rank-0.jsonl").write_text("{\"hvdbench\":1,\"kind\":\"step\",\"rank\":0,\"size\":1}\n")
    first, second = LocalExecutor(tmp_path, timeout=30, report=lambda _: None).run_all([garbage, hollow])
    assert first.status == "ok" and first.message == "already complete, skipped"
    assert (kept / "rank-0.jsonl").read_bytes() == before
    assert RunStatus.read(kept).message == "complete by its rank logs; status.json was unreadable"
    assert second.status == "failed"  # ran again (the snippet writes no summary)
    assert (tmp_path / hollow.id / "attempt-1" / "rank-0.jsonl").exists()
    assert (tmp_path / hollow.id / "attempt-1" / "status.json").exists()


def test_failure_reason_prefers_a_ranks_own_error(tmp_path: Path) -> None:
    log = tmp_path / "launcher.log"
    log.write_text("\n".join([
        "[0]<stderr>:Traceback (most recent call last):",
        "[0]<stderr>:TypeError: bad argument",
        "[1]<stderr>:error: rank 1: local rank 1 has no GPU: 1 visible (CUDA_VISIBLE_DEVICES=0)",
        "RuntimeError: Horovod detected that one or more processes exited with non-zero status",
    ]))
    assert failure_reason(log) == "error: rank 1: local rank 1 has no GPU: 1 visible (CUDA_VISIBLE_DEVICES=0)"
    log.write_text("[0]<stderr>:TypeError: bad argument\nRuntimeError: Horovod detected that ...\n")
    assert failure_reason(log) == "TypeError: bad argument"


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


