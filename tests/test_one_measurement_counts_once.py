"""One measurement counts once, whatever folder, label or bytes it comes in: a run whose times are another's (within
one part in a million) is a copy, named and left out, across every run of every results root being judged; an
nccl-tests output is identified by what it measured (its parsed tests), not by its bytes."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conftest import write_run
from hvdbench.analysis.collect import collect
from hvdbench.analysis.report.build import Judging, build
from hvdbench.cli import main
from hvdbench.core.spec import RUN_FILE, RunSpec

ARGS = ("--model", "resnet20", "--batch-size", "16")
FIXTURE = Path(__file__).parent / "fixtures" / "nccl-tests" / "all_reduce_perf-2node.txt"


def _runs(root: Path, system: str, seed: int, repeats: int = 3) -> list[Path]:
    made = []
    for repeat in range(repeats):
        rng = np.random.default_rng(seed + repeat)
        made.append(write_run(root, RunSpec(benchmark="cifar10", args=ARGS, system=system, repeat=repeat),
                              [list(rng.lognormal(math.log(0.1), 0.03, 30))]))
    return made


def _relabel(source: Path, target: Path, system: str, shift: float = 0.0) -> None:
    """Every run of ``source`` copied into ``target`` as if measured on ``system`` (its step times moved by
    ``shift`` seconds: a copy doctored by a picosecond)."""
    for run_dir in sorted(p for p in source.iterdir() if (p / RUN_FILE).is_file()):
        moved = replace(RunSpec.read(run_dir / RUN_FILE), system=system)
        copy = target / moved.id
        shutil.copytree(run_dir, copy)
        moved.write(copy)
        for log in copy.glob("rank-*.jsonl") if shift else ():
            log.write_text(_shifted(log.read_text(), shift))


def _shifted(text: str, shift: float) -> str:
    lines = []
    for line in text.splitlines():
        record = json.loads(line)
        if record.get("kind") == "step" and not record.get("warmup"):
            record["duration"] += shift
        lines.append(json.dumps(record))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("shift", [0.0, 1e-12])
def test_a_root_copied_and_relabelled_as_another_system_is_left_out_never_judged_against_itself(
        tmp_path: Path, shift: float) -> None:
    originals = _runs(tmp_path / "a", "A", seed=1)
    _relabel(tmp_path / "a", tmp_path / "b", "B", shift)
    runs = collect([tmp_path / "a", tmp_path / "b"]).runs.set_index("run_id")
    copies = runs[runs["system"] == "B"]
    assert len(copies) == 3 and set(copies["status"]) == {"inconsistent"}
    for reason in copies["reason"]:
        assert "a copy, not a measurement of its own" in reason and "system 'A'" in reason
        assert any(run.name in reason for run in originals)
    assert set(runs[runs["system"] == "A"]["status"]) == {"ok"}
    report = build(collect([tmp_path / "a", tmp_path / "b"]), judging=Judging(baseline="A"))
    assert "decision" not in report.tables  # nothing of B stands: no verdict of A against its own copy


def test_two_measurements_are_never_taken_for_copies(tmp_path: Path) -> None:
    """Repeats of the same work, however close (a steady machine), and synthetic series without any variation
    (test fixtures' constant steps: no fingerprint) stay runs of their own."""
    _runs(tmp_path / "a", "A", seed=1)
    _runs(tmp_path / "b", "B", seed=11)
    for repeat in range(2):
        write_run(tmp_path / "c", RunSpec(benchmark="mlp", system="C", repeat=repeat), [[0.01] * 30])
    runs = collect([tmp_path / "a", tmp_path / "b", tmp_path / "c"]).runs
    assert set(runs["status"]) == {"ok"} and len(runs) == 8


def test_an_nccl_tests_output_taken_again_with_its_text_changed_is_refused_and_a_copied_run_left_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A vendor's one output imported three times, a comment and a blank line added each time, is one run: the
    second and third imports are refused in one line; runs copied in by hand are left out by the report, and an
    acceptance criterion on them is not judged (one measurement, never three with a zero-width interval)."""
    root = tmp_path / "r"
    assert main(["import", "nccl-tests", str(FIXTURE), "-o", str(root), "--system", "dgx"]) == 0
    for i in (1, 2):
        edited = tmp_path / f"all_reduce_perf-{i}.txt"
        edited.write_text(f"# run {i} of the acceptance\n\n" + FIXTURE.read_text() + "\n# done\n")
        assert main(["import", "nccl-tests", str(edited), "-o", str(root), "--system", "dgx"]) == 2
        err = capsys.readouterr().err
        assert "already imported" in err and "only its text differs" in err and err.count("\n") == 1
    [first] = [p for p in root.iterdir() if p.is_dir()]
    spec = RunSpec.read(first / RUN_FILE)
    for repeat in (1, 2):  # copied in by hand under new repeat numbers
        copy = root / replace(spec, repeat=repeat).id
        shutil.copytree(first, copy)
        replace(spec, repeat=repeat).write(copy)
    runs = collect([root]).runs
    assert sorted(runs["status"]) == ["inconsistent", "inconsistent", "ok"]
    criteria = tmp_path / "c.toml"
    criteria.write_text("[[criterion]]\nname='allreduce 1G'\nmetric='busbw'\nbackend='nccl-tests'\nmin=70\n")
    assert main(["accept", str(criteria), str(root), "-o", str(tmp_path / "out")]) == 4
    assert "1 imported run(s) of nccl-tests" in (tmp_path / "out" / "acceptance.txt").read_text()
