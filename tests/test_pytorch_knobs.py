"""The shared knobs do what they say: precision, channels-last, data placement, fp16 allreduce, breakdown,
profile, compile; and impossible combinations are refused before training."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, hvdbench_exe
from hvdbench.core.records import read_records

TINY_CNN = ["--batch-size", "2", "--warmup-steps", "1", "--steps", "2"]


def two_ranks(benchmark: str, args: list[str], log_dir: Path, env: dict) -> dict[str, list[dict]]:
    proc = subprocess.run(["mpirun", "-np", "2", sys.executable, str(REPO / "suite" / f"{benchmark}.py"), *args,
                           "--log-dir", str(log_dir)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    records = read_records(log_dir / "rank-0.jsonl")
    kinds: dict[str, list[dict]] = {}
    for record in records:
        kinds.setdefault(record["kind"], []).append(record)
    return kinds


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.parametrize("extra, expected", [
    (["--precision", "bf16", "--channels-last"], {"precision": "bf16", "channels_last": True}),
    (["--precision", "amp", "--data", "host"], {"precision": "amp", "data": "host"}),
    (["--data", "loader", "--loader-workers", "1", "--fp16-allreduce"], {"data": "loader", "fp16_allreduce": True}),
])
def test_precision_layout_and_data_modes_train(extra: list[str], expected: dict, tmp_path: Path, hvd_env: dict) -> None:
    kinds = two_ranks("cifar10", [*TINY_CNN, *extra], tmp_path, hvd_env)
    (summary,) = kinds["summary"]
    assert summary["loss_finite"] and summary["samples"] == 4
    flags = kinds["env"][0]["flags"]
    assert {key: flags[key] for key in expected} == expected


@pytest.mark.slow
@pytest.mark.mpi
def test_breakdown_records_each_part_and_they_add_up(tmp_path: Path, hvd_env: dict) -> None:
    kinds = two_ranks("mlp", ["--batch-size", "8", "--mlp-widths", "256", "--warmup-steps", "1", "--steps", "3",
                              "--breakdown"], tmp_path, hvd_env)
    for step in kinds["step"]:
        phases = step["phases"]
        assert set(phases) == {"forward", "backward", "exchange", "optimizer"}
        assert all(v >= 0 for v in phases.values())
        assert sum(phases.values()) == pytest.approx(step["duration"], rel=0.2, abs=2e-3)


@pytest.mark.slow
@pytest.mark.mpi
def test_profile_writes_top_operators_and_a_trace(tmp_path: Path, hvd_env: dict) -> None:
    kinds = two_ranks("cifar10", [*TINY_CNN, "--profile", "2"], tmp_path, hvd_env)
    (profile,) = kinds["profile"]
    assert profile["steps"] == 2 and 0 < len(profile["top"]) <= 15
    assert any("conv" in op["name"] for op in profile["top"])
    assert (tmp_path / "trace-rank0.json").stat().st_size > 0 and (tmp_path / "trace-rank1.json").exists()
    assert kinds["summary"][0]["peak_rss_bytes"] > 10 * 2**20
    from hvdbench.analysis.collect import PROFILE_SCHEMA, collect

    table = collect([tmp_path]).profile
    assert list(table.columns) == list(PROFILE_SCHEMA) and set(table["rank"]) == {0, 1}
    assert table["self_cpu_us"].gt(0).all() and set(table["trace"]) == {"trace-rank0.json", "trace-rank1.json"}


@pytest.mark.slow
def test_compile_trains(tmp_path: Path, hvd_env: dict) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "suite" / "mlp.py"), "--batch-size", "4", "--mlp-input", "16",
                           "--mlp-widths", "32", "--compile", "--warmup-steps", "1", "--steps", "1",
                           "--log-dir", str(tmp_path)], capture_output=True, text=True, env=hvd_env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert read_records(tmp_path / "rank-0.jsonl")[-1]["loss_finite"]


@pytest.mark.parametrize("args, text", [
    (["cifar10", "--model", "resnet50"], "invalid choice: 'resnet50'"),
    (["mlp", "--channels-last"], "--channels-last applies to CNNs; model mlp is not one"),
    (["cifar10", "--device", "cpu", "--precision", "fp16"], "--precision fp16 needs a CUDA device"),
    (["imagenet", "--model", "inception_v3", "--image-size", "224"], "too small for inception_v3 (at least 299)"),
    (["speech", "--utt-seconds", "normal:1:2"], "expected normal:MEAN:STD:MIN:MAX"),
    (["mlp", "--mlp-widths", "64,0"], "hidden widths must be positive integers"),
])
@pytest.mark.slow  # two processes per case, each importing torch
def test_bad_values_are_refused_before_anything_starts(args: list[str], text: str, tmp_path: Path) -> None:
    for argv in ([hvdbench_exe(), "run", *args, "--output", str(tmp_path / "out")],
                 [sys.executable, str(REPO / "suite" / f"{args[0]}.py"), *args[1:]]):
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and text in lines[0], proc.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "hvdbench-logs").exists()


@pytest.mark.no_gpu
@pytest.mark.slow
@pytest.mark.mpi
def test_precision_the_device_cannot_run_stops_every_rank_before_training(tmp_path: Path, hvd_env: dict) -> None:
    proc = subprocess.run(["mpirun", "-np", "2", sys.executable, str(REPO / "suite" / "mlp.py"), "--precision", "fp16",
                           "--log-dir", str(tmp_path)], capture_output=True, text=True, env=hvd_env, timeout=300)
    assert proc.returncode != 0
    for rank in (0, 1):
        kinds = [r["kind"] for r in read_records(tmp_path / f"rank-{rank}.jsonl")]
        assert kinds == ["error"]
    assert "error: rank 0: --precision fp16 needs a CUDA device" in proc.stderr
