"""The history keeps every run and its watch holds on the noise machines have: the same sweep run on three nights into
three roots leaves three runs of each configuration (real Horovod runs); a month of nightly folders imports in one
command and a second import adds nothing; a copy nudged by 3 parts in 10 million is a copy to the report and to the
store alike, whichever is imported first; change points agree with MongoDB's E-divisive (signal-processing-algorithms)
on planted series, do not flip under a 1e-12 nudge or a round trip through the CSV export, and call a flat but
wandering pace (AR(1), φ 0.7) a change in at most 5% of histories; a standing regression after a partial fix is still
a regression."""

from __future__ import annotations

import io
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import hvdbench_exe, write_run
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from change_detection import ar1  # noqa: E402 - the wandering pace the benchmark measures, one definition
from hvdbench.analysis.collect import collect
from hvdbench.analysis.history.changes import change_points, judge_history
from hvdbench.analysis.history.recording import record_roots
from hvdbench.cli import main
from hvdbench.core.spec import RunSpec

SPEC = RunSpec(benchmark="cifar10", args=("--model", "resnet20"), np=2, repeat=0, system="dgx-a")


def _night(root: Path, night: int, speed: float = 1.0) -> Path:
    rng = np.random.default_rng(100 + night)
    write_run(root, SPEC, [list(rng.uniform(0.1, 0.12, 30) / speed) for _ in range(2)], host="node1",
              env={"time": 1_790_000_000.0 + night * 86400})
    return root


