"""One rule for runs to a quality target (core/time_to_train.py, MLPerf Training's): a run that ended without reaching
its target (killed at its timeout, failed, stopped at the epoch cap) stays among the runs as one that did not converge;
one may be dropped as the slowest, two leave no valid score; a verdict between systems is reached only where both
have a valid score, each side's converged share said, and a side with none is never called faster: in the report's
table, on the decision page, in accept, and in the history's check and compare."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd
import pytest

from hvdbench.cli import main
from hvdbench.core.records import RecordWriter
from hvdbench.core.spec import RunSpec, RunStatus

ARGS = ("--target-accuracy", "0.85", "--max-epochs", "4", "--batch-size", "32")
START = 1_790_000_000.0
FAST = [80.0, 81.0, 79.0, 80.5, 79.5]
SLOW = [100.0, 101.0, 99.0, 100.5, 99.5]


def _run(root: Path, system: str, repeat: int, seconds: float | None, ending: str = "converged") -> None:
    """One run to target as the harness leaves it: ``converged`` at ``seconds``; ``capped`` (ran to the epoch cap,
    status ok, not converged); or killed (``timeout``, ``failed``, ``running``: status only, no summary)."""
    spec = RunSpec(benchmark="fashion_mnist", framework="pytorch", args=ARGS, np=1, system=system, repeat=repeat)
    folder = root / spec.id
    spec.write(folder)
    with RecordWriter(folder / "rank-0.jsonl", rank=0, local_rank=0, size=1) as writer:
        writer.write("env", benchmark="fashion_mnist", model="cnn", unit="images", time=START + repeat * 3600.0,
                     device={"type": "cpu"}, cpu_model="Test CPU")
        for step in range(30):  # each run its own measurement (a copy would be counted once)
            duration = 0.05 + 1e-3 * repeat + 1e-5 * step + 1e-4 * ord(system[-1])
            writer.write("step", step=step, warmup=step < 3, duration=duration, samples=32, loss=1.0)
        if ending in ("converged", "capped"):
            done = ending == "converged"
            writer.write("summary", steps=27, samples=864.0, window_s=1.35, median_step_s=0.05, quality={
                "metric": "accuracy", "target": 0.85, "seconds": seconds if done else 400.0, "converged": done,
                "epochs": 2.0 if done else 4.0, "best": 0.86 if done else 0.80, "global_batch": 32,
                "max_epochs": 4.0, "source": "hvdbench"})
    if ending in ("converged", "capped"):
        RunStatus("ok", 0, 1.0).write(folder)
    else:
        RunStatus(ending, None, 300.0, "the job passed its time limit" if ending == "timeout" else "").write(folder)


def _system(root: Path, system: str, times: list[float], endings: dict[int, str] | None = None) -> Path:
    for i, seconds in enumerate(times):
        _run(root, system, i, seconds, (endings or {}).get(i, "converged"))
    return root


def _quality(tmp_path: Path, *roots: Path) -> tuple[pd.DataFrame, str]:
    out = tmp_path / "report"
    assert main(["compare", *map(str, roots), "-o", str(out)]) in (0, 4)  # the first root's system: the baseline
    return pd.read_csv(out / "quality.csv").set_index("system"), (out / "report.md").read_text()


def test_two_runs_killed_at_their_timeout_leave_no_valid_score_and_no_verdict(tmp_path: Path) -> None:
    a = _system(tmp_path / "a", "sysA", SLOW)
    b = _system(tmp_path / "b", "sysB", FAST, {3: "timeout", 4: "timeout"})
    table, page = _quality(tmp_path, a, b)
    row = table.loc["sysB"]
    assert (row["runs"], row["converged"], bool(row["valid"]), bool(row["void"])) == (5, 3, False, True)
    assert row["olympic_why"] == "2 of 5 runs did not converge: MLPerf voids a result with more than 1"
    assert row["not_converged"] == "2 timeout: the job passed its time limit"
    assert row["finding"] == "not judged" and "no valid score for sysB" in row["verdict"]
    assert "sysB: 3 of 5 runs converged; sysA: 5 of 5 runs converged" in row["verdict"]
    assert "| 5 (3): 2 timeout: the job passed its time limit |" in page
    decision = page[page.index("## Decision"):]
    line = next(ln for ln in decision.splitlines() if ln.startswith("- time to train"))
    assert "sysB against sysA: not judged: no valid score for sysB" in line and "faster" not in line


def test_runs_stopped_at_the_epoch_cap_void_the_verdict_alike(tmp_path: Path) -> None:
    a = _system(tmp_path / "a", "sysA", SLOW)
    b = _system(tmp_path / "b", "sysB", FAST, {0: "capped", 4: "capped"})
    table, _ = _quality(tmp_path, a, b)
    row = table.loc["sysB"]
    assert (row["runs"], row["converged"], row["finding"]) == (5, 3, "not judged")
    assert row["not_converged"] == "2 the epoch cap (4 epochs) came first" and pd.isna(row["score_s"])


def test_one_run_that_did_not_converge_is_the_slowest_and_the_verdict_says_the_shares(tmp_path: Path) -> None:
    a = _system(tmp_path / "a", "sysA", SLOW)
    b = _system(tmp_path / "b", "sysB", FAST, {0: "failed"})
    table, _ = _quality(tmp_path, a, b)
    row = table.loc["sysB"]
    assert bool(row["valid"]) and row["score_s"] == pytest.approx((79.5 + 80.5 + 81) / 3)  # 79 dropped, and the failure
    assert row["finding"] == "faster" and row["verdict"].endswith(
        "(sysB: 4 of 5 runs converged; sysA: 5 of 5 runs converged)")


def test_neither_side_with_a_valid_score_says_so_and_runs_under_way_are_no_runs_yet(tmp_path: Path) -> None:
    a = _system(tmp_path / "a", "sysA", SLOW, {1: "timeout", 2: "capped"})
    b = _system(tmp_path / "b", "sysB", FAST + [80.0], {0: "timeout", 1: "timeout", 5: "running"})
    table, _ = _quality(tmp_path, a, b)
    assert table.loc["sysB", "runs"] == 5  # the run still under way is not one yet
    assert table.loc["sysB", "verdict"].startswith("not judged: no valid score on either side (sysB: 3 of 5 runs "
                                                   "converged; sysA: 3 of 5 runs converged;")


def test_accept_judges_a_time_to_train_only_on_a_valid_score(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    criteria = tmp_path / "criteria.toml"
    criteria.write_text('[[criterion]]\nname = "trains to 85% in 90 s"\nmetric = "time_to_train"\nmax = 90.0\n'
                        'benchmark = "fashion_mnist"\nsystem = "sysB"\n')
    good = _system(tmp_path / "good", "sysB", FAST)
    assert main(["accept", str(criteria), str(good), "-o", str(tmp_path / "a1")]) == 0
    assert "pass" in capsys.readouterr().out
    bad = _system(tmp_path / "bad", "sysB", FAST, {1: "timeout", 3: "capped"})
    assert main(["accept", str(criteria), str(bad), "-o", str(tmp_path / "a2")]) == 4
    [row] = pd.read_csv(tmp_path / "a2" / "acceptance.csv").to_dict("records")
    assert row["verdict"] == "not judged" and "no valid score by MLPerf's rule: 2 of 5 runs did not converge" in \
        row["why"]


def test_a_configuration_that_stops_converging_is_a_regression_in_its_history(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "h.sqlite")
    root = _system(tmp_path / "nights", "sysA", [80.0] * 15, {i: "timeout" for i in range(10, 15)})
    assert main(["history", "import", str(root), "--store", store]) == 0
    capsys.readouterr()
    assert main(["history", "check", "--store", store, "--format", "json"]) == 1
    (row,) = json.loads(capsys.readouterr().out)
    assert row["finding"] == "regression" and "stopped converging: 0 of 5 runs converged of the latest 5" in \
        row["verdict"] and "10 of 10 runs converged of the 10 before" in row["verdict"]
    other = str(tmp_path / "h2.sqlite")
    capped = _system(tmp_path / "capped", "sysA", [80.0] * 15, {i: "capped" for i in (11, 12, 13, 14)})
    assert main(["history", "import", str(capped), "--store", other]) == 0
    capsys.readouterr()
    assert main(["history", "check", "--store", other, "--format", "json"]) == 1
    assert "stopped converging: 1 of 5 runs converged" in json.loads(capsys.readouterr().out)[0]["verdict"]
    split = START + 10 * 3600  # nights 0-9 against 10-14
    at = [datetime.fromtimestamp(t, timezone.utc).isoformat() for t in (split - 1, split)]
    assert main(["history", "compare", "--store", other, "--a", f"until={at[0]}", "--b", f"since={at[1]}"]) == 4
    said = capsys.readouterr().out
    assert "not judged: no valid score for B: 4 of 5 runs did not converge" in said


def test_the_time_to_target_table_is_built_once_a_report_for_its_section_and_the_decision(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hvdbench.analysis.tables import quality

    built = []
    real = quality.quality_table
    counted = lambda *a, **k: built.append(1) or real(*a, **k)  # noqa: E731
    monkeypatch.setattr(quality, "quality_table", counted)
    monkeypatch.setattr("hvdbench.analysis.report.build.quality_table", counted, raising=False)  # a second road
    a = _system(tmp_path / "a", "sysA", SLOW)
    b = _system(tmp_path / "b", "sysB", FAST)
    table, page = _quality(tmp_path, a, b)
    assert len(built) == 1 and table.loc["sysB", "finding"] == "faster"
    decision = page.split("## Decision", 1)[1].split("\n## ", 1)[0]
    assert "sysB" in decision and "time to" in decision.lower()
