"""history check on a month of planted history (benchmarks/history_month.py: three configurations run nightly, a
driver change on day 12 that changes nothing, BERT 7% slower from day 20) names day 20 and BERT only, exits 1; a
history too short is not judged (exit 4); a change that comes with an environment change says what changed; over
many months it rarely calls a change that is not there. The published site marks the change in a real browser."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hvdbench.analysis.history.changes import _divergences, judge_history
from hvdbench.analysis.history.check import check_table
from hvdbench.analysis.history.query import Selection, select
from hvdbench.analysis.history.store import open_store
from hvdbench.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from history_month import many_months, month_rows, write_month  # noqa: E402


def test_the_divergence_is_the_energy_distance_of_each_split() -> None:
    x = np.random.default_rng(3).normal(0, 1, 14)
    for tau, q in enumerate(_divergences(x), 1):
        a, b = x[:tau], x[tau:]
        if len(a) < 2 or len(b) < 2:
            assert np.isnan(q)
            continue
        within_a = np.abs(a[:, None] - a[None, :]).sum() / (len(a) * (len(a) - 1))
        within_b = np.abs(b[:, None] - b[None, :]).sum() / (len(b) * (len(b) - 1))
        across = np.abs(a[:, None] - b[None, :]).mean()
        assert q == pytest.approx(len(a) * len(b) / len(x) * (2 * across - within_a - within_b))


def test_the_planted_month_names_day_20_and_that_configuration_only(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "h.sqlite")
    assert write_month(store) == 90
    assert main(["history", "check", "--store", store]) == 1
    out = capsys.readouterr().out
    lines = {line.split()[1]: line for line in out.splitlines() if line.startswith("dgx-h100")}
    assert "@night20" in lines["bert"] and "regression" in lines["bert"]  # the run made again on night 20
    imagenet = [line for line in out.splitlines() if line.startswith("dgx-h100") and " imagenet " in line]
    assert len(imagenet) == 2 and all("no change in 30 runs" in line for line in imagenet)
    assert "3 configuration(s): 1 regression, 2 no change" in out
    assert main(["history", "check", "--store", store, "--format", "json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    bert = next(r for r in rows if r["benchmark"] == "bert")
    assert bert["runs_before"] == 19 and bert["runs_after"] == 11 and 0.90 < bert["ratio"] < 0.96
    assert bert["ratio_high"] < 1 / 1.02 and bert["changed"] == ""  # the driver moved on day 12, not then


def test_a_short_history_is_not_judged_and_a_change_says_what_moved_with_it(tmp_path: Path) -> None:
    store = str(tmp_path / "h.sqlite")
    rows = month_rows(seed=5)
    for row in rows:  # the BERT slowdown now comes with a new NCCL on the same night
        if row["benchmark"] == "bert" and row["run_id"] >= "bert-np8-day20":
            row["environment"] = {**row["environment"], "nccl": "2.23.4"}
    short = [r for r in rows if not (r["benchmark"] == "imagenet" and r["np"] == 16)] + \
        [r for r in rows if r["benchmark"] == "imagenet" and r["np"] == 16][:6]
    with open_store(store) as opened:
        opened.record(short, now=1.0)
        table = check_table(select(opened, Selection()), 0.02).set_index(["benchmark", "np"])
    assert table.loc[("imagenet", 16), "finding"] == "not judged" and "6 run(s)" in table.loc[("imagenet", 16),
                                                                                               "verdict"]
    assert table.loc[("bert", 8), "changed"].startswith("nccl 2.21.5 → 2.23.4")
    assert main(["history", "check", "--store", store, "--benchmark", "imagenet", "--np", "16"]) == 4


def test_a_change_within_the_spread_is_rarely_called_over_many_months() -> None:
    figures = many_months(30)
    assert figures["false_alarms"] <= 0.05 and figures["detected"] >= 0.8
    assert figures["named_within_1_day"] >= 0.9
    flat = judge_history(np.exp(np.random.default_rng(8).normal(7.0, 0.025, 40)), 0.02)
    assert flat.finding.finding == "no change" and flat.changes == []


@pytest.mark.slow
def test_the_published_site_marks_the_change_in_a_browser(tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (scripts/setup.sh installs it where it can)")
    store = str(tmp_path / "h.sqlite")
    write_month(store)
    site = tmp_path / "site"
    assert main(["history", "publish", str(site), "--store", store]) == 0
    index = (site / "index.html").read_text()
    pages = re.findall(r'href="(config-\w+\.html)">dgx-h100 (\w+)', index)
    assert len(pages) == 3 and index.count("regression") >= 1
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
             "--disable-background-networking", "--disable-component-update", f"--user-data-dir={tmp_path / 'c'}",
             "--window-size=1100,700"]
    for page, benchmark in pages:
        dom = subprocess.run([*flags, "--dump-dom", (site / page).as_uri()], capture_output=True, text=True,
                             timeout=120).stdout
        assert ('id="change-1"' in dom) == (benchmark == "bert") and 'id="environment-1"' in dom
    bert = next(page for page, benchmark in pages if benchmark == "bert")
    shot = tmp_path / "bert.png"
    subprocess.run([*flags, f"--screenshot={shot}", (site / bert).as_uri()], capture_output=True, timeout=120)
    from matplotlib.image import imread

    pixels = imread(shot)[..., :3]
    red = (pixels[..., 0] > 0.6) & (pixels[..., 1] < 0.35) & (pixels[..., 2] < 0.35)  # the change's mark, drawn
    assert red.sum() > 200


@pytest.mark.bad_input
def test_the_site_shows_text_from_the_store_literally(tmp_path: Path) -> None:
    from hvdbench.analysis.history.publish import publish

    rows = [r for r in month_rows(seed=2) if r["benchmark"] == "bert"]
    for row in rows:
        row["system"], row["host"] = "<script>alert(1)</script>", "node\x1b]0;x\x07$x$"
        row["environment"] = {**row["environment"], "nccl": "<img src=x onerror=alert(1)>"}
    store = str(tmp_path / "h.sqlite")
    with open_store(store) as opened:
        opened.record(rows, now=1.0)
        runs = select(opened, Selection())
    pages = publish(runs, tmp_path / "site", 0.02)
    for page in pages:
        text = page.read_text()
        assert "<script>" not in text and "<img src" not in text and "\x1b" not in text and "\x07" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in pages[0].read_text()


def test_two_selections_compare_on_whole_runs_with_what_differs(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "h.sqlite")
    write_month(store)
    before, after = "until=2026-10-19", "since=2026-10-21"
    assert main(["history", "compare", "--store", store, "--a", before, "--b", after, "--format", "json"]) == 1
    rows = {r["benchmark"] + str(r["np"]): r for r in json.loads(capsys.readouterr().out)}
    assert rows["bert8"]["finding"] == "slower" and rows["bert8"]["ratio_high"] < 1 / 1.02
    assert (rows["bert8"]["runs_a"], rows["bert8"]["runs_b"]) == (18, 10)
    assert rows["bert8"]["differs"] == "driver 535.104.05/550.54.15 -> 550.54.15"
    assert {rows["imagenet8"]["finding"], rows["imagenet16"]["finding"]} <= {"equivalent", "undecided"}
    assert main(["history", "compare", "--store", store, "--a", "since=2026-10-29,until=2026-10-30", "--b",
                 "since=2026-10-30"]) == 4
    assert capsys.readouterr().out.count("not judged") == 3  # 1 run and 2: the spread between runs unknown
    assert main(["history", "compare", "--store", store, "--a", "system=dgx-h100", "--b", "system=dgx-h100"]) == 2
    assert "every run of side A is also on the other side (90 shared)" in capsys.readouterr().err
    assert main(["history", "compare", "--store", store, "--a", "since=2026-10-20,until=2026-10-28", "--b",
                 "since=2026-10-25"]) in (0, 4)  # overlapping windows: days 25-27 on both sides
    assert "9 run(s) on both sides are left out of both" in capsys.readouterr().err
    assert main(["history", "compare", "--store", store, "--a", "colour=red", "--b", "np=8"]) == 2
    assert "'colour' is not one of" in capsys.readouterr().err


def test_runs_to_a_target_are_checked_on_their_time_to_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A nightly run to target whose time to train grows 8% from day 20 while its throughput holds (more epochs to
    the target: the data or the recipe changed, not the machine): the check judges the time, calls the regression
    at day 20, and leaves the nights that did not converge out, said."""
    rng = np.random.default_rng(5)
    rows = [r for r in month_rows(7) if r["benchmark"] == "imagenet" and r["np"] == 8]
    for day, row in enumerate(rows, 1):
        row.update(benchmark="fashion_mnist", converged=day not in (4, 25), throughput=row["throughput"],
                   time_to_target_s=None if day in (4, 25) else 70.0 * (1.08 if day >= 20 else 1.0) *
                   float(np.exp(rng.normal(0, 0.02))), run_id=f"tt-day{day:02d}",
                   digest=f"m:tt{day}", unit="images")
    store = str(tmp_path / "h.sqlite")
    with open_store(store) as opened:
        opened.record(rows, now=1.0)
    assert main(["history", "check", "--store", store, "--format", "json"]) == 1
    (row,) = json.loads(capsys.readouterr().out)
    assert row["metric"] == "time to target (2 run(s) not converged: out of the pace, in the converged share)"
    assert row["runs"] == 28
    assert row["finding"] == "regression" and row["change_run"] == "tt-day20"
    assert 1 / 1.12 < row["ratio"] < 1 / 1.04 and row["unit"] == "1/s"
    site = tmp_path / "site"
    assert main(["history", "publish", str(site), "--store", store]) == 0
    page = next(p for p in site.glob("config-*.html"))
    assert "time to target (s)" in page.read_text()


def test_an_environment_change_is_a_numbered_mark_on_the_trend_and_its_text_below(tmp_path: Path) -> None:
    """The trend marks an environment change ``env N`` across the plot's foot, and what changed is listed under the
    plot by that number: no rotated label as tall as the plot (the y axis's title is the one rotated text)."""
    store = str(tmp_path / "h.sqlite")
    write_month(store)
    site = tmp_path / "site"
    assert main(["history", "publish", str(site), "--store", store]) == 0
    index = (site / "index.html").read_text()
    (bert,) = re.findall(r'href="(config-\w+\.html)">dgx-h100 bert', index)
    page = (site / bert).read_text()
    assert "<!-- env 1 -->" in page and page.count("rotate(-90") == 1
    assert re.search(r"<li>env 1, 2026-10-\d\d \d\d:\d\d: driver \S+ → \S+</li>", page)
