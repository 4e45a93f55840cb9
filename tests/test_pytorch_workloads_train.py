"""Every PyTorch workload of the catalog trains two steps at each of its smoke sizes under horovodrun -np 2 on
CPU: finite loss, identical parameters on both ranks (gradients were averaged), different ones under
--independent (on two light workloads: one path for every model). The workloads come from the catalog
(BenchmarkInfo.smoke): a new entry is tested for free."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from hvdbench.core.catalog import BENCHMARKS
from hvdbench.core.records import read_records


TWO_STEPS = ["--warmup-steps", "1", "--steps", "1"]
# every PyTorch training benchmark of the catalog, at each of its smoke sizes: a new entry is tested for free
WORKLOADS = {f"{info.name}-{i}" if len(info.smoke) > 1 else info.name: (info.name, list(args))
             for info in BENCHMARKS.values() if info.framework == "pytorch" and info.trains
             for i, args in enumerate(info.smoke)}


def test_every_training_benchmark_has_smoke_sizes_that_parse() -> None:
    for info in BENCHMARKS.values():
        if info.trains:
            assert info.smoke, f"catalog entry {info.name} needs smoke arguments (a tiny training run)"
            for args in info.smoke:
                info.check([*args, *TWO_STEPS])


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

ALONE = ("mlp", "cifar10-0")  # the workloads whose --independent run is also trained (see the test)

@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_workload_trains_with_averaged_gradients_and_alone_when_independent(
        workload: str, tmp_path: Path, hvd_env: dict) -> None:
    benchmark, args = WORKLOADS[workload]
    together = train(benchmark, args, tmp_path / "allreduce", hvd_env)
    assert together[0]["param_checksum"] == together[1]["param_checksum"]
    if workload in ALONE:  # --independent is the harness's one path for every model: two light models show it
        alone = train(benchmark, args, tmp_path / "independent", hvd_env, "--independent")
        assert alone[0]["param_checksum"] != alone[1]["param_checksum"]
