"""Real Horovod on CPU: 2-rank training under horovodrun (Gloo and MPI) and plain mpirun, then the report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from conftest import REPO, hvdbench_exe, run_folders
from hvdbench.core.records import ParseStats, parse_lines, read_records

pytestmark = pytest.mark.slow

TINY = ["--model", "resnet20", "--batch-size", "8", "--steps", "6", "--warmup-steps", "2"]


def _records(run_dir: Path, rank: int) -> list[dict]:
    stats = ParseStats()
    records = read_records(run_dir / f"rank-{rank}.jsonl", stats)
    assert stats.malformed == 0
    return records


def _assert_complete(run_dir: Path, np_: int, steps: int = 6, warmup: int = 2) -> list[dict]:
    summaries = []
    for rank in range(np_):
        records = _records(run_dir, rank)
        kinds = [r["kind"] for r in records]
        assert kinds[0] == "env" and kinds[-1] == "summary", kinds
        step_records = [r for r in records if r["kind"] == "step"]
        assert [r["warmup"] for r in step_records] == [True] * warmup + [False] * steps
        assert all(r["duration"] > 0 and r["rank"] == rank and r["size"] == np_ for r in step_records)
        summary = records[-1]
        assert summary["loss_finite"] and summary["samples"] == 8 * steps and summary["throughput"] > 0
        summaries.append(summary)
    return summaries


@pytest.mark.parametrize("controller", ["gloo", pytest.param("mpi", marks=pytest.mark.mpi)])
def test_horovodrun_two_ranks_complete_logs_and_report(tmp_path: Path, hvd_env: dict, controller: str) -> None:
    out = tmp_path / "results"
    proc = subprocess.run([hvdbench_exe(), "run", "cifar10", "--np", "1,2", "--controller", controller,
                           "--output", str(out), "--timeout", "300", *TINY],
                          capture_output=True, text=True, env=hvd_env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dirs = {json.loads((d / "run.json").read_text())["spec"]["np"]: d for d in run_folders(out)}
    assert sorted(run_dirs) == [1, 2]
    _assert_complete(run_dirs[1], 1)
    summaries = _assert_complete(run_dirs[2], 2)
    assert summaries[0]["param_checksum"] == summaries[1]["param_checksum"]  # gradients were exchanged
    env = _records(run_dirs[2], 1)[0]
    assert env["horovod"]["controller"] == controller and env["parameters"] == 269_722
    assert env["variables"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"  # CUDA numbers GPUs as NVML does
    table = pd.read_csv(out / "report" / "scaling.csv")
    assert list(table["np"]) == [1, 2] and set(table["controller"]) == {controller}
    assert table.loc[0, "speedup"] == 1.0 and table.loc[1, "efficiency"] == pytest.approx(table.loc[1, "speedup"] / 2)
    assert (table["ci_low"] <= table["throughput"]).all() and (table["throughput"] <= table["ci_high"]).all()
    # ResNet-20: 41M multiply-adds forward (He et al. 2016), 2 FLOPs each, forward + backward 3x forward
    assert env["flops_per_sample"] == pytest.approx(3 * 2 * 40.6e6, rel=0.02)
    assert table["tflops_per_gpu"].to_numpy() == pytest.approx(
        (table["per_rank"] * env["flops_per_sample"] / 1e12).to_numpy())
    assert table["peak"].str.startswith("no peak").all()  # a CPU without an entry in the peak table
    assert " 2 " in proc.stdout.split("images/s")[1]  # the table printed to the terminal has the 2-rank row


@pytest.mark.mpi
def test_mpirun_standalone_with_tagged_output(tmp_path: Path, hvd_env: dict) -> None:
    log_dir = tmp_path / "standalone"
    proc = subprocess.run(["mpirun", "-np", "2", "--tag-output", sys.executable, str(REPO / "suite" / "cifar10.py"),
                           *TINY, "--echo-records", "--log-dir", str(log_dir)],
                          capture_output=True, text=True, env=hvd_env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    stats = ParseStats()
    echoed = list(parse_lines(proc.stdout.splitlines(), stats))
    assert stats.malformed == 0
    assert sorted({(r["rank"], r["kind"]) for r in echoed if r["kind"] == "summary"}) == [(0, "summary"),
                                                                                           (1, "summary")]
    assert "[1,0]<stdout>:hvdbench cifar10-resnet20" in proc.stdout  # rank 0's human summary, one line
    _assert_complete(log_dir, 2)
    spec = json.loads((log_dir / "run.json").read_text())["spec"]  # a standalone run describes itself
    assert (spec["launcher"], spec["controller"], spec["np"]) == ("external", "mpi", 2)
    report = subprocess.run([hvdbench_exe(), "report", str(log_dir)], capture_output=True, text=True, timeout=120)
    assert report.returncode == 0 and "external" in report.stdout


def test_a_script_started_by_hand_names_one_directory_and_a_rerun_keeps_the_first(tmp_path: Path,
                                                                                 hvd_env: dict) -> None:
    """No --log-dir: rank 0 names the directory for every rank (a broadcast where only rank 0 holds the
    name: the collective is named alike on both ranks, or they would wait on two different ones)."""
    command = ["horovodrun", "-np", "2", "-H", "localhost:2", "--gloo", sys.executable,
               str(REPO / "suite" / "cifar10.py"),
               *TINY]
    proc = subprocess.run(command, capture_output=True, text=True, env=hvd_env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (log_dir,) = list((tmp_path / "hvdbench-logs").iterdir())
    _assert_complete(log_dir, 2)
    first = (log_dir / "rank-1.jsonl").read_bytes()
    again = subprocess.run([*command, "--log-dir", str(log_dir)], capture_output=True, text=True, env=hvd_env,
                           timeout=300, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-2000:]
    _assert_complete(log_dir, 2)
    assert (log_dir / "attempt-1" / "rank-1.jsonl").read_bytes() == first  # moved aside, never deleted


def test_independent_replicas_do_not_exchange_gradients(tmp_path: Path, hvd_env: dict) -> None:
    proc = subprocess.run(["horovodrun", "-np", "2", "-H", "localhost:2", "--gloo", sys.executable,
                           str(REPO / "suite" / "cifar10.py"), *TINY, "--independent", "--log-dir", str(tmp_path)],
                          capture_output=True, text=True, env=hvd_env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:]
    first, second = (read_records(tmp_path / f"rank-{r}.jsonl")[-1] for r in (0, 1))
    assert first["param_checksum"] != second["param_checksum"]


@pytest.mark.no_gpu
def test_a_failing_rank_is_recorded_with_its_reason(tmp_path: Path, hvd_env: dict) -> None:
    out = tmp_path / "results"
    proc = subprocess.run([hvdbench_exe(), "run", "cifar10", "--np", "2", "--output", str(out), *TINY,
                           "--device", "cuda"], capture_output=True, text=True, env=hvd_env, timeout=300)
    assert proc.returncode == 1
    assert "1 of 1 run(s) did not complete" in proc.stderr
    (run_dir,) = run_folders(out)
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "failed"
    assert status["message"].startswith("error: rank ") and "no CUDA device is visible" in status["message"]
    errors = [r for r in read_records(run_dir / "rank-0.jsonl") if r["kind"] == "error"]
    assert errors and errors[0]["error"] == "UsageError"


@pytest.mark.gpu
def test_cuda_rank_trains_in_fp16_and_records_its_gpu(tmp_path: Path, hvd_env: dict) -> None:
    """The GPU twin of the no-GPU tests: --device cuda trains (fp16 included), the env record carries the
    GPU's NVML facts and the device order, telemetry samples NVML (no 'GPU telemetry off' note)."""
    out = tmp_path / "results"
    proc = subprocess.run([hvdbench_exe(), "run", "cifar10", "--np", "1", "--output", str(out), *TINY,
                           "--device", "cuda", "--precision", "fp16", "--telemetry-interval", "0.2"],
                          capture_output=True, text=True, env=hvd_env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run_dir,) = run_folders(out)
    records = _records(run_dir, 0)
    env = records[0]
    assert env["device"]["type"] == "cuda" and env["gpu"]["pci_bus_id"] and env["nvml"]["available"]
    assert env["variables"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    telemetry = [r for r in records if r["kind"] == "telemetry"]
    assert telemetry and "note" not in telemetry[0] and telemetry[0]["sm_clock_mhz"]
    assert records[-1]["peak_device_bytes"] > 0
    assert env["math"]["cudnn_autotune"] is True and isinstance(env["math"]["tf32_convolution"], bool)


@pytest.mark.gpu
def test_two_ranks_given_one_gpu_stop_in_one_line_before_nccl(tmp_path: Path, hvd_env: dict) -> None:
    """Two ranks started by hand that both see only GPU 0 (what a one-GPU node gives every rank): each
    stops with the one line naming the shared GPU, before NCCL's first call would ("Duplicate GPU")."""
    env = {**hvd_env, "CUDA_VISIBLE_DEVICES": "0"}
    proc = subprocess.run([str(Path(sys.executable).with_name("horovodrun")), "-np", "2", "-H", "localhost:2",
                           "--gloo", sys.executable, str(REPO / "suite" / "cifar10.py"), *TINY, "--device", "cuda",
                           "--log-dir", str(tmp_path)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode != 0
    errors = [r for r in read_records(tmp_path / "rank-0.jsonl") if r["kind"] == "error"]
    assert errors and errors[0]["error"] == "UsageError" and "all compute on GPU" in errors[0]["message"]
    assert "Duplicate GPU" not in proc.stdout + proc.stderr
