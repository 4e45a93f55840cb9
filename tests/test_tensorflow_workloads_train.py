"""Every TensorFlow workload trains two steps at a tiny size under horovodrun -np 2 on CPU: finite loss,
identical trainable variables on both ranks (gradients averaged through hvd.grouped_allreduce),
different ones under --independent (on two light workloads: one path for every model); XLA on and off;
the Keras knobs; bad flags refused before training."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from hvdbench.core.catalog import BENCHMARKS, get_benchmark
from hvdbench.core.errors import UsageError
from hvdbench.core.records import read_records

pytestmark = pytest.mark.slow

TWO_STEPS = ["--warmup-steps", "1", "--steps", "1"]
# every TensorFlow training benchmark of the catalog, at each of its smoke sizes
WORKLOADS = {f"{info.name}-{i}" if len(info.smoke) > 1 else info.name: (info.name, list(args))
             for info in BENCHMARKS.values() if info.framework == "tensorflow" and info.trains
             for i, args in enumerate(info.smoke)}


def train(benchmark: str, args: list[str], log_dir: Path, env: dict, *extra: str,
          controller: str = "--gloo") -> list[list[dict]]:
    """Two steps under horovodrun -np 2; each rank's records."""
    proc = subprocess.run(["horovodrun", "-np", "2", "-H", "localhost:2", controller, sys.executable,
                           str(REPO / "suite" / f"{benchmark}.py"), *args, *TWO_STEPS, *extra,
                           "--log-dir", str(log_dir)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ranks = [read_records(log_dir / f"rank-{rank}.jsonl") for rank in (0, 1)]
    for records in ranks:
        assert [r["kind"] for r in records if r["kind"] == "step"] == ["step", "step"]
        assert records[-1]["kind"] == "summary" and records[-1]["loss_finite"]
    return ranks


ALONE = ("tf_mlp", "tf_cifar10")  # the workloads whose --independent run is also trained (see the test)


def checksums(ranks: list[list[dict]]) -> list[float]:
    return [records[-1]["param_checksum"] for records in ranks]


@pytest.mark.tf
@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_tf_workload_trains_with_averaged_gradients_and_alone_when_independent(
        workload: str, tmp_path: Path, hvd_env: dict) -> None:
    benchmark, args = WORKLOADS[workload]
    together = checksums(train(benchmark, args, tmp_path / "allreduce", hvd_env))
    assert together[0] == together[1]
    if workload in ALONE:  # --independent is the harness's one path for every model: two light models show it
        alone = checksums(train(benchmark, args, tmp_path / "independent", hvd_env, "--independent"))
        assert alone[0] != alone[1]


@pytest.mark.tf
def test_xla_compiled_step_trains_under_mpi_and_says_so(tmp_path: Path, hvd_env: dict) -> None:
    ranks = train("tf_cifar10", ["--batch-size", "2"], tmp_path / "xla", hvd_env, "--xla", controller="--mpi")
    env = next(r for r in ranks[0] if r["kind"] == "env")
    assert env["tensorflow"] == {"policy": "float32", "data_format": "channels_last", "xla": True}
    assert env["framework"] == "tensorflow" and env["device"]["tensorflow"] and env["horovod"]["controller"] == "mpi"
    assert checksums(ranks)[0] == checksums(ranks)[1]


@pytest.mark.tf
def test_keras_knobs_mixed_bfloat16_pipeline_fp16_exchange_breakdown(tmp_path: Path, hvd_env: dict) -> None:
    ranks = train("tf_mlp", ["--batch-size", "4", "--mlp-input", "32", "--mlp-widths", "64"], tmp_path / "knobs",
                  hvd_env, "--precision", "mixed_bfloat16", "--data", "pipeline", "--fp16-allreduce", "--breakdown",
                  "--inter-op-threads", "1")
    env = next(r for r in ranks[0] if r["kind"] == "env")
    assert env["tensorflow"]["policy"] == "mixed_bfloat16" and env["threads"]["inter_op"] == 1
    steps = [r for r in ranks[1] if r["kind"] == "step"]
    assert set(steps[-1]["phases"]) == {"compute", "exchange", "optimizer"}
    assert checksums(ranks)[0] == checksums(ranks)[1]


@pytest.mark.tf
def test_pure_bfloat16_variables_cross_horovod_as_float32(tmp_path: Path, hvd_env: dict) -> None:
    ranks = train("tf_mlp", ["--batch-size", "4", "--mlp-input", "32", "--mlp-widths", "64"], tmp_path / "bf16",
                  hvd_env, "--precision", "bf16", "--data", "host")
    assert next(r for r in ranks[0] if r["kind"] == "env")["tensorflow"]["policy"] == "bfloat16"
    assert checksums(ranks)[0] == checksums(ranks)[1]


@pytest.mark.parametrize("benchmark, args, problem", [
    ("tf_cifar10", ["--data", "loader"], "invalid choice: 'loader'"),
    ("tf_cifar10", ["--channels-last"], "unrecognized arguments: --channels-last"),
    ("tf_cifar10", ["--model", "densenet40_k12"], "invalid choice: 'densenet40_k12'"),
    ("tf_cifar10", ["--data-format", "channels_first", "--device", "cpu"], "take only channels_last"),
    ("tf_mlp", ["--data-format", "channels_last"], "applies to CNNs"),
    ("tf_imagenet", ["--model", "inception_v3", "--image-size", "64"], "too small for inception_v3 (at least 75)"),
    ("tf_mlp", ["--precision", "fp16", "--device", "cpu"], "needs a CUDA device"),
])
def test_bad_tf_flags_are_one_line_errors(benchmark: str, args: list[str], problem: str) -> None:
    with pytest.raises(UsageError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        get_benchmark(benchmark).check(args)


def test_bad_flag_stops_the_script_before_tensorflow_starts(tmp_path: Path, hvd_env: dict) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "suite" / "tf_cifar10.py"), "--xla", "--steps", "0",
                           "--log-dir", str(tmp_path / "never")], capture_output=True, text=True, env=hvd_env,
                          timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: tf_cifar10: argument --steps: must be a positive integer, got 0 (see --help)")
    assert not (tmp_path / "never").exists()
