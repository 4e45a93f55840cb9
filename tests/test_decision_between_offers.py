"""The decision between offers (`hvdbench compare --baseline`): runs that differ only in run length are paired, every
system is judged against the chosen baseline in words with its interval, equivalent or undecided where the
interval does not clear the margin, and what one system measured alone is listed beside the nearest configuration
another system did. The verdict's calibration: a planted 20% difference is called one, a planted 0% one is not, in
at least 97.5% of 400 draws each, through the report's own resampling."""

from __future__ import annotations

import os
import re
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hvdbench.analysis.collect import collect
from hvdbench.analysis.ratios import ratio_interval
from hvdbench.analysis.report.build import Judging, build
from hvdbench.analysis.stats import throughput_draws
from hvdbench.analysis.keys import measured_args
from hvdbench.analysis.report.decision_view import cost_figures
from hvdbench.analysis.verdicts.decision import cost_verdict_lines, decision_lines, verdict
from hvdbench.core.errors import UsageError
from hvdbench.core.spec import RunSpec

from conftest import write_run


def test_run_length_flags_are_not_part_of_what_a_run_measures() -> None:
    assert measured_args("--model resnet20 --steps 20 --warmup-steps=3 --batch-size 32") == \
        "--model resnet20 --batch-size 32"
    assert measured_args("--target-ci 2 --max-steps 400 --precision amp") == "--precision amp"


def _called(true_ratio: float, rng: np.random.Generator, steps: int = 40, noise: float = 0.05) -> str:
    """One draw: two systems' runs of ``steps`` noisy steps, B's throughput ``true_ratio`` times A's, judged."""
    samples = np.full((steps, 1), 32.0)
    a = rng.lognormal(np.log(0.100), noise, size=(steps, 1))
    b = rng.lognormal(np.log(0.100 / true_ratio), noise, size=(steps, 1))
    seeds = rng.integers(0, 2**31, size=2)
    low, high = ratio_interval(throughput_draws(b, samples, n=1000, seed=int(seeds[0])),
                               throughput_draws(a, samples, n=1000, seed=int(seeds[1])))
    return verdict(low, high, 0.02)


@pytest.mark.parametrize("true_ratio, expected", [(1.20, "faster"), (1.0, None), (1 / 1.20, "slower")])
def test_a_planted_difference_is_called_and_none_is_not_in_400_draws(true_ratio: float, expected: str | None) -> None:
    rng = np.random.default_rng(2026)
    calls = [_called(true_ratio, rng) for _ in range(400)]
    if expected is None:  # a tie is never called either way (equivalent, or undecided where the runs cannot tell)
        called = sum(c in ("faster", "slower") for c in calls)
        assert called / len(calls) <= 0.025 and set(calls) <= {"faster", "slower", "equivalent within ±2%",
                                                               "undecided"}, {c: calls.count(c) for c in set(calls)}
        return
    assert calls.count(expected) / len(calls) >= 0.975, {c: calls.count(c) for c in set(calls)}


def _plant(root: Path, system: str, step_s: float, args: tuple[str, ...], np_: int = 1,
           benchmark: str = "cifar10", repeats: int = 3) -> None:
    """``repeats`` runs of one configuration, each at its own level (1% apart between runs) with 3% noise a step."""
    for repeat in range(repeats):
        seed = zlib.crc32(repr((system, args, np_, benchmark, repeat)).encode())  # the same in every process
        rng = np.random.default_rng(seed)
        level = step_s * rng.lognormal(0.0, 0.01)
        spec = RunSpec(benchmark=benchmark, args=args, np=np_, system=system, launcher="mpirun", controller="mpi",
                       repeat=repeat)
        write_run(root, spec, [list(rng.lognormal(np.log(level), 0.03, size=30)) for _ in range(np_)])


