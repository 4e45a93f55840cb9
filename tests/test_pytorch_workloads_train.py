"""Every PyTorch workload trains two steps at a tiny size under horovodrun -np 2 on CPU: finite loss,
identical parameters on both ranks (gradients were averaged), different ones under --independent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from hvdbench.suite.core.records import read_records

pytestmark = pytest.mark.slow

TWO_STEPS = ["--warmup-steps", "1", "--steps", "1"]
IMG = ["--batch-size", "2", "--image-size", "64"]
WORKLOADS = {
    "cifar10-resnet20": ("cifar10", ["--model", "resnet20", "--batch-size", "2"]),
    "cifar10-densenet40": ("cifar10", ["--model", "densenet40_k12", "--batch-size", "2"]),
    "imagenet-resnet50": ("imagenet", ["--model", "resnet50", *IMG]),
    "imagenet-resnet101": ("imagenet", ["--model", "resnet101", *IMG]),
    "imagenet-resnet152": ("imagenet", ["--model", "resnet152", *IMG]),
    "imagenet-vgg16": ("imagenet", ["--model", "vgg16", *IMG]),
    "imagenet-alexnet": ("imagenet", ["--model", "alexnet", *IMG]),
    "imagenet-inception_v3": ("imagenet", ["--model", "inception_v3", "--batch-size", "2"]),
    "mlp": ("mlp", ["--batch-size", "4", "--mlp-input", "32", "--mlp-widths", "64,64"]),
    "speech-lstm-fused": ("speech", ["--batch-size", "2", "--rnn-layers", "2", "--rnn-hidden", "16",
                                     "--utt-seconds", "uniform:0.3:1"]),
    "speech-gru-unrolled": ("speech", ["--batch-size", "2", "--rnn-layers", "2", "--rnn-hidden", "16", "--rnn-type",
                                       "gru", "--rnn-impl", "unrolled", "--utt-seconds", "uniform:0.3:0.6"]),
    "translation": ("translation", ["--batch-size", "3", "--hidden", "16", "--layers", "2", "--vocab", "50",
                                    "--src-max-len", "8"]),
    "lm": ("lm", ["--batch-size", "2", "--layers", "2", "--width", "32", "--heads", "4", "--context", "16",
                  "--vocab", "64"]),
}


def train(benchmark: str, args: list[str], log_dir: Path, env: dict, *extra: str) -> list[dict]:
    """Two steps under horovodrun -np 2 (MPI controller); each rank's summary."""
    proc = subprocess.run(["horovodrun", "-np", "2", "-H", "localhost:2", "--mpi", sys.executable,
                           str(REPO / "suite" / f"{benchmark}.py"), *args, *TWO_STEPS, *extra,
                           "--log-dir", str(log_dir)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    summaries = []
    for rank in (0, 1):
        records = read_records(log_dir / f"rank-{rank}.jsonl")
        assert [r["kind"] for r in records if r["kind"] == "step"] == ["step", "step"]
        summaries.append(records[-1])
    assert all(s["kind"] == "summary" and s["loss_finite"] for s in summaries)
    return summaries


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_workload_trains_with_averaged_gradients_and_alone_when_independent(
        workload: str, tmp_path: Path, hvd_env: dict) -> None:
    benchmark, args = WORKLOADS[workload]
    together = train(benchmark, args, tmp_path / "allreduce", hvd_env)
    assert together[0]["param_checksum"] == together[1]["param_checksum"]
    alone = train(benchmark, args, tmp_path / "independent", hvd_env, "--independent")
    assert alone[0]["param_checksum"] != alone[1]["param_checksum"]
