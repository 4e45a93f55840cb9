"""The vendor's promise checked with intervals (hvdbench accept), and last month's cluster against today's
(hvdbench compare OLD NEW --regressions), with planted measurements: a criterion clearly met passes, one
clearly missed fails, one on the threshold is undecided with the measurement that would decide it,
one no run matches is not measured; over 400 planted draws a true value 3% above the threshold is failed
in at most 2.5% of them and one 3% below is passed in at most 2.5%; regressions mark only planted changes;
a bad criteria file is one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import write_run
from hvdbench.analysis.verdicts.acceptance import Measured, exit_status, judge, verdict
from hvdbench.analysis.verdicts.criteria import Criterion, load_criteria
from hvdbench.analysis.collect import collect
from hvdbench.analysis.tables.scaling import run_stats_table, scaling_table
from hvdbench.analysis.stats import run_stats
from hvdbench.cli import main
from hvdbench.core.errors import UsageError
from hvdbench.core.spec import RunSpec

ARGS = ("--model", "resnet20", "--batch-size", "32")


def _lognormal(rng: np.random.Generator, mean: float, cv: float, n: int) -> list[float]:
    sigma = np.sqrt(np.log(1 + cv**2))
    return list(rng.lognormal(np.log(mean) - sigma**2 / 2, sigma, n))


def _results(root: Path, step_s: dict[int, float], seed: int = 1, system: str = "dgx", repeats: int = 3) -> None:
    """``repeats`` runs of each size, each at its own level (0.5% apart between runs), 2% noise a step."""
    rng = np.random.default_rng(seed)
    for np_, mean in step_s.items():
        for repeat in range(repeats):
            level = mean * rng.lognormal(0.0, 0.005)
            write_run(root, RunSpec(benchmark="cifar10", args=ARGS, np=np_, system=system, repeat=repeat),
                      [_lognormal(rng, level, 0.02, 60) for _ in range(np_)])


def _criteria(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "criteria.toml"
    path.write_text(body)
    return path


def test_met_missed_straddled_and_unmeasured_criteria(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _results(tmp_path / "r", {1: 0.1, 2: 0.105})  # 320 images/s on 1 rank; 2 ranks at 95% efficiency
    criteria = _criteria(tmp_path, """