def test_offers_pair_across_run_length_and_are_judged_against_the_chosen_baseline(tmp_path: Path) -> None:
    model = ("--model", "resnet20", "--batch-size", "32")
    _plant(tmp_path / "dgx", "DGX", 0.050, (*model, "--steps", "40"))
    _plant(tmp_path / "l40s", "L40S", 0.090, (*model, "--steps", "20"))  # the vendor ran half as long
    _plant(tmp_path / "dgx", "DGX", 0.050, (*model, "--steps", "40"), np_=2)  # measured on one system only
    _plant(tmp_path / "same-a", "A", 0.070, model)
    collection = collect([tmp_path / "dgx", tmp_path / "l40s"])
    report = build(collection, judging=Judging(baseline="L40S"))
    titles = [s.title for s in report.sections]
    assert titles[:2] == ["Executive summary", "Decision: DGX against L40S"]
    decision = report.sections[1]
    said = decision_lines(report.tables["decision"])
    assert len(said) == 1 and re.match(r"DGX is 1\.[78]\d× \[1\.[6-9]\d–1\.[7-9]\d\] ", said[0]), said
    assert re.search(r"L40S on pytorch cifar10 resnet20 --model resnet20 --batch-size 32 at 1 GPU: faster \(could "
                     r"have caught ×1\.0\d\)$", said[0]), said
    row = dict(zip(decision.header, decision.rows[0]))  # one system against the baseline: no system column
    assert "system" not in row and [row[k] for k in ("workload", "GPUs", "verdict", "runs to decide")] == [
        "resnet20 b32 fp32", "1 GPU", "faster", "-"]
    assert re.fullmatch(r"×1\.0\d", row["could have caught"]), row
    assert re.fullmatch(r"3 \(±\d\.\d%\) / 3 \(±\d\.\d%\)", row["runs (system / baseline)"]), row
    assert "L40S (chosen with --baseline)" in decision.text
    alone = next(s for s in report.sections if s.title == "Measured on one system only")
    assert alone.rows == [["DGX", "pytorch cifar10 resnet20 --model resnet20 --batch-size 32", "2",
                           "L40S: resnet20 --model resnet20 --batch-size 32 at 1 GPU(s)", "np 2 vs 1"]]
    assert report.sections[0].lines[0] == ("Decision, DGX against L40S: 1 faster over 1 comparison(s) (see Decision).")
    assert sum(said[0] in section.lines for section in report.sections) == 0  # the sentences: terminal and decision.csv
    with pytest.raises(UsageError, match="--baseline 'H200': no result has that system; systems: DGX, L40S"):
        build(collection, judging=Judging(baseline="H200"))
    default = build(collection)
    assert "the first system by name; --baseline chooses" in next(
        s.text for s in default.sections if s.title.startswith("Decision: "))


def test_equal_offers_whose_runs_cannot_tell_are_undecided_never_the_same(tmp_path: Path) -> None:
    """Three runs a side 1% apart with 3% noise a step: the interval is about ±2.6%, wider than the 2% margin, so the
    offers are undecided, with what the runs could have caught and the runs a side that would decide it."""
    model = ("--model", "resnet20", "--batch-size", "32")
    _plant(tmp_path / "a", "A", 0.070, model)
    _plant(tmp_path / "b", "B", 0.070, (*model, "--steps", "30"))
    report = build(collect([tmp_path / "a", tmp_path / "b"]), judging=Judging(baseline="A"))
    said = decision_lines(report.tables["decision"])
    assert re.search(r"at 1 GPU: undecided: could not tell: a difference under ×1\.0\d either way would likely not "
                     r"have shown \(runs spread ±\d\.\d% on B, ±\d\.\d% on A\); about \d+ runs a side would likely "
                     r"decide it$", said[0]), said


COSTS = """
[systems.DGX]
purchase_usd = 400000
years = 5
utilisation = 0.5
gpus_per_node = 8
power_usd_per_kwh = 0.12
pue = 1.3
node_power_kw = 10.2

[systems.L40S]
hourly_usd = 16.0
gpus_per_node = 8
"""


