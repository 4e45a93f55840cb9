"""Every script under benchmarks/ and scripts/ at least starts: each Python one answers --help, or runs whole where
it takes no option (its imports and its parser whole: a script that broke on a renamed import is caught here, not by
its next user), each shell one parses (bash -n). scripts/check_build.py is set-up's own check, run by every set-up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SET_UP_RUNS = {"check_build.py"}
PYTHON = sorted(p for folder in ("benchmarks", "scripts") for p in (REPO / folder).glob("*.py")
                if p.name not in SET_UP_RUNS)
SHELL = sorted(p for folder in ("benchmarks", "scripts") for p in (REPO / folder).glob("*.sh"))


@pytest.mark.slow
@pytest.mark.parametrize("script", PYTHON, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_python_script_answers_help(script: Path) -> None:
    done = subprocess.run([sys.executable, script.name, "--help"], cwd=script.parent, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]  # a script without options runs whole: it started


@pytest.mark.parametrize("script", SHELL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_each_shell_script_parses(script: Path) -> None:
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
