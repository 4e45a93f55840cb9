"""Launchers build argv lists from a RunSpec as pure functions; the registry names what it knows."""

from __future__ import annotations

from pathlib import Path

import pytest

from hvdbench.launchers.base import LaunchContext, get_launcher
from hvdbench.core.catalog import get_benchmark
from hvdbench.core.errors import UsageError
from hvdbench.core.spec import RunSpec

CTX = LaunchContext(python="/opt/venv/bin/python", run_dir=Path("/results/x"))
SCRIPT = str(get_benchmark("cifar10").path)


def test_horovodrun_gloo_command() -> None:
    spec = RunSpec(benchmark="cifar10", args=("--batch-size", "32"), np=2, controller="gloo")
    assert get_launcher("horovodrun").command(spec, CTX) == [
        "horovodrun", "-np", "2", "-H", "localhost:2", "--gloo",
        "/opt/venv/bin/python", SCRIPT, "--batch-size", "32", "--log-dir", "/results/x"]


def test_horovodrun_over_two_nodes_spreads_slots() -> None:
    spec = RunSpec(benchmark="cifar10", np=8, nodes=2, controller="mpi")
    ctx = LaunchContext(python="python", run_dir=Path("/r"), hosts=("node1", "node2", "node3"))
    argv = get_launcher("horovodrun").command(spec, ctx)
    assert argv[:7] == ["horovodrun", "-np", "8", "-H", "node1:4,node2:4", "--mpi", "python"]


def test_too_few_hosts_is_an_error() -> None:
    spec = RunSpec(benchmark="cifar10", np=4, nodes=2)
    with pytest.raises(UsageError, match="needs 2 node"):
        get_launcher("horovodrun").command(spec, CTX)


def test_mpirun_leaves_the_transport_to_open_mpi_and_exports_knobs() -> None:
    spec = RunSpec(benchmark="cifar10", np=2, launcher="mpirun", controller="mpi",
                   env=(("HOROVOD_FUSION_THRESHOLD", "0"),), devices=(2, 3))
    launcher = get_launcher("mpirun")
    argv = launcher.command(spec, CTX)
    joined = " ".join(argv)
    assert argv[:5] == ["mpirun", "-np", "2", "-H", "localhost:2"]
    assert "-bind-to none -map-by slot -x" in joined and "pml" not in joined  # transport auto: Open MPI chooses
    for name in ("HOROVOD_FUSION_THRESHOLD", "CUDA_VISIBLE_DEVICES", "PATH", "LD_LIBRARY_PATH"):
        assert f"-x {name}" in joined
    assert launcher.environment(spec) == {"HOROVOD_FUSION_THRESHOLD": "0", "CUDA_VISIBLE_DEVICES": "2,3",
                                          "HVDBENCH_DEVICES": "2,3"}
    assert argv[-3:] == [SCRIPT, "--log-dir", "/results/x"][-3:]


def test_mpirun_refuses_the_gloo_controller() -> None:
    with pytest.raises(UsageError, match="mpi controller only"):
        get_launcher("mpirun").command(RunSpec(benchmark="cifar10", controller="gloo"), CTX)


def test_unknown_launcher_lists_the_known_ones() -> None:
    with pytest.raises(UsageError, match=r"unknown launcher 'pbs'; known: horovodrun, mpiexec, mpirun"):
        get_launcher("pbs")


def test_building_a_command_runs_nothing(tmp_path: Path) -> None:
    spec = RunSpec(benchmark="cifar10", np=2)
    ctx = LaunchContext(python="python", run_dir=tmp_path / "never-made")
    get_launcher("horovodrun").command(spec, ctx)
    assert not (tmp_path / "never-made").exists()