def test_a_costs_file_gives_dollars_per_million_samples_with_units_and_interval(tmp_path: Path) -> None:
    from hvdbench.analysis.verdicts.costs import HOURS_PER_YEAR, load_costs

    model = ("--model", "resnet20", "--batch-size", "32")
    _plant(tmp_path / "dgx", "DGX", 0.050, model)
    _plant(tmp_path / "l40s", "L40S", 0.090, model)
    (tmp_path / "costs.toml").write_text(COSTS)
    costs = load_costs(tmp_path / "costs.toml")
    report = build(collect([tmp_path / "dgx", tmp_path / "l40s"]), judging=Judging(baseline="L40S", costs=costs))
    compared = report.tables["compare"].set_index("system")
    dgx_hour = 400000 / (5 * HOURS_PER_YEAR * 0.5) / 8 + 10.2 / 8 * 1.3 * 0.12  # one GPU-hour, energy of its share
    expected = dgx_hour / (compared.loc["DGX", "throughput"] * 3600) * 1e6
    assert compared.loc["DGX", "usd_per_million"] == pytest.approx(expected)
    assert compared.loc["DGX", "usd_per_million_low"] < expected < compared.loc["DGX", "usd_per_million_high"]
    assert compared.loc["L40S", "usd_per_million"] == pytest.approx(2.0 / (compared.loc["L40S", "throughput"] * 3600)
                                                                    * 1e6)
    lines = next(s for s in report.sections if s.title.startswith("Decision: ")).lines
    costed = [line for line in cost_figures(compared.reset_index())
              if line.startswith("Cost per million samples, pytorch cifar10 resnet20 ")]
    assert len(costed) == 1 and " at 1 GPU: DGX US$ " in costed[0] and "; L40S US$ " in costed[0]
    hourly = next(line for line in lines if line.startswith("US$ per GPU-hour from the costs file: "))
    assert f"DGX {dgx_hour:.2f} (energy: node power from the costs file)" in hourly
    assert "L40S 2.00 (energy: in the hourly price)" in hourly
    verdict_line = cost_verdict_lines(report.tables["decision"])[0]
    ratio = expected / compared.loc["L40S", "usd_per_million"]
    assert verdict_line.startswith(f"DGX costs {ratio:.2f}× [") and " L40S per million samples on resnet20 b32 fp32" \
        f" at 1 GPU: {'cheaper' if ratio < 0.98 else 'more expensive'}" in verdict_line
    assert compared.loc["DGX", "per_dollar"] == pytest.approx(compared.loc["DGX", "throughput"] * 3600 / dgx_hour)


def test_a_cloud_quote_per_gpu_hour_is_a_rented_system(tmp_path: Path) -> None:
    from hvdbench.analysis.verdicts.costs import KINDS_SAID, load_costs

    path = tmp_path / "costs.toml"
    path.write_text(COSTS.replace("hourly_usd = 16.0\ngpus_per_node = 8", "usd_per_gpu_hour = 2.49"))
    cost = load_costs(path)["L40S"]
    assert cost.per_gpu_hour(700.0) == (2.49, "in the hourly price") and cost.hourly_usd is None
    assert "usd_per_gpu_hour" in KINDS_SAID and "hourly_usd per node-hour" in KINDS_SAID


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("years = 5\n", ""), "systems.DGX.years: missing"),
    (lambda t: t.replace("pue = 1.3", "pue = nan"), "systems.DGX.pue: expected a positive, finite number, got nan"),
    (lambda t: t.replace("pue = 1.3", "pue = inf"), "systems.DGX.pue: expected a positive, finite number, got inf"),
    (lambda t: t.replace("utilisation = 0.5", "utilisation = 70"), "systems.DGX.utilisation: a share of the time"),
    (lambda t: t.replace("hourly_usd = 16.0", 'hourly_usd = "16"'), "systems.L40S.hourly_usd: expected a positive"),
    (lambda t: t.replace("pue = 1.3", "pue = 1.3\nrebate = 3"), "systems.DGX.rebate: not a field of this system; "
     "give the fields of one kind: an owned system: purchase_usd"),
    (lambda t: t.replace("pue = 1.3", "pue = 1.3\nusd_per_gpu_hour = 2"), "systems.DGX.gpus_per_node: not a field of "
     "this system; give the fields of one kind: "),  # an owned system given a cloud's price: the kinds named
    (lambda t: t.replace("hourly_usd = 16.0", "hourly_usd = 16.0\nusd_per_gpu_hour = 2"), "systems.L40S.gpus_per_node"
     ": not a field of this system; give the fields of one kind: "),
    (lambda t: t.replace("hourly_usd = 16.0\ngpus_per_node = 8", "usd_per_gpu_hour = 0"),
     "systems.L40S.usd_per_gpu_hour: expected a positive, finite number, got 0"),
    (lambda t: t + "\n[oops]\nx = 1\n", "expected [systems.NAME] tables only"),
    (lambda t: t.replace("[systems.DGX]", "[systems.DGX"), "not valid TOML"),
])
def test_a_bad_costs_file_is_one_line_naming_the_field(tmp_path: Path, edit: Any, message: str) -> None:
    from hvdbench.analysis.verdicts.costs import load_costs

    path = tmp_path / "costs.toml"
    path.write_text(edit(COSTS))
    with pytest.raises(UsageError) as caught:
        load_costs(path)
    assert message in str(caught.value) and "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_the_summary_marks_an_efficiency_above_linear_as_the_tables_do(tmp_path: Path) -> None:
    model = ("--model", "resnet20", "--batch-size", "32")
    rng = np.random.default_rng(7)
    write_run(tmp_path, RunSpec(benchmark="cifar10", args=model, np=1, system="S", launcher="mpirun",
                                controller="mpi"), [list(rng.lognormal(np.log(0.100), 0.30, size=12))])
    ranks = [list(rng.lognormal(np.log(0.095), 0.30, size=12)) for _ in range(2)]
    write_run(tmp_path, RunSpec(benchmark="cifar10", args=model, np=2, system="S", launcher="mpirun",
                                controller="mpi"), ranks)
    report = build(collect([tmp_path]))
    summary = report.sections[0].lines
    line = next(line for line in summary if "efficiency" in line)
    efficiency = line.split("efficiency ", 1)[1]
    assert efficiency.split("%", 1)[1][:1] in ("†", "‡"), line  # never a bare figure above 100%
    mark = efficiency.split("%", 1)[1][:1]
    assert any(other.strip().startswith(mark) and "linear" in other for other in summary), summary


