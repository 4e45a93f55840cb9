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
from hvdbench.core.time_to_train import score
from hvdbench.readers.mlperf import find_results

FIXTURE = Path(__file__).parent / "fixtures" / "mlperf-training-v4.0"
RESULTS = FIXTURE / "NVIDIA" / "results" / "eos_ngc24.04_mxnet" / "resnet"
OLYMPIC_S = 796.2  # the olympic mean of result_0..4's times
PUBLISHED_S = 799.6  # MLCommons' score: that mean times scaling.json's 1.00422 (13.33 min)


def summarizer_score(folder: Path, ruleset: str) -> float | None:
    """MLCommons' own score of a benchmark folder, in seconds: mlperf-logging's result_summarizer (which runs the
    compliance checker on each file and drops those that fail as runs that did not converge)."""
    import contextlib
    import io
    import logging

    from mlperf_logging.result_summarizer import result_summarizer

    logging.disable(logging.CRITICAL)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            minutes, _, _ = result_summarizer._compute_strong_score_standalone(
                folder.name, folder.parent.name, False, str(folder), "training", ruleset)
    finally:
        logging.disable(logging.NOTSET)
    return None if minutes is None else minutes * 60


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


def test_a_published_result_folder_scores_as_mlcommons_scores_it() -> None:
    [result] = find_results(FIXTURE, "4.0")
    assert (result.system, result.benchmark, len(result.runs)) == ("eos_ngc24.04_mxnet", "resnet", 5)
    assert all(run.converged and run.global_batch == 3200 for run in result.runs)
    scored = result.score()
    assert scored.raw == pytest.approx(OLYMPIC_S, abs=0.05) and len(scored.used) == 3
    assert scored.factor == pytest.approx(1.0042232277526395) and scored.seconds == pytest.approx(PUBLISHED_S, abs=0.05)
    assert scored.seconds == pytest.approx(summarizer_score(RESULTS, "4.0.0"), rel=1e-12)  # the owner's own figure
    seconds = [run.seconds for run in result.runs]
    assert {seconds[i] for i in scored.dropped} == {min(seconds), max(seconds)}
    assert result.description["accelerator_model_name"] == "NVIDIA H100-SXM5-80GB"
    assert result.described is not None and (result.described.nodes, result.described.per_node) == (1, 8)


def test_a_run_that_did_not_converge_is_the_slowest_and_two_make_no_score() -> None:
    one = score([100.0, 90.0, 110.0, 95.0, 80.0], [True, True, True, True, False])
    assert set(one.dropped) == {1, 4} and one.failed == (4,)  # the fastest (80 s) failed: dropped as the slowest
    assert one.seconds == pytest.approx((95 + 100 + 110) / 3)  # so the 90 s run is the fastest dropped
    two = score([100.0, 90.0, 110.0, 95.0, 80.0], [True, False, True, True, False])
    assert two.seconds is None and two.void and "2 of 5 runs did not converge" in two.why
    few = score([100.0, 90.0], [True, True])
    assert few.seconds is None and not few.void and "3 at least" in few.why
    whole = score([100.0] * 4, [True] * 4, "resnet", required=5)
    assert whole.void and "MLPerf's resnet result is 5 runs" in whole.why
    from mlperf_logging.result_summarizer.result_summarizer import _compute_olympic_average

    times, ok = [float(i) for i in range(40)], [i != 5 for i in range(40)]
    unet = score(times, ok, "unet3d", required=40)  # four dropped a side, the run that failed one of the slowest
    peer = _compute_olympic_average([t for t, k in zip(times, ok) if k], 1, 4)
    assert len(unet.used) == 32 and unet.seconds == pytest.approx(655 / 32) == pytest.approx(peer)


def test_import_prints_the_score_and_the_report_tables_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "r"
    assert main(["import", "mlperf", str(FIXTURE), "-o", str(root), "--round", "4.0"]) == 0
    said = capsys.readouterr().out
    assert ("NVIDIA Eos resnet (eos_ngc24.04_mxnet) on 1 node(s): 799.6 s (13.33 min): MLCommons' score, the olympic "
            "mean of 3 run(s) (796.2 s) × 1.0042 (scaling.json); 5 of 5 runs converged") in said
    assert said.count("s to train (converged); 5") == 5 and "judged by MLPerf Training v4.0's quality targets" in said
    assert main(["report", str(root), "-o", str(tmp_path / "out")]) == 0
    [row] = pd.read_csv(tmp_path / "out" / "quality.csv").to_dict("records")
    assert (row["system"], row["np"], row["runs"], row["converged"], row["global_batch"]) == ("NVIDIA Eos", 8, 5, 5,
                                                                                                 3200)
    assert row["score_s"] == pytest.approx(PUBLISHED_S, abs=0.05) and row["target"] == 0.759
    assert row["olympic_s"] == pytest.approx(OLYMPIC_S, abs=0.05) and row["valid"]
    assert row["low"] < row["seconds"] < row["high"] and row["epochs"] == pytest.approx(35)  # the runs' geometric mean
    page = (tmp_path / "out" / "report.md").read_text()
    assert ("| NVIDIA Eos | mlperf resnet | 8 | eval_accuracy 0.759 | 5 (5) | 799.6 s (13.33 min); olympic mean "
            "796.2 s × 1.0042 (scaling.json) |") in page
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
    """A system 10% slower on every run is found slower; one whose folder holds two runs is not judged (MLPerf's
    resnet result is five); a copy of the baseline's results under another name is no system of its own; a label's
    markup stays text."""
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
    assert gamma["finding"] == "not judged" and pd.isna(gamma["score_s"]) and not gamma["valid"]
    assert "MLPerf's resnet result is 5 runs" in gamma["olympic_why"] and "no valid score for Few gamma" in \
        gamma["verdict"]
    assert "Copy delta" not in table.index
    page = (tmp_path / "out" / "report.md").read_text()
    said = "time to train, mlperf resnet at 8 GPU(s) to eval_accuracy 0.759: &lt;b&gt;Bold&lt;/b&gt; beta 1.10× ["
    assert said in page and "the time of Acme alpha: slower" in page and "Decision: " in page
    html = (tmp_path / "out" / "report.html").read_text()
    assert "<b>Bold</b>" not in html and "&lt;b&gt;Bold&lt;/b&gt;" in html
