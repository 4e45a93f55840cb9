"""MLPerf's rules for runs to a target as hvdbench applies them, held to MLCommons' own tools (mlperf-logging, the test
extra): the runs each benchmark's result needs are benchmark_meta's; each quality target is its compliance checker's
own bound, round by round; every published folder of the shared fixtures scores as result_summarizer scores it; a
file whose status says success but whose evaluations never reached the target did not converge, as the checker
fails it; a file holding two runs, or whose run_stop comes before the evaluations that reached its target, did not
converge either (stricter than the 4.0 checker, which lets both pass, as the rules' "one run a file" and "the clock
stops at the target" ask); and hvdbench's own MLLOG file passes the checker's common rules, failing on its benchmark's
name alone, which is not MLPerf's."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import re
import shutil
import tarfile
from pathlib import Path
from typing import Any, Iterator

import pytest
from mlperf_logging import benchmark_meta
from mlperf_logging.compliance_checker import mlp_compliance, mlp_parser

from hvdbench.cli import main
from hvdbench.core.mllog import NOT_MLPERF, Evaluation, RunLog, result_lines
from hvdbench.core.time_to_train import RESULT_COUNTS, ROUNDS, TARGETS, targets_of
from hvdbench.readers.mlperf import find_results, read_result
from test_mlperf_results_score_as_mlperf_scores_them import RESULTS, summarizer_score

FIXTURES = Path(__file__).parent / "fixtures"
CHECKER = Path(mlp_compliance.__file__).parent


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared published-scaling fixtures (MLPerf Training v3.0 folders at 1 to 96 nodes), unpacked."""
    root = tmp_path_factory.mktemp("published")
    with tarfile.open(FIXTURES / "published-scaling.tar.xz") as archive:
        archive.extractall(root, filter="data")
    return root / "published-scaling" / "mlperf-training-v3.0"


def test_the_runs_each_benchmark_needs_are_mlperf_loggings() -> None:
    theirs = benchmark_meta.get_result_file_counts("training")
    assert {name: theirs.get(name) for name in RESULT_COUNTS} == RESULT_COUNTS


def _checks() -> Iterator[tuple[str, str, str]]:
    """(round, benchmark, the closed division's ATLEAST_ONE_CHECK on eval_accuracy) for every round the checker
    knows and hvdbench lists."""
    for folder in sorted(CHECKER.glob("training_*.*.*")):
        round_ = ".".join(folder.name.removeprefix("training_").split(".")[:2])
        if round_ not in ROUNDS or not re.fullmatch(r"training_\d+\.\d+\.\d+", folder.name):
            continue
        for path in sorted(folder.glob("closed_*.yaml")):
            found = re.search(r"ATLEAST_ONE_CHECK:\s*\"(.+)\"", path.read_text())
            benchmark = path.stem.removeprefix("closed_")
            if found and benchmark in TARGETS and "s['" not in found.group(1).replace("s['global", ""):
                yield round_, benchmark, found.group(1)


def _met(check: str, value: Any) -> bool:
    return bool(eval(check, {"s": {"global_batch_size": 4096}, "math": __import__("math")}, {"v": {"value": value}}))


@pytest.mark.parametrize("round_, benchmark, check", list(_checks()))
def test_each_quality_target_is_the_checkers_own_bound(round_: str, benchmark: str, check: str) -> None:
    """At each bound an evaluation passes the checker's own expression, a hair beyond it on the wrong side fails it;
    so does hvdbench's reading."""
    bounds = targets_of(benchmark, round_)
    assert bounds is not None
    keys = [b.key for b in bounds]
    at = {b.key: b.bound for b in bounds} if keys[0] else bounds[0].bound
    assert _met(check, at) and all(b.met(at) for b in bounds), (benchmark, round_, check)
    for bound in bounds:
        wrong = bound.bound * (0.999 if bound.higher else 1.001)
        value = {**at, bound.key: wrong} if isinstance(at, dict) else wrong
        assert not _met(check, value) and not all(b.met(value) for b in bounds), (benchmark, round_, check)


