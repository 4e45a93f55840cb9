"""A selection by start time (``--runs-since``, ``--runs-until``): the runs of a noisy first hour are left out of
compare's verdict without deleting a folder, each listed with when it started and the window, the verdict resting on
the rest alone (its runs per side say so), a run that recorded no start time left out too, and a run left out by time
no run to a target either (MLPerf's count of runs is not short of it)."""

from __future__ import annotations

import math
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import write_run
from hvdbench.analysis.collect import collect
from hvdbench.analysis.selection import LEFT_OUT, Window, by_time
from hvdbench.cli import main
from hvdbench.core.errors import UsageError
from hvdbench.core.spec import RunSpec
from hvdbench.core.time_to_train import counts_as_run

START = 1_795_000_000.0  # 2026-11-18 11:06:40 UTC: the first, loaded hour
QUIET = START + 3600


def _runs(root: Path, system: str, step: float) -> None:
    """Two runs in the loaded hour (each 40% off, one either way) and four in the quiet one after."""
    for repeat in range(6):
        rng = np.random.default_rng(zlib.crc32(f"{system}{repeat}".encode()))
        loaded = repeat < 2
        mean = step * (1.4 if repeat == 0 else 0.6) if loaded else step
        started = START + 60 * repeat if loaded else QUIET + 60 * repeat
        write_run(root / system, RunSpec(benchmark="cifar10", system=system, repeat=repeat),
                  [list(rng.lognormal(math.log(mean), 0.01, 30))], env={"time": started})


@pytest.fixture()
def roots(tmp_path: Path) -> tuple[Path, Path]:
    _runs(tmp_path, "A", 0.050)
    _runs(tmp_path, "B", 0.040)
    return tmp_path / "A", tmp_path / "B"


def test_compare_since_the_quiet_hour_judges_its_runs_alone_and_lists_the_others(
        tmp_path: Path, roots: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "report"
    since = pd.Timestamp(QUIET - 1, unit="s").strftime("%Y-%m-%dT%H:%M:%S")
    assert main(["compare", *map(str, roots), "-o", str(out), "--runs-since", since]) == 0
    runs = pd.read_csv(out / "runs.csv")
    left = runs[runs["status"] == LEFT_OUT]
    assert len(left) == 4 and set(left["repeat"]) == {0, 1}
    hour = pd.Timestamp(START, unit="s").strftime("%Y-%m-%d %H:")
    assert left["reason"].str.startswith(f"left out by time: started {hour}").all()
    assert left["reason"].str.contains(f"before --runs-since {since.replace('T', ' ')} UTC", regex=False).all()
    text = (out / "report.md").read_text(encoding="utf-8")
    assert f"Runs selected by --runs-since {since.replace('T', ' ')} UTC: 4 run(s) outside it left out" in text
    assert "(1 faster, 8 run(s)) recorded" in capsys.readouterr().out  # the verdict's record: the runs it rests on
    decision = pd.read_csv(out / "decision.csv")
    assert decision.filter(like="runs").max().max() == 4  # the quiet hour's runs a side, never the loaded ones
    every = tmp_path / "every"
    assert main(["compare", *map(str, roots), "-o", str(every)]) == 0
    assert (pd.read_csv(every / "runs.csv")["status"] == "ok").all()  # nothing was deleted or changed on disk


def test_a_run_without_a_start_time_is_outside_any_window_and_a_left_out_run_is_no_run_to_a_target(
        roots: tuple[Path, Path]) -> None:
    collection = collect(list(roots))
    runs = collection.runs.copy()
    runs.loc[runs.index[0], "started"] = np.nan
    collection.runs = runs
    kept = by_time(collection, Window(until=QUIET + 3600))
    first = kept.runs.iloc[0]
    assert first["status"] == LEFT_OUT and "recorded no start time" in first["reason"]
    assert (kept.runs["status"] == "ok").sum() == 11 and (collection.runs["status"] == "ok").all()
    assert by_time(kept, Window(until=QUIET + 3600)).runs.equals(kept.runs)  # applied twice: the same
    assert not counts_as_run(LEFT_OUT) and counts_as_run("failed")


def test_a_window_no_run_could_be_in_and_a_time_that_is_none_are_one_line(roots: tuple[Path, Path],
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UsageError, match="is not before --runs-until"):
        Window(since=QUIET, until=START)
    for flags in (["--runs-since", "yesterday"], ["--runs-since", "2026-11-19", "--runs-until", "2026-11-18"]):
        assert main(["compare", *map(str, roots), *flags]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--runs-" in err[0]