def test_a_month_of_nightly_folders_imports_at_once_each_night_once(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    roots = [_night(tmp_path / f"day{d:02d}", d) for d in range(1, 31)]
    store = str(tmp_path / "h.sqlite")
    assert main(["history", "import", *map(str, roots), "--store", store]) == 0
    assert "history: 30 added in" in capsys.readouterr().out
    assert main(["history", "import", *map(str, roots), "--store", store]) == 0
    assert "0 added, 30 already recorded" in capsys.readouterr().out
    moved = tmp_path / "archive" / "day07"
    shutil.copytree(roots[6], moved)  # a night's root moved to the archive and imported from there
    assert main(["history", "import", str(moved), "--store", store]) == 0
    assert "0 added, 1 already recorded" in capsys.readouterr().out
    assert main(["history", "--store", store, "--format", "json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert len(runs) == 30 and len({r["run_key"] for r in runs}) == 30 and {r["config"] for r in runs} == \
        {runs[0]["config"]}
    assert main(["history", "check", "--store", store]) == 0
    assert "no change in 30 runs" in capsys.readouterr().out
    assert main(["report", *map(str, roots[:3]), "-o", str(tmp_path / "out")]) == 0  # three nights: three repeats
    table = pd.read_csv(tmp_path / "out" / "scaling.csv")
    assert table["repeats"].tolist() == [3]


def test_a_nudged_copy_is_a_copy_to_the_report_and_the_store_alike(tmp_path: Path) -> None:
    original = _night(tmp_path / "a", 1)
    nudged = tmp_path / "b"
    shutil.copytree(original, nudged)
    for spec_file in nudged.glob("*/run.json"):
        data = json.loads(spec_file.read_text())
        data["spec"]["system"] = "dgx-b"  # relabelled as another offer
        spec_file.write_text(json.dumps(data))
        spec_file.parent.rename(nudged / RunSpec.from_dict(data["spec"]).id)
    for log in nudged.glob("*/rank-*.jsonl"):
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        for record in lines:
            if record.get("kind") == "step":
                record["duration"] *= 1 + 3e-7  # 3 parts in 10 million
        log.write_text("".join(json.dumps(r) + "\n" for r in lines))
        for columns in log.parent.glob(log.name + ".*"):
            columns.unlink()
    both = collect([original, nudged]).runs
    assert sorted(both["status"]) == ["inconsistent", "ok"]  # the report: a copy
    for order in ((original, nudged), (nudged, original)):
        store = str(tmp_path / f"h-{order[0].name}.sqlite")
        first, second = (record_roots([root], store) for root in order)
        assert (first.added, second.added, second.copies) == (1, 0, 1)  # the store: a copy, whichever came first


@pytest.fixture(scope="module")
def planted() -> list[np.ndarray]:
    """36 histories of 36 runs at a 2% spread: flat, one 10% step at run 18, two 10% steps at 12 and 24."""
    rng = np.random.default_rng(5)
    out = []
    for t in range(36):
        x = rng.normal(0, 0.02, 36)
        if t % 3 == 1:
            x[18:] += math.log(0.9)
        if t % 3 == 2:
            x[12:] += math.log(0.9)
            x[24:] += math.log(0.9)
        out.append(x)
    return out


def test_change_points_agree_with_mongodbs_e_divisive(planted: list[np.ndarray]) -> None:
    from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive

    agree = [change_points(x) == sorted(e_divisive(x, pvalue=0.01, permutations=999)) for x in planted]
    assert sum(agree) >= 34, agree  # the permutations differ; both find both steps of a two-step regression
    assert all(change_points(x) in ([12, 24], [12, 16, 24], [12, 20, 24]) for x in planted[2::3])


def test_change_points_hold_under_a_nudge_and_a_round_trip_through_csv(planted: list[np.ndarray]) -> None:
    for x in planted:
        figures = np.exp(7.0 + x)
        again = pd.read_csv(io.StringIO(pd.DataFrame({"t": figures}).to_csv(index=False)))["t"].to_numpy()
        assert change_points(np.log(figures)) == change_points(np.log(figures * (1 + 1e-12))) == \
            change_points(np.log(again))


def test_a_wandering_flat_pace_is_rarely_called_a_change() -> None:
    rng = np.random.default_rng(21)
    called = [judge_history(np.exp(7.0 + ar1(30, 0.7, 0.025, rng)), 0.02).finding.finding
              in ("regression", "improvement") for _ in range(300)]
    assert np.mean(called) <= 0.05
    slowed = [judge_history(np.exp(7.0 + rng.normal(0, 0.025, 30) + np.r_[np.zeros(19), np.full(11, math.log(
        0.93))]), 0.02).finding.finding == "regression" for _ in range(100)]
    assert np.mean(slowed) >= 0.85


def test_a_standing_regression_after_a_partial_fix_is_still_one() -> None:
    x = np.r_[np.full(8, 1.0), np.full(6, 0.8), np.full(8, 0.9)] * np.exp(np.random.default_rng(2).normal(0, 0.01, 22))
    judged = judge_history(x, 0.02)
    assert judged.changes == [8, 14] and judged.finding.finding == "regression"
    assert judged.finding.verdict.startswith("regression against the first stretch") and 0.88 < judged.ratio < 0.92


@pytest.mark.slow
def test_the_same_sweep_on_three_nights_into_three_roots_keeps_three_runs_each(
        tmp_path: Path, hvd_env: dict, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "h.sqlite")
    for night in range(3):
        proc = subprocess.run([hvdbench_exe(), "run", "cifar10", "--np", "1,2", "--output", str(tmp_path / f"n{night}"),
                               "--store", store, "--", "--model", "resnet20", "--batch-size", "8", "--steps", "6",
                               "--warmup-steps", "1", "--threads", "1"], capture_output=True, text=True, env=hvd_env,
                              timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        assert "history: 2 added in" in proc.stdout
    assert main(["history", "--store", store, "--format", "json"]) == 0
    runs = json.loads(capsys.readouterr().out)
    assert sorted(pd.Series([r["np"] for r in runs]).value_counts().items()) == [(1, 3), (2, 3)]
    assert main(["history", "check", "--store", store]) == 4  # 3 runs a configuration: too short to judge
    assert "3 run(s) in its history" in capsys.readouterr().out


def test_the_latest_stretch_is_judged_against_the_accepted_baseline_where_one_is_kept(tmp_path: Path) -> None:
    """Tuned (0.85), accepted (1.0), then a regression (0.9) partly fixed (0.95): against the stretch before it and
    the first one the latest runs improved; against what was accepted they are 5% short."""
    from hvdbench.analysis.history.check import check_table
    from hvdbench.analysis.history.query import Selection, select
    from hvdbench.analysis.history.store import open_store
    from hvdbench.analysis.history.verdicts import accepted_keys
    from history_month import month_rows

    rng = np.random.default_rng(4)
    levels = np.r_[np.full(10, 0.85), np.full(10, 1.0), np.full(10, 0.9), np.full(10, 0.95)]
    rows = [r for r in month_rows(1) + month_rows(2) if r["benchmark"] == "imagenet" and r["np"] == 8][:40]
    for i, row in enumerate(rows):
        row.update(throughput=2950.0 * levels[i] * float(np.exp(rng.normal(0, 0.01))), started=1e9 + i * 86400,
                   run_id=f"night-{i:02d}", digest=f"m:night{i}")
    assert judge_history(np.array([r["throughput"] for r in rows]), 0.02).finding.finding == "improvement"
    with open_store(str(tmp_path / "h.sqlite")) as store:
        store.record(rows, now=1.0)
        store.record_verdict("acc", "accept", "pass", ["planted"], [], [("judged", f"night-{i:02d}")
                                                                       for i in range(10, 20)], 2.0)
        table = check_table(select(store, Selection()), 0.02, accepted_keys(store))
    [row] = table.to_dict("records")
    assert row["finding"] == "regression" and row["verdict"].startswith("regression against the accepted baseline")
    assert 0.93 < row["ratio"] < 0.97


def test_the_same_runs_give_the_same_interval_whichever_command_asks(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """compare (B against the baseline A), compare --regressions (new over old) and history compare (B over A) on the
    same two roots of three runs each: one interval."""
    rng = np.random.default_rng(9)
    for system, speed in (("dgx-a", 1.0), ("dgx-b", 1.06)):
        for repeat in range(3):
            spec = RunSpec(benchmark="cifar10", args=("--model", "resnet20"), np=2, repeat=repeat, system=system)
            write_run(tmp_path / system, spec, [list(rng.uniform(0.1, 0.12, 40) / speed * rng.uniform(0.97, 1.03))
                                                for _ in range(2)], host="node1")
    a, b = str(tmp_path / "dgx-a"), str(tmp_path / "dgx-b")
    assert main(["compare", a, b, "-o", str(tmp_path / "c"), "--store", "off"]) == 0
    row = pd.read_csv(tmp_path / "c" / "compare.csv").query("system == 'dgx-b'").iloc[0]
    main(["compare", a, b, "--regressions", "-o", str(tmp_path / "r"), "--store", "off"])
    regression = pd.read_csv(tmp_path / "r" / "regressions.csv").iloc[0]
    store = str(tmp_path / "h.sqlite")
    assert main(["history", "import", a, b, "--store", store]) == 0
    capsys.readouterr()
    main(["history", "compare", "--store", store, "--a", "system=dgx-a", "--b", "system=dgx-b", "--format", "json"])
    [history] = json.loads(capsys.readouterr().out)
    intervals = [(row["relative_low"], row["relative_high"]), (regression["ratio_low"], regression["ratio_high"]),
                 (history["ratio_low"], history["ratio_high"])]
    assert all(other == pytest.approx(intervals[0], abs=1e-9) for other in intervals[1:]), intervals
    assert intervals[0][0] > 1.0  # and it is a real one: B faster


def test_the_published_site_says_what_history_check_says(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A month slower from night 20: the site's page and index carry check's own finding and interval (one judgement
    of a configuration, with the runs' own intervals and the accepted baseline, for every history command)."""
    roots = [_night(tmp_path / f"n{d:02d}", d, 1.0 if d < 20 else 0.9) for d in range(1, 31)]
    store = str(tmp_path / "h.sqlite")
    assert main(["history", "import", *map(str, roots), "--store", store]) == 0
    capsys.readouterr()
    assert main(["history", "check", "--store", store, "--format", "json"]) == 1
    [checked] = json.loads(capsys.readouterr().out)
    assert checked["finding"] == "regression"
    assert main(["history", "publish", str(tmp_path / "site"), "--store", store]) == 0
    index = (tmp_path / "site" / "index.html").read_text()
    [page] = [p for p in (tmp_path / "site").glob("config-*.html")]
    interval = f"{checked['ratio']:.3f} [{checked['ratio_low']:.3f}–{checked['ratio_high']:.3f}]"
    assert interval in page.read_text() and checked["verdict"] in index.replace("&#x27;", "'"), interval