[[criterion]]
name = "per GPU at 2"
benchmark = "cifar10"
gpus = 2
metric = "throughput_per_gpu"
min = 250
[[criterion]]
name = "efficiency at 2"
benchmark = "cifar10"
gpus = 2
metric = "efficiency"
min = 0.99
[[criterion]]
name = "on the line"
benchmark = "cifar10"
gpus = 1
metric = "throughput"
min = 320
[[criterion]]
name = "at 8 GPUs"
benchmark = "cifar10"
gpus = 8
metric = "throughput"
min = 1
""")
    status = main(["accept", str(criteria), str(tmp_path / "r"), "-o", str(tmp_path / "out")])
    table = pd.read_csv(tmp_path / "out" / "acceptance.csv").set_index("criterion")
    assert table["verdict"].to_dict() == {"per GPU at 2": "pass", "efficiency at 2": "fail",
                                          "on the line": "undecided", "at 8 GPUs": "not measured"}
    assert status == 1  # one fails
    assert "threshold" in table.loc["on the line", "why"] and "at 2 GPU(s)" in table.loc["at 8 GPUs", "why"]
    text = (tmp_path / "out" / "acceptance.txt").read_text()
    assert "per GPU at 2: throughput_per_gpu ≥ 250" in text and "PASS" in text
    assert "System as the runs recorded it" in text
    assert "## Acceptance" in (tmp_path / "out" / "report.md").read_text()
    assert "acceptance" in capsys.readouterr().out


def test_one_run_a_criterion_is_not_judged_unless_asked_to_judge_within_runs(tmp_path: Path) -> None:
    """One run: its interval says how steady that run was, not where the next would land. The default (--min-runs 3)
    says so and exits 4; --min-runs 1 judges on the within-run interval; --borrow-spread lends the spread between
    runs measured on another configuration of the same system, and says so."""
    _results(tmp_path / "r", {1: 0.1}, repeats=1)
    criteria = _criteria(tmp_path, "[[criterion]]\nname='thr'\nbenchmark='cifar10'\ngpus=1\nmetric='throughput'\n"
                                   "min=250\n")
    assert main(["accept", str(criteria), str(tmp_path / "r"), "-o", str(tmp_path / "a")]) == 4
    row = pd.read_csv(tmp_path / "a" / "acceptance.csv").iloc[0]
    assert row["verdict"] == "not judged"
    assert row["why"] == "1 run behind it; the spread between runs is unknown (hvdbench run … --repeats 3)"
    assert main(["accept", str(criteria), str(tmp_path / "r"), "-o", str(tmp_path / "b"), "--min-runs", "1"]) == 0
    _results(tmp_path / "r", {2: 0.105}, repeats=3, seed=5)  # another configuration of the system, 3 runs
    assert main(["accept", str(criteria), str(tmp_path / "r"), "-o", str(tmp_path / "c"), "--borrow-spread"]) == 0
    row = pd.read_csv(tmp_path / "c" / "acceptance.csv").iloc[0]
    assert row["verdict"] == "pass" and "run-to-run spread borrowed: " in row["why"] and "from 3 runs of 1 other " \
        "configuration of dgx" in row["why"]


def test_exit_status_gates_a_pipeline() -> None:
    for verdicts, status in ((["pass", "pass"], 0), (["pass", "fail", "undecided"], 1),
                             (["pass", "undecided"], 4), (["not measured"], 4), (["pass", "not judged"], 4)):
        assert exit_status(pd.DataFrame({"verdict": verdicts})) == status


@pytest.mark.parametrize("offset, wrong", [(1.03, "fail"), (0.97, "pass")])
def test_a_true_value_3pct_from_the_threshold_is_misjudged_at_most_2_5pct_of_the_time(offset: float,
                                                                                       wrong: str) -> None:
    """400 planted runs whose true throughput is 3% above (below) the threshold: the verdict's 95% interval
    fails (passes) it in at most 2.5% of them."""
    rng = np.random.default_rng(7)
    criterion = Criterion("c", "throughput", "min", 1000.0, {}, None, None)
    wrongs = 0
    for draw in range(400):
        step = 32 / (1000.0 * offset)  # true throughput = 1000 x offset images/s
        durations = pd.DataFrame({"rank": 0, "step": range(40), "warmup": False,
                                  "duration": _lognormal(rng, step, 0.10, 40), "samples": 32.0})
        stats = run_stats(durations, warmup=0)
        assert stats is not None
        got = verdict(criterion, Measured(stats.throughput, stats.ci_low, stats.ci_high, stats.steps, "steps", ""))
        wrongs += got["verdict"] == wrong
    print(f"wrong verdict ({wrong}) at {offset:.2f} x threshold: {wrongs} of 400")
    assert wrongs / 400 <= 0.025


@pytest.mark.bad_input
@pytest.mark.parametrize("body, problem", [
    ("[[criterion]]\nname='a'\nmetric='speed'\nmin=1\n", "metric 'speed' is unknown; valid: throughput"),
    ("[[criterion]]\nname='a'\nmetric='throughput'\nmin=1\ncolour='red'\n", "unknown key(s) colour; valid:"),
    ("[[criterion]]\nname='a'\nmetric='throughput'\n", "give exactly one of min or max"),
    ("[[criterion]]\nname='a'\nmetric='throughput'\nmin=1\nmax=2\n", "give exactly one of min or max"),
    ("[[criterion]]\nname='a'\nmetric='throughput'\nmin=nan\n", "min must be a finite number"),
    ("[[criterion]]\nname='a'\nmetric='throughput'\nmin=1\n[[criterion]]\nname='a'\nmetric='speedup'\nmin=1\n",
     "criterion name 'a' is used twice"),
    ("title = 'x'\n", "expected [[criterion]] tables"), ("[[criterion]\n", "not valid TOML"),
])
def test_a_bad_criteria_file_is_one_line(tmp_path: Path, body: str, problem: str) -> None:
    with pytest.raises(UsageError) as err:
        load_criteria(_criteria(tmp_path, body))
    assert problem in str(err.value) and "\n" not in str(err.value)


@pytest.mark.bad_input
def test_a_criterion_matching_several_configurations_asks_for_a_narrower_selector(tmp_path: Path) -> None:
    _results(tmp_path / "r", {1: 0.1})
    write_run(tmp_path / "r", RunSpec(benchmark="cifar10", args=(*ARGS[:2], "--batch-size", "64"), np=1,
                                      system="dgx"), [[0.2] * 30])
    criteria = load_criteria(_criteria(tmp_path, "[[criterion]]\nname='a'\nbenchmark='cifar10'\ngpus=1\n"
                                                 "metric='throughput'\nmin=1\n"))
    collection = collect([tmp_path / "r"])
    scaling = scaling_table(collection, run_stats_table(collection))
    with pytest.raises(UsageError) as err:
        judge(criteria, {"scaling": scaling}, collection)
    assert "matches 2 configurations" in str(err.value) and "batch_size" in str(err.value)


def test_regressions_mark_only_planted_changes(tmp_path: Path) -> None:
    _results(tmp_path / "old", {1: 0.100, 2: 0.105}, seed=1, system="jan")
    _results(tmp_path / "new", {1: 0.100}, seed=2, system="feb")  # unchanged
    _results(tmp_path / "new", {2: 0.120}, seed=3, system="feb")  # 12.5% slower: planted
    write_run(tmp_path / "new", RunSpec(benchmark="mlp", np=1, system="feb"), [[0.01] * 30])  # only in new
    status = main(["compare", str(tmp_path / "old"), str(tmp_path / "new"), "--regressions",
                   "-o", str(tmp_path / "out")])
    table = pd.read_csv(tmp_path / "out" / "regressions.csv")
    changes = dict(zip(zip(table["workload"].str.split().str[1], table["np"]), table["change"]))
    assert changes == {("cifar10", 1): "undecided", ("cifar10", 2): "regression",  # 0.996 [0.978-1.015]: on the edge
                       ("mlp", 1): "not judged: only in new"}
    assert status == 1
    said = json.loads((tmp_path / "out" / "regressions.json").read_text())
    assert [r["finding"] for r in said] == ["undecided", "regression", "not judged"]
    assert said[0]["why"].startswith("could not tell: a difference under ×1.0") and said[0]["runs_to_decide"] >= 4
    _results(tmp_path / "one", {2: 0.120}, seed=4, system="feb", repeats=1)  # one run: the spread unknown
    assert main(["compare", str(tmp_path / "old"), str(tmp_path / "one"), "--regressions", "-o",
                 str(tmp_path / "out1")]) == 4
    change = pd.read_csv(tmp_path / "out1" / "regressions.csv").set_index("np").loc[2, "change"]
    assert change == "not judged: 3 runs of old and 1 of new; the spread between runs is unknown (hvdbench run … " \
                     "--repeats 3)"


def test_the_shipped_criteria_files_parse() -> None:
    shipped = sorted((Path(__file__).resolve().parents[1] / "docs" / "acceptance").glob("*.toml"))
    assert len(shipped) >= 2
    for path in shipped:
        assert load_criteria(path)


def test_an_unmeasured_criterion_names_the_nearest_configurations_and_cpu_stand_ins_are_said(tmp_path: Path) -> None:
    """A criterion for resnet56 at 8 GPUs where resnet20 ran at 1 and 2: not measured, with the nearest that exist
    and what differs (the model); acceptance.txt of CPU ranks says they are CPU stand-ins before any verdict."""
    from hvdbench.analysis.verdicts.acceptance import _nearest, protocol
    from hvdbench.analysis.verdicts.criteria import Criterion

    _results(tmp_path / "r", {1: 0.1, 2: 0.105})
    collection = collect([tmp_path / "r"])
    table = scaling_table(collection, run_stats_table(collection))
    wanted = Criterion("r56 at 8", "throughput", "min", 1.0, {"benchmark": "cifar10", "model": "resnet56"}, 8, None)
    said = _nearest(table, wanted)
    assert said.startswith("no run matches; nearest measured: resnet20 at 2 ") and "(model resnet20)" in said
    assert said.index("at 2 ") < said.index("at 1 ")  # 2 ranks are nearer 8 than 1 is
    criteria = _criteria(tmp_path, "[[criterion]]\nname='thr'\nbenchmark='cifar10'\ngpus=1\nmetric='throughput'\n"
                                   "min=250\n")
    judged = judge(load_criteria(criteria), {"scaling": table, "run_stats": run_stats_table(collection)}, collection)
    collection.runs["device_name"] = "AMD EPYC 7763 64-Core Processor"
    text = protocol(criteria, judged, collection, "2026-11-29")
    assert text.splitlines()[2].startswith("These results are CPU stand-ins: ranks trained on CPUs, not GPUs.")
