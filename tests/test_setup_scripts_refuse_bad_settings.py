"""The set-up scripts' own inputs: a bad setting stops scripts/setup.sh in one line before it installs
anything; scripts/bundle.sh fetches exactly what set-up installs from the network (setup.cfg's requirements
with the extras set-up asks for, and Horovod's build and run requirements) at the lock's versions, never
PyTorch, TensorFlow or Horovod itself, and refuses malformed arguments in one line."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import setup_requirements

pytestmark = pytest.mark.bad_input  # counted in the run's summary (conftest.py)

REPO = Path(__file__).resolve().parents[1]


def _run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", *argv], capture_output=True, text=True, timeout=60, cwd=REPO,
                          env={**os.environ, **(env or {})})


@pytest.mark.parametrize("setting, problem", [
    ({"HVDBENCH_MPI": "openmpi"}, "HVDBENCH_MPI=openmpi is not understood"),
    ({"HVDBENCH_WHEELS": "/nonexistent/wheels"}, "HVDBENCH_WHEELS=/nonexistent/wheels is not a folder"),
    ({"HOROVOD_WITHOUT_GLOO": "yes"}, "HOROVOD_WITHOUT_GLOO=yes is not understood"),
    ({"HVDBENCH_MPI": "none", "HOROVOD_WITHOUT_GLOO": "1"}, "leaves Horovod no controller"),
])
def test_setup_stops_on_a_bad_setting_in_one_line(tmp_path: Path, setting: dict[str, str], problem: str) -> None:
    proc = _run("scripts/setup.sh", env={**setting, "HVDBENCH_VENV": str(tmp_path / "venv")})
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and problem in proc.stderr
    assert not (tmp_path / "venv").exists()


def test_bundle_lists_what_setup_fetches_at_the_locked_versions_and_no_framework() -> None:
    proc = _run("scripts/bundle.sh", "--list")
    assert proc.returncode == 0, proc.stderr
    listed = {re.split(r"[<>=!~ \[;]", line)[0].lower() for line in proc.stdout.splitlines()}
    lock = {line.split("==")[0].lower(): line for line in (REPO / "constraints.txt").read_text().splitlines()
            if "==" in line and not line.startswith("#")}
    assert all(lock[line.split("==")[0]] == line for line in proc.stdout.splitlines()), proc.stdout
    names = {re.split(r"[<>=!~ \[;]", line)[0].lower() for line in setup_requirements()}
    assert listed == names - {"torch", "tensorflow", "horovod"}
    assert {"msgspec", "mpi4py", "submitit", "nvidia-ml-py", "cffi", "cmake"} <= listed


@pytest.mark.parametrize("argv, problem", [
    ((), "usage: scripts/bundle.sh DIR"),
    (("DIR", "--python", "312"), "--python 312: give major.minor"),
    (("DIR", "--glibc", "2.x"), "--glibc 2.x: give 2.N"),
    (("DIR", "--wheels"), "unknown argument --wheels (valid: --python, --glibc, --only, --dry-run)"),
])
def test_bundle_refuses_malformed_arguments_in_one_line(tmp_path: Path, argv: tuple[str, ...], problem: str) -> None:
    argv = tuple(str(tmp_path / "out") if a == "DIR" else a for a in argv)
    proc = _run("scripts/bundle.sh", *argv)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and problem in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.no_gpu  # its last case needs a machine without nvidia-smi
def test_a_gpu_node_leaves_tensorflow_out_and_says_how_to_have_it(tmp_path: Path) -> None:
    """TensorFlow's CUDA 12 packages would overwrite PyTorch's CUDA 13 NCCL and cuDNN in one environment:
    on a node with nvidia-smi the default is no TensorFlow, said with the two-environment recipe (the run
    stops at a bad MPI setting before installing anything)."""
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\nexit 0\n")
    (fake / "nvidia-smi").chmod(0o755)
    env = {"HVDBENCH_MPI": "bad", "HVDBENCH_VENV": str(tmp_path / "venv")}
    gpu = _run("scripts/setup.sh", env={**env, "PATH": f"{fake}:{os.environ['PATH']}"})
    assert "TensorFlow left out on this GPU node" in gpu.stdout and "HVDBENCH_VENV=.venv-tf" in gpu.stdout
    assert "HVDBENCH_MPI=bad is not understood" in gpu.stderr
    explicit = _run("scripts/setup.sh", env={**env, "PATH": f"{fake}:{os.environ['PATH']}",
                                             "HVDBENCH_TF_SPEC": "tensorflow[and-cuda]==2.21.0"})
    assert "TensorFlow left out" not in explicit.stdout
    cpu = _run("scripts/setup.sh", env=env)
    assert "TensorFlow left out" not in cpu.stdout and cpu.returncode == 1


@pytest.mark.parametrize("what", ["an MPI prefix", "a file"])
def test_mpi_env_touches_nothing_in_a_folder_that_is_no_environment_of_its_own(tmp_path: Path, what: str) -> None:
    """HVDBENCH_MPI_VENV naming an MPI's own install (its bin/mpicc ...) or a file is refused in one line before
    anything is linked, installed or made: the MPI's tools are left as they were."""
    prefix = tmp_path / "opt-mpich"
    if what == "a file":
        prefix.write_text("not a folder\n")
    else:
        (prefix / "bin").mkdir(parents=True)
        for tool in ("mpicc", "mpicxx", "mpirun", "mpiexec"):
            (prefix / "bin" / tool).write_text(f"#!/bin/sh\necho the site's own {tool}\n")
    before = {p: p.read_bytes() for p in ([prefix] if prefix.is_file() else prefix.rglob("*")) if p.is_file()}
    proc = _run("scripts/mpi-env.sh", "mpich", env={"HVDBENCH_MPI_VENV": str(prefix)})
    assert proc.returncode != 0 and proc.stderr.count("\n") == 1, proc.stderr
    assert ("is no environment hvdbench made" if what != "a file" else "is not a folder") in proc.stderr
    after = {p: p.read_bytes() for p in ([prefix] if prefix.is_file() else prefix.rglob("*")) if p.is_file()}
    assert after == before and not any(p.is_symlink() for p in tmp_path.rglob("*"))