def test_the_system_under_test_is_a_section_and_a_json_file(tmp_path: Path) -> None:
    import json

    from hvdbench.analysis.report.build import build_report

    model = ("--model", "resnet20", "--batch-size", "32")
    _plant(tmp_path / "dgx", "DGX", 0.050, model)
    _plant(tmp_path / "l40s", "L40S", 0.090, model)
    build_report([tmp_path / "dgx", tmp_path / "l40s"], tmp_path / "out")
    described = json.loads((tmp_path / "out" / "system.json").read_text())
    assert sorted(described) == ["DGX", "L40S"]
    assert described["DGX"]["runs"].startswith("3 complete, made ") and described["L40S"]["driver"] == "-"
    facts = {"devices", "driver", "CUDA", "NCCL", "MPI", "network NCCL used", "RDMA ports", "image"}
    assert facts <= set(described["DGX"])
    text = (tmp_path / "out" / "report.md").read_text()
    assert "## System under test" in text and "| fact | DGX | L40S |" in text


def test_workload_weights_combine_into_one_figure_with_its_interval(tmp_path: Path) -> None:
    from hvdbench.analysis.verdicts.decision import load_weights

    model = ("--model", "resnet20", "--batch-size", "32")
    _plant(tmp_path / "a", "A", 0.100, model)
    _plant(tmp_path / "b", "B", 0.050, model)  # B twice as fast on cifar10
    _plant(tmp_path / "a", "A", 0.100, model, benchmark="imagenet")
    _plant(tmp_path / "b", "B", 0.125, model, benchmark="imagenet")  # 0.8 times as fast on imagenet
    (tmp_path / "weights.toml").write_text('[weights]\n"cifar10 resnet20" = 3\n"imagenet resnet20" = 1\n')
    collection = collect([tmp_path / "a", tmp_path / "b"])
    report = build(collection, judging=Judging(baseline="A", weights=load_weights(tmp_path / "weights.toml")))
    lines = next(s for s in report.sections if s.title == "Decision: B against A").lines
    weighted = lines[0]
    compared = report.tables["compare"]
    compared = compared[compared["system"] == "B"].set_index("benchmark")
    expected = np.exp(0.75 * np.log(compared.loc["cifar10", "relative"])
                      + 0.25 * np.log(compared.loc["imagenet", "relative"]))
    assert 1.5 < expected < 1.7  # about 2^0.75 x 0.8^0.25
    assert weighted.startswith("B against A, weighted (cifar10 resnet20 75% at 1 GPU, imagenet resnet20 25% at 1 "
                               f"GPU): {expected:.2f}× [")
    assert re.search(r": faster \(could have caught ×1\.\d\d\)$", weighted), weighted
    (tmp_path / "more.toml").write_text('[weights]\n"cifar10 resnet20" = 1\n"imagenet resnet50" = 1\n')
    more = build(collection, judging=Judging(baseline="A", weights=load_weights(tmp_path / "more.toml")))
    said = next(s for s in more.sections if s.title == "Decision: B against A").lines[0]
    assert said == "B against A, weighted: not judged (imagenet resnet50 not measured on both with an interval)"