def test_every_published_folder_scores_as_result_summarizer_scores_it(published: Path) -> None:
    """Fourteen folders: ResNet-50 and BERT on DGX H100 at 1 to 96 nodes (runs that did not converge among them),
    Dell's ResNet-50 at 2 to 32 nodes (two result files a folder as kept: no score either way), and the v4.0 folder
    scaled by its scaling.json."""
    results = [(r, "3.0.0") for r in find_results(published, "3.0")]
    results += [(r, "4.0.0") for r in find_results(FIXTURES / "mlperf-training-v4.0", "4.0")]
    assert len(results) == 14
    scored = 0
    for result, ruleset in results:
        ours, theirs = result.score(), summarizer_score(Path(result.folder), ruleset)
        assert (ours.seconds is None) == (theirs is None), (result.folder, ours.why)
        if theirs is not None:
            assert ours.seconds == pytest.approx(theirs, rel=1e-12), result.folder
            scored += 1
    assert scored == 9


def _compliance(path: Path, ruleset: str = "4.0.0") -> tuple[bool, list[str], str]:
    """The checker's verdict on a file, its messages, and the exception it stopped at (its own, unknown names)."""
    checker = mlp_compliance.make_checker("training", ruleset, True, False)
    logging.disable(logging.CRITICAL)
    stopped = ""
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            valid, *_ = mlp_compliance.main(str(path), f"training_{ruleset}/common.yaml", checker)
    except FileNotFoundError as exc:
        valid, stopped = False, str(exc)
    finally:
        logging.disable(logging.NOTSET)
    return valid, [*checker.overwritable.values(), *checker.not_overwritable], stopped


def _edited(folder: Path, name: str, edit: Any) -> Path:
    """A copy of the published folder with one file edited (``edit`` of its lines)."""
    copy = folder / "results" / "eos" / "resnet"
    if not copy.exists():
        shutil.copytree(RESULTS, copy)
    path = copy / name
    lines = (RESULTS / name).read_text().splitlines()
    path.write_text("\n".join(edit(lines)) + "\n")
    return path


def _key(line: str) -> str:
    return json.loads(line.split(":::MLLOG ", 1)[1])["key"] if ":::MLLOG " in line else ""


def test_a_success_no_evaluation_bears_out_did_not_converge_as_the_checker_fails_it(tmp_path: Path) -> None:
    path = _edited(tmp_path, "result_1.txt", lambda lines: [
        re.sub(r'"value": 0\.7[5-9]\d*', '"value": 0.7', line) if _key(line) == "eval_accuracy" else line
        for line in lines])
    run = read_result(path, "4.0")
    assert not run.converged and "its status says success but no evaluation reached resnet's target (≥ 0.759)" in \
        run.why
    valid, said, _ = _compliance(path)
    assert not valid and any("Failed checks for eval_accuracy" in m for m in said)
    [result] = find_results(tmp_path, "4.0")
    assert result.score().failed == (1,)
    assert result.score().seconds == pytest.approx(summarizer_score(path.parent, "4.0.0"), rel=1e-12)


def test_two_runs_in_a_file_or_a_stop_before_the_target_did_not_converge(tmp_path: Path) -> None:
    """The 4.0 checker lets both pass (a repeated run_start with the same value is a warning to it): the rules ask one
    run a file and a clock that stops at the evaluation that reached the target, so hvdbench counts neither."""
    def early(lines: list[str]) -> list[str]:
        stop = next(i for i, line in enumerate(lines) if _key(line) == "run_stop")
        last = [i for i, line in enumerate(lines) if _key(line) == "eval_accuracy"][-1]
        moved = lines.pop(stop)
        return [*lines[:last], moved, *lines[last:]]

    twice = _edited(tmp_path, "result_2.txt", lambda lines: [*lines, *[ln for ln in lines if _key(ln) in (
        "run_start", "run_stop")]])
    stopped = _edited(tmp_path, "result_3.txt", early)
    assert "run_start 2 times and run_stop 2 times: a result file is one run" in read_result(twice, "4.0").why
    assert "1 evaluation(s) after run_stop" in read_result(stopped, "4.0").why
    assert _compliance(twice)[0] and _compliance(stopped)[0]  # what the owner's checker does with them
    [result] = find_results(tmp_path, "4.0")
    assert result.score().failed == (2, 3) and result.score().void


