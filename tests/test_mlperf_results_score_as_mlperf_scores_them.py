"""MLPerf Training results taken into a results root (``hvdbench import mlperf``): a published result folder scores
as MLPerf scored it (the olympic mean of its runs' run_stop less run_start, to the tenth of a second), the olympic rule
holds where runs did not converge, a result taken in twice or damaged is one line with nothing written, and the
report's time-to-target table sets one system's time against another's with a finding."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import pytest

from hvdbench.cli import main
from hvdbench.core.mlperf import find_results, mllog_lines, olympic, read_result

FIXTURE = Path(__file__).parent / "fixtures" / "mlperf-training-v4.0"
RESULTS = FIXTURE / "NVIDIA" / "results" / "eos_ngc24.04_mxnet" / "resnet"
PUBLISHED_S = 796.2  # MLCommons' table: 13.27 minutes, the olympic mean of result_0..4


def _line(key: str, time_ms: int, value: object = None, **metadata: object) -> str:
    event = {"namespace": "", "time_ms": time_ms, "event_type": "POINT_IN_TIME", "key": key, "value": value,
             "metadata": metadata}
    return ":::MLLOG " + json.dumps(event)


def _result(folder: Path, index: int, seconds: float, status: str = "success", extra: str = "") -> Path:
    """A small result file of its own: start, batch, two evaluations, stop ``seconds`` later."""
    start = 1_700_000_000_000 + index * 3_600_000
    lines = [_line("submission_benchmark", start, "resnet"), _line("global_batch_size", start, 3200),
             _line("run_start", start), _line("eval_accuracy", start + int(seconds * 500), 0.70, epoch_num=17),
             _line("eval_accuracy", start + int(seconds * 1000) - 1, 0.76, epoch_num=35),
             _line("run_stop", start + int(seconds * 1000), status=status), extra]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"result_{index}.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def _system(root: Path, name: str, seconds: list[float], label: str = "Acme") -> Path:
    """A submitter's folder: its system described, one resnet result file a time."""
    (root / "systems").mkdir(parents=True, exist_ok=True)
    (root / "systems" / f"{name}.json").write_text(json.dumps(
        {"submitter": label, "system_name": name, "number_of_nodes": "1", "accelerators_per_node": "8",
         "accelerator_model_name": "H100"}))
    for i, s in enumerate(seconds):
        _result(root / "results" / name / "resnet", i, s)
    return root


def test_a_published_result_folder_scores_as_mlperf_published_it() -> None:
    [result] = find_results(FIXTURE)
    assert (result.system, result.benchmark, len(result.runs)) == ("eos_ngc24.04_mxnet", "resnet", 5)
    assert all(run.converged and run.global_batch == 3200 for run in result.runs)
    score = result.score()
    assert score.score_s == pytest.approx(PUBLISHED_S, abs=0.05) and len(score.used) == 3
    seconds = [run.seconds for run in result.runs]
    assert {seconds[i] for i in score.dropped} == {min(seconds), max(seconds)}
    assert result.description["accelerator_model_name"] == "NVIDIA H100-SXM5-80GB"


def test_a_run_that_did_not_converge_is_the_slowest_and_two_make_no_score() -> None:
    one = olympic([100.0, 90.0, 110.0, 95.0, 80.0], [True, True, True, True, False])
    assert set(one.dropped) == {1, 4} and one.failed == (4,)  # the fastest (80 s) failed: dropped as the slowest
    assert one.score_s == pytest.approx((95 + 100 + 110) / 3)  # so the 90 s run is the fastest dropped
    two = olympic([100.0, 90.0, 110.0, 95.0, 80.0], [True, False, True, True, False])
    assert two.score_s is None and "2 runs did not converge" in two.why
    few = olympic([100.0, 90.0], [True, True])
    assert few.score_s is None and "three at least" in few.why


def test_import_prints_the_score_and_the_report_tables_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "r"
    assert main(["import", "mlperf", str(FIXTURE), "-o", str(root)]) == 0
    said = capsys.readouterr().out
    assert "eos_ngc24.04_mxnet resnet: 796.2 s (13.27 min), olympic mean of 3 run(s)" in said
    assert said.count("s to train (converged)") == 5
    assert main(["report", str(root), "-o", str(tmp_path / "out")]) == 0
    [row] = pd.read_csv(tmp_path / "out" / "quality.csv").to_dict("records")
    assert (row["system"], row["np"], row["runs"], row["converged"], row["global_batch"]) == ("NVIDIA Eos", 8, 5, 5,
                                                                                                 3200)
    assert row["olympic_s"] == pytest.approx(PUBLISHED_S, abs=0.05) and row["target"] == 0.759
    assert row["low"] < row["seconds"] < row["high"] and row["epochs"] == 35
    page = (tmp_path / "out" / "report.md").read_text()
    assert "| NVIDIA Eos | mlperf resnet | 8 | eval_accuracy 0.759 | 5 (5) | 796.2 s (13.27 min) |" in page
    assert "made 2024-04-25" in page and os.uname().nodename not in page  # the submission's day, not this host
    assert not (tmp_path / "out" / "details.csv").exists() and "## Run details" not in page  # nothing measured here


def _refused(args: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "mlperf", *args]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1, err


