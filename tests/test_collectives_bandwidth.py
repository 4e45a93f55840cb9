"""The collective benchmark: correct results through Horovod and raw MPI, nccl-tests' bandwidth
formulas, a wrong reduction caught, and the report's table and plot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from typing import Callable

import numpy as np
import pandas as pd
import pytest

from conftest import REPO, hvdbench_exe, run_folders
from hvdbench.core.collective_ops import OPS, bus_factor, sizes, summarize
from hvdbench.core.flags import byte_size
from hvdbench.core.records import read_records

SMALL = ["--min-bytes", "8", "--max-bytes", "64K", "--factor", "8", "--iters", "3", "--warmup-iters", "1"]


# One row per collective: its bus factor at 8 ranks (nccl-tests) and what it computes, in NumPy, from every
# rank's input to one rank's output. A new descriptor in core/collective_ops.py needs its row here.
ROWS: dict[str, tuple[float, Callable[[list[np.ndarray], int], np.ndarray]]] = {
    "allreduce": (1.75, lambda inputs, rank: np.sum(inputs, axis=0)),
    "allgather": (0.875, lambda inputs, rank: np.concatenate(inputs)),
    "broadcast": (1.0, lambda inputs, rank: inputs[0]),
    "alltoall": (0.875, lambda inputs, rank: np.concatenate([np.split(x, len(inputs))[rank] for x in inputs])),
}


@pytest.mark.parametrize("ranks", [1, 2, 3, 8])
@pytest.mark.parametrize("nbytes", [8, 1000, 2**20])
def test_every_descriptor_expects_what_its_collective_computes(ranks: int, nbytes: int) -> None:
    """The descriptor's inputs, run through the operation's meaning, give the result it expects on every
    rank; its bus factor and byte count are nccl-tests'."""
    assert set(ROWS) == set(OPS), "each collective needs one row in ROWS"
    for name, op in OPS.items():
        factor, compute = ROWS[name]
        assert op.bus_factor(8) == pytest.approx(factor)
        count = op.count(nbytes, ranks, "fp32")
        inputs = [np.full(count, op.fill(rank, ranks)) for rank in range(ranks)]
        for rank in range(ranks):
            values = op.expected(rank, ranks)
            share = op.output_count(count, ranks) // len(values)
            expected = np.concatenate([np.full(share, v) for v in values])
            np.testing.assert_array_equal(compute(inputs, rank), expected, err_msg=f"{name} rank {rank}/{ranks}")
        recorded = op.recorded_bytes(count, ranks, "fp32")
        assert recorded == (count * ranks * 4 if op.gathers else count * 4) and recorded <= max(nbytes, 4 * ranks)


def test_bus_bandwidth_factors_and_summary_by_hand() -> None:
    assert bus_factor("allreduce", 8) == pytest.approx(1.75) and bus_factor("allreduce", 2) == 1.0
    assert bus_factor("allgather", 4) == 0.75 and bus_factor("alltoall", 8) == 0.875
    assert bus_factor("broadcast", 16) == 1.0
    # 1 MB allreduce on 4 ranks; per iteration the slowest rank: 2 ms and 4 ms -> mean 3 ms, min 2 ms.
    s = summarize("allreduce", 10**6, 4, [[0.001, 0.004], [0.002, 0.001], [0.0015, 0.003]])
    assert s["time_mean_s"] == pytest.approx(0.003) and s["time_min_s"] == pytest.approx(0.002)
    assert s["algbw_gbs"] == pytest.approx(1 / 3) and s["busbw_gbs"] == pytest.approx(1 / 3 * 1.5)
    assert s["busbw_peak_gbs"] == pytest.approx(0.5 * 1.5)


def test_sizes_and_size_parsing() -> None:
    assert sizes(8, 1024, 2) == [8, 16, 32, 64, 128, 256, 512, 1024]
    assert sizes(8, 2**30, 2)[-1] == 2**30 and len(sizes(8, 2**30, 2)) == 28
    assert [byte_size(t) for t in ("8", "64K", "1M", "1G", "2MiB")] == [8, 65536, 2**20, 2**30, 2**21]


