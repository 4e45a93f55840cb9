"""Bad input: each a one-line error naming the problem and a non-zero exit, before anything runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, hvdbench_exe

pytestmark = pytest.mark.bad_input  # counted in the run's summary (conftest.py)


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=120)


def _one_line_error(proc: subprocess.CompletedProcess[str], text: str) -> None:
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "error" in lines[0] and text in lines[0], lines[0]


@pytest.mark.parametrize("args, text", [
    (["run", "nosuch"], "unknown benchmark 'nosuch'; known: cifar10"),
    (["run", "cifar10", "--batch-size", "0"], "--batch-size: must be a positive integer, got 0"),
    (["run", "cifar10", "--steps", "-3"], "--steps: must be a positive integer, got -3"),
    (["run", "cifar10", "--steps", "many"], "--steps: not an integer: 'many'"),
    (["run", "cifar10", "--warmup-steps", "-1"], "--warmup-steps: must be a non-negative integer"),
    (["run", "cifar10", "--model", "resnet21"], "invalid choice: 'resnet21'"),
    (["run", "cifar10", "--np", "0,2"], "rank counts must be positive integers"),
    (["run", "cifar10", "--launcher", "pbs"], "unknown launcher 'pbs'; known: horovodrun, mpiexec, mpirun"),
    (["run", "cifar10", "--frobnicate"], "unrecognized arguments: --frobnicate"),
    ([], "the following arguments are required: command"),
])
def test_cli_rejects_bad_flags(tmp_path: Path, args: list[str], text: str) -> None:
    proc = _run([hvdbench_exe(), *args, "--output", str(tmp_path / "out")] if args else [hvdbench_exe()], tmp_path)
    _one_line_error(proc, text)
    assert proc.returncode == 2
    assert not (tmp_path / "out").exists()  # nothing ran, nothing was written


def test_report_over_an_empty_directory(tmp_path: Path) -> None:
    _one_line_error(_run([hvdbench_exe(), "report", str(tmp_path)], tmp_path), "no runs found under")


def test_report_over_a_missing_directory(tmp_path: Path) -> None:
    _one_line_error(_run([hvdbench_exe(), "report", str(tmp_path / "nope")], tmp_path), "does not exist")


def test_report_over_a_file_and_over_unreadable_run_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    _one_line_error(_run([hvdbench_exe(), "report", str(tmp_path / "notes.txt")], tmp_path), "is not a directory")
    run = tmp_path / "results" / "r1"
    run.mkdir(parents=True)
    (run / "run.json").write_bytes(b"\x00\xff garbage")
    _one_line_error(_run([hvdbench_exe(), "report", str(tmp_path / "results")], tmp_path),
                    "not a readable run description")


def test_benchmark_script_rejects_bad_flags_before_starting_horovod(tmp_path: Path) -> None:
    script = REPO / "suite" / "cifar10.py"
    proc = _run([sys.executable, str(script), "--batch-size", "-4"], tmp_path)
    _one_line_error(proc, "--batch-size: must be a positive integer, got -4")
    assert proc.returncode == 2


def test_every_subcommand_has_help(tmp_path: Path) -> None:
    for sub in ("run", "report"):
        proc = _run([hvdbench_exe(), sub, "--help"], tmp_path)
        assert proc.returncode == 0 and f"usage: hvdbench {sub}" in proc.stdout