def test_a_result_taken_twice_or_damaged_is_one_line_with_nothing_written(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "r"
    assert main(["import", "mlperf", str(RESULTS.parent.parent), "-o", str(root)]) == 0
    before = sorted(p.name for p in root.iterdir())
    copy = tmp_path / "copy" / "results" / "eos" / "resnet"
    shutil.copytree(RESULTS, copy)
    with (copy / "result_2.txt").open("a") as f:
        f.write("a line of the launcher's own, not an event\n")
    _refused([str(tmp_path / "copy"), "-o", str(root)], "result_0.txt: already taken into", capsys)
    bad = tmp_path / "bad" / "results" / "x" / "resnet"
    _result(bad, 0, 100.0)
    _refused([str(bad), str(tmp_path / "bad"), "-o", str(root)], "given twice", capsys)
    assert sorted(p.name for p in root.iterdir()) == before  # the first of a refused batch is not written either
    _result(bad, 1, 100.0).write_text(_line("run_start", 5) + "\n")
    _refused([str(tmp_path / "bad"), "-o", str(root)], "result_1.txt: no run_start and run_stop MLLOG events", capsys)
    _result(bad, 1, 100.0, status="maybe")
    _refused([str(tmp_path / "bad"), "-o", str(root)], "run_stop's status 'maybe'", capsys)
    _result(bad, 1, 100.0, extra=":::MLLOG {not json")
    _refused([str(tmp_path / "bad"), "-o", str(root)], "an MLLOG line that is no JSON", capsys)
    (bad / "result_1.txt").unlink()
    os.mkfifo(bad / "result_1.txt")
    _refused([str(tmp_path / "bad"), "-o", str(root)], "not a regular file", capsys)
    _refused([str(tmp_path / "copy" / "nothing"), "-o", str(root)], "no MLPerf result files", capsys)
    assert sorted(p.name for p in root.iterdir()) == before


def test_one_system_against_another_is_a_finding_on_whole_runs(tmp_path: Path) -> None:
    """A system 10% slower on every run is found slower; one with two runs is not judged; a copy of the baseline's
    results under another name is no system of its own; a label's markup stays text."""
    base = _system(tmp_path / "a", "alpha", [600.0, 606.0, 594.0, 603.0, 597.0])
    slow = _system(tmp_path / "b", "beta", [660.0, 666.6, 653.4, 663.3, 656.7], label="<b>Bold</b>")
    few = _system(tmp_path / "c", "gamma", [700.0, 701.0], label="Few")
    copy = _system(tmp_path / "d", "delta", [600.0, 606.0, 594.0, 603.0, 597.0], label="Copy")
    roots = [str(tmp_path / f"r{i}") for i in range(4)]
    for folder, root in zip((base, slow, few, copy), roots):
        assert main(["import", "mlperf", str(folder), "-o", root]) == 0
    assert main(["compare", *roots, "-o", str(tmp_path / "out")]) == 0  # the first root's system: the baseline
    table = pd.read_csv(tmp_path / "out" / "quality.csv").set_index("system")
    assert pd.isna(table.loc["Acme alpha", "ratio"])
    beta = table.loc["<b>Bold</b> beta"]
    assert beta["ratio"] == pytest.approx(1.10, abs=0.005) and beta["finding"] == "slower"
    assert beta["ratio_low"] > 1.05 and beta["against"] == "Acme alpha"
    gamma = table.loc["Few gamma"]
    assert gamma["finding"] == "not judged" and pd.isna(gamma["olympic_s"]) and "three at least" in gamma["olympic_why"]
    assert "Copy delta" not in table.index
    page = (tmp_path / "out" / "report.md").read_text()
    said = "time to train, mlperf resnet at 8 GPU(s) to eval_accuracy 0.759: &lt;b&gt;Bold&lt;/b&gt; beta 1.10× ["
    assert said in page and "the time of Acme alpha: slower" in page and "Decision: " in page
    html = (tmp_path / "out" / "report.html").read_text()
    assert "<b>Bold</b>" not in html and "&lt;b&gt;Bold&lt;/b&gt;" in html


def test_the_lines_a_run_to_target_writes_read_back_as_an_mlperf_result(tmp_path: Path) -> None:
    lines = mllog_lines("fashion_mnist-cnn", 64, 1000.0, 1093.25, True, [(0.5, 0.84, 1040.0), (1.0, 0.891, 1093.25)],
                        1235, 0.89)
    path = tmp_path / "result_0.txt"
    path.write_text("\n".join(lines) + "\n")
    run = read_result(path)
    assert (run.seconds, run.converged, run.global_batch, run.epochs) == (93.25, True, 64, 1.0)
    from mlperf_logging.compliance_checker import mlp_parser  # MLCommons' own parser reads them as its own

    parsed, errors = mlp_parser.parse_file(str(path), ruleset="4.0.0")
    assert errors == [] and [line.key for line in parsed] == ["submission_benchmark", "seed", "global_batch_size",
                                                              "eval_target", "run_start", "eval_accuracy",
                                                              "eval_accuracy", "run_stop"]
    assert parsed[-1].value["metadata"]["status"] == "success" and parsed[5].value["metadata"]["epoch_num"] == 0.5
    assert [accuracy for _, accuracy, _ in run.evals] == [0.84, 0.891] and run.benchmark == "fashion_mnist-cnn"
    aborted = mllog_lines("x", 64, 1000.0, 1200.0, False, [(8.0, 0.5, 1200.0)], 1, 0.89)
    path.write_text("\n".join(aborted) + "\n")
    assert not read_result(path).converged
