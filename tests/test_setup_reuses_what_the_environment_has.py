"""Set-up on an environment that already has a working Horovod and mpi4py (an image's, a module's: here this
checkout's own environment, seen through HVDBENCH_SYSTEM_SITE) installs neither: each is checked (Horovod's
--check-build shows what the node needs, mpi4py uses the MPI on PATH), said, and used as it is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_setup_on_an_environment_with_a_working_horovod_builds_and_installs_none(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HVDBENCH_", "HOROVOD_"))}
    env.update(HVDBENCH_VENV=str(venv), HVDBENCH_PYTHON=sys.executable, HVDBENCH_SYSTEM_SITE="1",
               HVDBENCH_CACHE=str(tmp_path / "cache"))  # an empty cache: no wheel to fall back on
    out = subprocess.run(["bash", str(REPO / "scripts" / "setup.sh")], capture_output=True, text=True, env=env,
                         timeout=540)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "already in the environment has what this node needs" in out.stdout and "used as it is" in out.stdout
    assert "mpi4py already in the environment uses the MPI on PATH" in out.stdout
    assert "building Horovod" not in out.stdout and not (tmp_path / "cache" / "wheels").exists()
    own = next(venv.glob("lib/python*/site-packages"))
    assert not list(own.glob("horovod*")) and not list(own.glob("mpi4py*"))  # nothing installed over the one there
    check = subprocess.run([str(venv / "bin" / "python"), "-c", "import horovod.torch, mpi4py; print('ok')"],
                           capture_output=True, text=True, timeout=120)
    assert check.stdout.strip() == "ok", check.stderr[-1000:]