@pytest.mark.parametrize("text, message", [
    ('[weights]\n"cifar10 resnet20" = 0\n', "weights.cifar10 resnet20: expected a positive, finite share, got 0"),
    ('[weights]\n"cifar10 resnet20" = nan\n', "expected a positive, finite share, got nan"),
    ('[weights]\nresnet20 = 1\n', "weights.'resnet20': expected a benchmark and a model"),
    ('[other]\nx = 1\n', "expected one [weights] table"),
    ('[weights\n', "not valid TOML"),
])
def test_a_bad_weights_file_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    from hvdbench.analysis.verdicts.decision import load_weights

    path = tmp_path / "w.toml"
    path.write_text(text)
    with pytest.raises(UsageError) as caught:
        load_weights(path)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def _browser(tmp_path: Path) -> list[str]:
    """Headless Chromium's command line, as the tests run it (skips where it is not installed)."""
    import shutil

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (scripts/setup.sh installs it where it can)")
    return [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={tmp_path / 'chromium'}"]


def _cut_columns(flags: list[str], page: Path, width: int = 1366) -> str:
    """The headers of the columns a reader of ``page`` in a ``width``-pixel window cannot see without scrolling
    sideways, as the page's own check records them ("": none)."""
    import subprocess

    dom = subprocess.run([*flags, f"--window-size={width},900", "--dump-dom", page.as_uri()], capture_output=True,
                         text=True, timeout=120).stdout
    found = re.search(r'<body[^>]*data-cut-columns="([^"]*)"', dom)
    assert found is not None and f'data-window-width="{width}"' in dom, dom[:500]
    return found.group(1)


@pytest.mark.slow
def test_the_decision_page_prints_on_one_page(tmp_path: Path) -> None:
    """decision.html beside the report, as a procurement lead hands it on: two offers, three workloads at two sizes
    each (six comparisons), three runs of each (one of a size undecided by its spread), with costs. Its forest plot
    draws exactly compare.csv's rows (and the weighted figure on top); the cost verdict stands on it; the browser the
    tests use shows every column's header at 1366x900 and prints it on one page."""
    import shutil
    import subprocess

    import pandas as pd

    from hvdbench.analysis.report.build import Judging, build_report
    from hvdbench.analysis.report.decision_view import FOREST_FILE, forest_rows
    from hvdbench.analysis.verdicts.costs import load_costs

    workloads = (("cifar10", ("--model", "resnet20")), ("mlp", ("--mlp-widths", "512,512")),
                 ("imagenet", ("--model", "resnet50", "--precision", "amp")))
    for benchmark, model in workloads:
        for np_ in (1, 2):
            _plant(tmp_path / "dgx", "DGX", 0.050, (*model, "--steps", "40"), np_=np_, benchmark=benchmark)
            _plant(tmp_path / "l40s", "L40S", 0.080, (*model, "--steps", "20"), np_=np_, benchmark=benchmark,
                   repeats=3 if (benchmark, np_) != ("imagenet", 2) else 2)  # one comparison not judged: a note
    (tmp_path / "costs.toml").write_text(COSTS)
    # write_run records every model as resnet20
    (tmp_path / "weights.toml").write_text('[weights]\n"cifar10 resnet20" = 3\n"mlp resnet20" = 1\n')
    from hvdbench.analysis.verdicts.decision import load_weights
    judging = Judging(baseline="L40S", costs=load_costs(tmp_path / "costs.toml"),
                      weights=load_weights(tmp_path / "weights.toml"))
    _, paths = build_report([tmp_path / "l40s", tmp_path / "dgx"], tmp_path / "report", judging=judging)
    folder = paths["html"].parent
    page = folder / "decision.html"
    text = (folder / "decision.md").read_text()
    assert "## Decision: DGX against L40S" in text and "## System under test" in text
    assert "Systems side by side" not in text  # the report's table stays in the report
    html_text = page.read_text()
    assert "weighted cost per million samples: " in html_text and "cheaper" in html_text
    assert "CPU stand-ins" not in html_text
    compared = pd.read_csv(folder / "compare.csv")
    expected = compared[compared["system"] == "DGX"][["np", "relative", "relative_low", "relative_high"]]
    drawn = forest_rows((folder / FOREST_FILE).read_text())
    rows = [r for r in drawn if r["kind"] == "row"]
    assert [r["kind"] for r in drawn[:2]] == ["weighted", "weighted"]  # speed and cost, on top
    assert len(rows) == len(expected) == 6
    for (_, want), got in zip(expected.iterrows(), rows):
        assert int(got["np"]) == want["np"]
        for key, column in (("ratio", "relative"), ("low", "relative_low"), ("high", "relative_high")):
            assert float(got[key]) == pytest.approx(want[column], rel=1e-9)
    assert "not judged [1]" in html_text and "[1] not judged: 3 runs of DGX and 2 of L40S" in html_text
    flags = _browser(tmp_path)
    assert _cut_columns(flags, page) == ""  # every column's header in a 1366-pixel window, none scrolled away
    shot = tmp_path / "decision.png"
    subprocess.run([*flags, "--window-size=1366,900", f"--screenshot={shot}", page.as_uri()], capture_output=True,
                   timeout=120)
    assert shot.is_file() and shot.stat().st_size > 20_000  # a page drawn, not a blank one
    pdf = tmp_path / "decision.pdf"
    proc = subprocess.run([*flags, "--no-pdf-header-footer", f"--print-to-pdf={pdf}", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and pdf.is_file(), proc.stderr[-2000:]
    assert len(re.findall(rb"/Type\s*/Page[^s]", pdf.read_bytes())) == 1
    keep = os.environ.get("HVDBENCH_KEEP_DECISION_PAGE")  # where a person wants to look at it
    if keep:
        for made in (shot, pdf, page):
            shutil.copy(made, Path(keep) / made.name)


@pytest.mark.slow
def test_the_reports_wide_tables_show_every_column_in_a_laptops_window(tmp_path: Path) -> None:
    """report.html's widest tables, the data path's seventeen columns (verdict, cores, MB/s, utilisation) and the
    fixture runs' headline tables, every header within a 1366-pixel window: headers and cells wrap, nothing is left
    to a sideways scroll."""
    import tarfile

    import pandas as pd

    from hvdbench.analysis.document import Report, Section
    from hvdbench.analysis.report.build import build_report
    from hvdbench.analysis.report.html import render_html
    from hvdbench.analysis.tables.datapath import DATAPATH_TEXT, datapath_rows, datapath_table

    base = {"system": "dgx-a100", "framework": "pytorch", "benchmark": "imagenet", "model": "resnet50", "inputs": "",
            "nodes": 1, "np": 8, "repeats": 3, "unit": "images"}
    table = pd.DataFrame([{**base, "args": "--model resnet50", "data": "device", "runs": "a1,a2,a3",
                           "throughput": 7600.0},
                          {**base, "args": "--model resnet50 --data files --data-dir /d --loader-workers 4",
                           "data": "files", "runs": "b1,b2,b3", "throughput": 3200.0}])
    runs = pd.DataFrame([{"run_id": f"{k}{i}", "input_wait_s": 55.0 if k == "b" else 0.0, "step_time_s": 100.0,
                          "bytes_read": 1e9, "dataset_bytes": 115e9, "dataset_samples": 1e6, "data_only": False,
                          "loader_workers": 4 if k == "b" else None, "data_layout": "folder" if k == "b" else None,
                          "data_loader": "torch" if k == "b" else None} for k in "ab" for i in (1, 2, 3)])
    rng = np.random.default_rng(0)
    draws = {f"{k}{i}": thr / 3 * (1 + 0.01 * rng.standard_normal(500)) for k, thr in (("a", 7600.0), ("b", 3200.0))
             for i in (1, 2, 3)}
    section = Section("Data path: real data against synthetic", DATAPATH_TEXT,
                      *datapath_rows(datapath_table(table, runs, draws)))
    page = tmp_path / "datapath.html"
    page.write_text(render_html(Report("", [section], {}, {}, [])))
    flags = _browser(tmp_path)
    assert len(section.header) == 18 and _cut_columns(flags, page) == ""
    with tarfile.open(Path(__file__).parent / "fixtures" / "runs-v1.tar.xz") as archive:
        archive.extractall(tmp_path / "runs", filter="data")
    _, paths = build_report([tmp_path / "runs"], tmp_path / "report")
    assert _cut_columns(flags, paths["html"]) == ""
