"""A run never puts two ranks on one GPU (NCCL's first call would fail: "Duplicate GPU detected"). At plan
time, one-node GPU runs of more ranks than this node shows GPUs (NVML's count narrowed by
CUDA_VISIBLE_DEVICES as CUDA reads it) are left out with one line each, so `hvdbench run`'s default
``--np 1,2`` and the demo sweep measure what fits on a one-GPU node; a plan with nothing left is refused.
On the CPU several ranks per node stay allowed. At run time, ranks that got the same GPU anyway are
refused in one line before any collective touches the device."""

from __future__ import annotations

from pathlib import Path

import pytest

from hvdbench.launchers.plan import plan
from hvdbench.launchers.runs import benchmark_sweep
from hvdbench.launchers.sweep import SweepError
from hvdbench.core.topology import parse_topo_text
from hvdbench.core.gpu import visible_gpu_count
from hvdbench.core.gpu_choice import shared_gpu_problem
from nvml_standin import StandInNvml

ONE_GPU = parse_topo_text("\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-15\t0\t\tN/A\n")
UUID0 = "GPU-5f1a0d6e-0000-4000-8000-000000000000"


@pytest.mark.parametrize("visible, count", [
    (None, 1), ("0", 1), ("", 0), ("-1", 0), ("0,1", 1), ("1,0", 0), ("0,0", 1), (UUID0, 1),
    ("GPU-00000000-dead-beef-0000-000000000000", 0), ("MIG-1d2c3b4a-0000-0000-0000-000000000000", 0),
])
def test_a_one_gpu_node_shows_what_cuda_visible_devices_leaves(visible: str | None, count: int) -> None:
    env = {} if visible is None else {"CUDA_VISIBLE_DEVICES": visible}
    assert visible_gpu_count(env, StandInNvml(ONE_GPU)) == count


def test_no_driver_means_no_judgement() -> None:
    class NoDriver:
        def nvmlInit(self) -> None:
            raise RuntimeError("NVML Shared Library Not Found")

    assert visible_gpu_count({}, NoDriver()) is None


def _run_sweep(np: list[int], args: tuple[str, ...] = ("--model", "resnet20")):  # type: ignore[no-untyped-def]
    return benchmark_sweep("cifar10", args, np=np, launcher="horovodrun", controller=None, repeats=1,
                           system="local", timeout=60.0, devices=None, topology=None)


def test_runs_beyond_the_nodes_gpus_are_left_out_with_a_line() -> None:
    planned = plan(_run_sweep([1, 2, 4]), None, here_gpus=1)
    assert [s.np for s in planned.specs] == [1]
    assert len(planned.skipped) == 2 and all("shows 1 GPU(s)" in note for note in planned.skipped)
    assert "at 2 ranks" in planned.skipped[0] and "at 4 ranks" in planned.skipped[1]
    assert [s.np for s in plan(_run_sweep([1, 2, 4]), None, here_gpus=4).specs] == [1, 2, 4]


def test_cpu_runs_and_machines_without_gpus_keep_every_rank_count() -> None:
    cpu = plan(_run_sweep([1, 2], ("--model", "resnet20", "--device", "cpu")), None, here_gpus=1)
    assert [s.np for s in cpu.specs] == [1, 2] and not cpu.skipped
    for none in (None, 0):
        assert [s.np for s in plan(_run_sweep([1, 2]), None, here_gpus=none).specs] == [1, 2]


def test_a_plan_with_nothing_that_fits_is_refused_in_one_line() -> None:
    with pytest.raises(SweepError) as err:
        plan(_run_sweep([2]), None, here_gpus=1)
    assert "no run fits: cifar10 at 2 ranks: this node shows 1 GPU(s)" in str(err.value)
    assert "\n" not in str(err.value)


def test_the_demo_sweep_keeps_its_baseline_on_a_one_gpu_node() -> None:
    from hvdbench.launchers.runs import DEFAULT_SWEEP
    from hvdbench.launchers.sweep import load_sweep

    planned = plan(load_sweep(DEFAULT_SWEEP), None, here_gpus=1)
    assert [s.np for s in planned.specs] == [1, 1, 1]  # its three repeats and planned.baselines and planned.skipped


def test_the_cli_says_what_it_leaves_out(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                         tmp_path: Path) -> None:
    from hvdbench import cli
    from hvdbench.cli import run

    monkeypatch.setattr(run, "here_gpus", lambda: 1)
    status = cli.main(["run", "cifar10", "--np", "1,2", "--dry-run", "-o", str(tmp_path), "--", "--model", "resnet20"])
    out = capsys.readouterr().out
    assert status == 0 and "skipped: cifar10 at 2 ranks: this node shows 1 GPU(s)" in out and "1 run(s)" in out


@pytest.mark.parametrize("used, problem", [
    ([("a", "00000000:19:00.0"), ("a", "00000000:19:00.0")], "ranks 0, 1 on a all compute on GPU 00000000:19:00.0"),
    ([("a", "00000000:19:00.0"), ("b", "00000000:19:00.0")], None),  # one GPU each on two hosts
    ([("a", "00000000:19:00.0"), ("a", "00000000:2A:00.0")], None),
    ([("a", None), ("a", None)], None),  # CPU ranks share the node
    ([("a", "x"), ("a", "y"), ("a", "x"), ("a", "x")], "ranks 0, 2, 3 on a all compute on GPU x"),
])
def test_ranks_sharing_a_gpu_are_named(used: list[tuple[str, str | None]], problem: str | None) -> None:
    found = shared_gpu_problem(used)
    assert found is None if problem is None else (found is not None and found.startswith(problem))