def _own_file(tmp_path: Path, name: str = "fashion_mnist-cnn") -> Path:
    log = RunLog(name, "2x CPU", 64, 1235, "accuracy", 0.89, 60000, 10000, 990.0, 1000.0, 1093.25, True)
    evals = [Evaluation(0.5, 0.84, 1000.0, 1038.0, 1040.0), Evaluation(1.0, 0.891, 1040.0, 1091.0, 1093.25)]
    path = tmp_path / "result_0.txt"
    path.write_text("\n".join(result_lines(log, evals)) + "\n")
    return path


def test_hvdbenchs_mllog_passes_the_common_rules_and_fails_only_on_its_name(tmp_path: Path) -> None:
    path = _own_file(tmp_path)
    run = read_result(path)
    assert (run.seconds, run.converged, run.global_batch, run.epochs) == (93.25, True, 64, 1.0)
    assert [accuracy for _, accuracy, _ in run.evals] == [0.84, 0.891] and run.benchmark == "fashion_mnist-cnn"
    parsed, errors = mlp_parser.parse_file(str(path), ruleset="4.0.0")
    assert errors == [] and parsed[0].value["metadata"]["note"] == NOT_MLPERF
    valid, said, stopped = _compliance(path)
    assert not valid and said[0].startswith("CHECK for 'submission_benchmark' failed")  # the name, not MLPerf's
    assert all(m.startswith("Could not find config file") and m.endswith("open_fashion_mnist-cnn.yaml")
               for m in said[1:]) and stopped.endswith("open_fashion_mnist-cnn.yaml'")  # then its rules, missing
    renamed = tmp_path / "named" / "result_0.txt"
    renamed.parent.mkdir()
    renamed.write_text(path.read_text().replace('"value": "fashion_mnist-cnn"', '"value": "resnet"'))
    assert _compliance(renamed) == (True, [], "")  # every other rule of the common and open rules passes
    aborted = RunLog("x", "1x CPU", 64, 1, "accuracy", 0.89, 600, 100, 999.0, 1000.0, 1200.0, False)
    path.write_text("\n".join(result_lines(aborted, [Evaluation(8.0, 0.5, 1000.0, 1190.0, 1200.0)])) + "\n")
    assert not read_result(path).converged and "aborted" in read_result(path).why


@pytest.mark.parametrize("kept", [4, 3, 6])
def test_a_folder_without_the_runs_its_benchmark_needs_is_unscored(tmp_path: Path, kept: int,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Withholding a run (or adding one) cannot move a score: ResNet-50's result is five runs."""
    folder = tmp_path / "sub" / "results" / "eos" / "resnet"
    folder.mkdir(parents=True)
    for i in range(min(kept, 5)):
        shutil.copy(RESULTS / f"result_{i}.txt", folder / f"result_{i}.txt")
    if kept == 6:  # a sixth run: the first made again an hour later (its own events)
        later = (RESULTS / "result_0.txt").read_text().replace('"time_ms": 1714', '"time_ms": 1715')
        (folder / "result_5.txt").write_text(later)
    [result] = find_results(tmp_path / "sub", "4.0")
    assert result.score().seconds is None and result.score().void
    assert f"{kept} result file(s): MLPerf's resnet result is 5 runs" in result.score().why
    assert main(["import", "mlperf", str(tmp_path / "sub"), "-o", str(tmp_path / "r"), "--store", "none"]) == 0
    assert f"no score: {kept} result file(s)" in capsys.readouterr().out
