"""Set-up decides "nothing to do" from a stamp of everything that enters the build: every setting its
header documents either changes the stamp or is marked "not in the build", and so do the lock's content
and the MPI on PATH. `scripts/setup.sh --stamp` computes it without installing anything. Where the test
tools cannot be installed (no root, no network), scripts/test-tools.sh says which tests will skip and
lets them run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SETUP = REPO / "scripts" / "setup.sh"


def documented_settings() -> dict[str, bool]:
    """Every setting scripts/setup.sh's header documents, and whether it enters the build."""
    header = SETUP.read_text().split("set -Eeuo pipefail", 1)[0]
    settings: dict[str, bool] = {}
    entries = re.split(r"\n#   (?=[A-Z])", header)
    for entry in entries[1:]:
        names = re.match(r"((?:[A-Z][A-Z0-9_]+(?:=\S+)?(?:, )?)+)", entry)
        assert names, entry
        for name in re.findall(r"(?:^|, )([A-Z]+_[A-Z0-9_]+)", names.group(1)):
            settings[name] = "not in the build" not in entry
    return settings


def stamp(env: dict[str, str], path_prefix: Path | None = None) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("HVDBENCH_", "HOROVOD_"))}
    if path_prefix:
        clean["PATH"] = f"{path_prefix}{os.pathsep}{clean['PATH']}"
    proc = subprocess.run(["bash", str(SETUP), "--stamp"], capture_output=True, text=True, timeout=60,
                          env={**clean, "HVDBENCH_TF_SPEC": "tensorflow-cpu==2.21.0", **env})
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


def _changed_values(tmp_path: Path) -> dict[str, str]:
    """A value other than the default for each setting."""
    other_python = tmp_path / "py"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(other_python)], check=True, timeout=60)
    lock = tmp_path / "my-lock.txt"
    text = (REPO / "constraints.txt").read_text()
    lock.write_text(re.sub(r"^(numpy==)\S+", r"\g<1>1.26.4", text, flags=re.M))
    (tmp_path / "wheels").mkdir()
    return {"HVDBENCH_VENV": str(tmp_path / "venv"), "HVDBENCH_CACHE": str(tmp_path / "cache"),
            "HVDBENCH_PYTHON": str(other_python / "bin" / "python"), "HVDBENCH_LOCK": str(lock),
            "HVDBENCH_TORCH_SPEC": "torch==2.5.1 --index-url https://download.pytorch.org/whl/cpu",
            "HVDBENCH_TF_SPEC": "none", "HVDBENCH_SYSTEM_SITE": "1", "HVDBENCH_MPI": "none",
            "HVDBENCH_WHEELS": str(tmp_path / "wheels"), "HVDBENCH_MPI4PY_SOURCE": "1", "HOROVOD_VERSION": "0.28.0",
            "HOROVOD_GPU_OPERATIONS": "NCCL", "HOROVOD_NCCL_HOME": "/opt/nccl", "HOROVOD_CUDA_HOME": "/opt/cuda-13.0",
            "HOROVOD_BUILD_CUDA_CC_LIST": "80,90", "HVDBENCH_HOROVOD_WHEEL": str(tmp_path / "horovod.whl"),
            "HVDBENCH_REBUILD_HOROVOD": "1", "HOROVOD_DEBUG": "1", "HOROVOD_WITHOUT_GLOO": "1"}


@pytest.mark.slow  # about 20 runs of scripts/setup.sh --stamp
def test_every_setting_that_enters_the_build_changes_the_stamp_and_no_other(tmp_path: Path) -> None:
    settings = documented_settings()
    values = _changed_values(tmp_path)
    assert set(settings) == set(values), f"a documented setting without a test value: {set(settings) ^ set(values)}"
    assert {name for name, built in settings.items() if not built} == {"HVDBENCH_VENV", "HVDBENCH_CACHE",
                                                                       "HVDBENCH_WHEELS"}
    base = stamp({})
    assert re.fullmatch(r"stamp: [0-9a-f]{16}", base)
    wrong = [name for name, built in settings.items() if (stamp({name: values[name]}) != base) is not built]
    assert not wrong, f"settings whose effect on the stamp is not what the header says: {wrong}"
    assert stamp({"HVDBENCH_LOCK": "none"}) != base
    assert not (tmp_path / "venv").exists() and not (tmp_path / "cache").exists()  # --stamp installs nothing


@pytest.mark.slow
def test_another_mpi_on_path_changes_the_stamp(tmp_path: Path) -> None:
    """Horovod and mpi4py link the MPI they were built against: MPICH where Open MPI was is another build."""
    (tmp_path / "mpirun").write_text("#!/bin/sh\necho 'HYDRA build details:'\necho '    Version: 4.1.2'\n")
    (tmp_path / "mpirun").chmod(0o755)
    assert stamp({}, path_prefix=tmp_path) != stamp({})
    assert stamp({"HVDBENCH_MPI": "none"}, path_prefix=tmp_path) == stamp({"HVDBENCH_MPI": "none"})


@pytest.mark.parametrize("setting, problem", [
    ({"HVDBENCH_LOCK": "/nonexistent/lock.txt"}, "HVDBENCH_LOCK=/nonexistent/lock.txt is not a readable file"),
    ({"HVDBENCH_PYTHON": "/nonexistent/python3"}, "HVDBENCH_PYTHON=/nonexistent/python3 does not run"),
    ({"HVDBENCH_CACHE": "/dev/null/cache"}, "HVDBENCH_CACHE=/dev/null/cache: cannot make /dev/null/cache/logs"),
])
def test_setup_failures_are_one_line_naming_what_failed(tmp_path: Path, setting: dict[str, str], problem: str) -> None:
    env = {**os.environ, "HVDBENCH_VENV": str(tmp_path / "venv"), "HVDBENCH_MPI": "none", **setting}
    proc = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and problem in proc.stderr, proc.stderr
    assert not (tmp_path / "venv").exists()


def _tool_box(tmp_path: Path, apt_get: str | None) -> Path:
    """A PATH with the shell's basic tools only (no chromium, slurm, ssh, ip), and a failing apt-get."""
    box = tmp_path / "bin"
    box.mkdir()
    for tool in ("bash", "id", "sort", "mktemp", "rm", "cat", "printf"):
        found = subprocess.run(["bash", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip()
        if found.startswith("/"):
            (box / tool).symlink_to(found)
    if apt_get is not None:
        (box / "apt-get").write_text(f"#!/bin/sh\necho '{apt_get}' >&2\nexit 100\n")
        (box / "apt-get").chmod(0o755)
    return box


@pytest.mark.parametrize("apt_get, why", [("E: Could not resolve 'deb.debian.org'", "apt-get could not install them"),
                                          (None, "not root or no apt-get")])
def test_test_tools_without_network_say_which_tests_skip_and_go_on(tmp_path: Path, apt_get: str | None,
                                                                   why: str) -> None:
    box = _tool_box(tmp_path, apt_get)
    proc = subprocess.run([str(box / "bash"), str(REPO / "scripts" / "test-tools.sh")], capture_output=True, text=True,
                          timeout=60, env={"PATH": str(box), "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("[test-tools]")]
    assert any(line.startswith("[test-tools] chromium missing") for line in lines), proc.stderr
    for line in lines:
        assert why in line and line.endswith("will skip"), line
        named = re.findall(r"(test_\w+\.py)", line)
        assert named and all((REPO / "tests" / name).is_file() for name in named), line