@pytest.mark.mpi
@pytest.mark.slow
def test_two_ranks_both_backends_correct_and_reported(tmp_path: Path, hvd_env: dict) -> None:
    out = tmp_path / "results"
    proc = subprocess.run([hvdbench_exe(), "run", "collectives", "--np", "2", "--launcher", "mpirun",
                           "--output", str(out), "--dtypes", "fp32,fp16", *SMALL],
                          capture_output=True, text=True, env=hvd_env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (run_dir,) = run_folders(out)
    records = [r for r in read_records(run_dir / "rank-1.jsonl") if r["kind"] == "comm"]
    measured = {(r["op"], r["backend"], r["dtype"]) for r in records if "times" in r}
    assert {("allreduce", "horovod", "fp32"), ("allreduce", "mpi", "fp32"), ("alltoall", "mpi", "fp16"),
            ("broadcast", "horovod", "fp16")} <= measured
    assert all(r["correct"] and len(r["times"]) == 5 and r["timing"] == "batch" and r["calls"] == 3
               for r in records if "times" in r)  # nccl-tests' way by default: 5 batches of --iters calls
    summary = next(r for r in read_records(run_dir / "rank-0.jsonl") if r["kind"] == "summary")
    assert set(summary["path_cost_s"]) == {"horovod", "mpi"} and 0 < summary["path_cost_s"]["mpi"] < 0.01
    assert any("16-bit float type to reduce" in r.get("skipped", "") for r in records)  # mpi allreduce fp16
    table = pd.read_csv(out / "report" / "collectives.csv")
    assert set(table["op"]) == {"allreduce", "allgather", "broadcast", "alltoall"}
    assert (table["busbw_gbs"] > 0).all()
    allgather = table[table["op"] == "allgather"]
    assert list(allgather["busbw_gbs"]) == pytest.approx(list(allgather["algbw_gbs"] * 0.5))
    report = (out / "report" / "report.md").read_text()
    assert "## Collectives" in report and "## Horovod against raw MPI" in report
    assert "![Collective bus bandwidth against message size](plot-1.svg)" in report
    assert (out / "report" / "plot-1.svg").stat().st_size > 1000
    assert "peak busbw GB/s" in proc.stdout and "back to back" in proc.stdout
    assert "a call's own cost (µs)" in report


@pytest.mark.slow
def test_gloo_run_skips_the_mpi_backend_and_says_why(tmp_path: Path, hvd_env: dict) -> None:
    proc = subprocess.run(["horovodrun", "-np", "2", "-H", "localhost:2", "--gloo", sys.executable,
                           str(REPO / "suite" / "collectives.py"), "--ops", "allreduce", *SMALL, "--timing", "each",
                           "--log-dir", str(tmp_path)], capture_output=True, text=True, env=hvd_env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:]
    records = [r for r in read_records(tmp_path / "rank-0.jsonl") if r["kind"] == "comm"]
    assert [r["skipped"] for r in records if r["backend"] == "mpi"] == [
        "raw MPI needs an MPI launcher (mpirun, mpiexec, srun --mpi, horovodrun --mpi): "
        "this rank was not started by one"]
    horovod = [r for r in records if r["backend"] == "horovod"]
    assert len(horovod) == len(sizes(8, 65536, 8)) and all(r["timing"] == "each" and len(r["times"]) == 3
                                                            for r in horovod)  # each call timed alone


def test_a_slow_call_moves_the_call_by_call_figure_but_not_the_batch_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    """One call 100 times slower than the others among 5 batches of 20: the figure of calls timed one by one
    (their mean) moves by about 2x; the batches' median does not move (nccl-tests' timing). The calls take their
    time on a clock of their own, so what is checked is the arithmetic, whatever else the machine runs."""
    from types import SimpleNamespace

    from hvdbench.suite import comm
    from hvdbench.suite.comm import Buffers, Case, measure, measure_batches
    from hvdbench.core.collective_ops import figure
    import torch

    now = [0.0]
    monkeypatch.setattr(comm, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    case = Case("allreduce", "horovod", "fp32", 64)
    buffers = Buffers(case, 0, 1, torch.device("cpu"), corrupt=False)
    result = buffers.expected.clone()

    def calls(slow_at: int | None) -> Callable[[], torch.Tensor]:
        count = [0]

        def call() -> torch.Tensor:
            count[0] += 1
            now[0] += 0.200 if count[0] == slow_at else 0.002
            return result
        return call

    def nothing() -> None:
        return None

    def each_figure(call: Callable[[], torch.Tensor]) -> float:
        return figure(np.array(measure(lambda _t: call(), buffers, case, rank=0, iters=100, warmup=0,
                                       barrier=nothing, sync=nothing)), "each")

    def batch_figure(call: Callable[[], torch.Tensor]) -> float:
        return figure(np.array(measure_batches(call, buffers, case, rank=0, iters=20, batches=5, warmup=0,
                                               barrier=nothing, sync=nothing)), "batch")

    each = {slow: each_figure(calls(slow)) for slow in (None, 50)}
    batch = {slow: batch_figure(calls(slow)) for slow in (None, 50)}
    assert each[50] / each[None] == pytest.approx(1.99, rel=0.01)  # (99 x 2 ms + 200 ms) / 100 against 2 ms
    assert batch[50] / batch[None] == pytest.approx(1.0)


@pytest.mark.parametrize("args, problem", [
    (["--timing", "each", "--batches", "3"], "--batches applies to --timing batch"),
    (["--pattern", "training", "--like", "x", "--timing", "each"], "the training pattern times whole steps"),
])
def test_timing_flags_that_do_not_go_together_are_refused(args: list[str], problem: str) -> None:
    from hvdbench.core.catalog import get_benchmark
    from hvdbench.core.errors import UsageError

    with pytest.raises(UsageError, match=problem):
        get_benchmark("collectives").check(args)


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.parametrize("backend", ["horovod", "mpi"])
def test_a_wrong_reduction_is_detected_and_reported(tmp_path: Path, hvd_env: dict, backend: str) -> None:
    out = tmp_path / "results"
    proc = subprocess.run([hvdbench_exe(), "run", "collectives", "--np", "2", "--launcher", "mpirun",
                           "--output", str(out), "--ops", "allreduce", "--backends", backend, *SMALL,
                           "--corrupt-rank", "1", "--timeout", "120"],
                          capture_output=True, text=True, env=hvd_env, timeout=300)
    assert proc.returncode == 1
    (run_dir,) = run_folders(out)
    status = json.loads((run_dir / "status.json").read_text())
    assert status["status"] == "failed"
    assert f"allreduce via {backend}, fp32, 8 B: wrong result on rank" in status["message"]
    assert "(expected 3, got 4)" in status["message"]


def test_bad_comm_flags_are_one_line_errors(tmp_path: Path) -> None:
    for args, text in ((["--ops", "allreduce,scan"], "unknown ops ['scan']"),
                       (["--min-bytes", "1M", "--max-bytes", "1K"], "--min-bytes 1048576 is above --max-bytes 1024"),
                       (["--max-bytes", "lots"], "expected a size such as 8, 64K, 1M, 1G")):
        proc = subprocess.run([hvdbench_exe(), "run", "collectives", *args, "--output", str(tmp_path / "o")],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1 and text in proc.stderr
