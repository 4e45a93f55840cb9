"""``project --batch-per-gpu`` and ``--global-batch``: a workload projected at the batch a GPU will have at each node
count. Results written to a known compute curve (a 1-rank batch sweep at 16, 32 and 64 samples, compute
``k * b^0.75``), a 2-rank run at 32 and known links: the curve is recovered, each row's compute is the curve's at its
batch and its exchange the measured one's, a global batch gives each node count its share (less than one sample a
GPU: said, not projected), rows beyond the batches measured widen by the track record's error per e-fold of the
batch and say so, and one batch measured is taken as linear and said."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hvdbench.analysis.collect import collect
from hvdbench.analysis.projection.allreduce_model import ring_allreduce_s
from hvdbench.analysis.projection.at_batch import BatchAsked
from hvdbench.analysis.projection.backtest import calibration
from hvdbench.analysis.projection.project import project
from hvdbench.analysis.projection.shown import table_rows
from hvdbench.cli import main as hvdbench_main
from hvdbench.core.records import RecordWriter, rank_log_name
from hvdbench.core.spec import RunSpec

from test_projection_model import INTER, INTRA, PARAMS, _collectives

K, P = 0.004, 0.75  # compute: 4 ms x batch^0.75 (at 32: 53.8 ms)


def _compute(batch: int) -> float:
    return K * batch ** P


def _run(root: Path, np_: int, batch: int, step_s: float, independent: bool = False) -> None:
    args = ("--model", "resnet20", "--batch-size", str(batch), *(("--independent",) if independent else ()))
    spec = RunSpec(benchmark="cifar10", args=args, np=np_, nodes=1)
    spec.write(root / spec.id)
    rng = np.random.default_rng(batch + np_)
    for rank in range(np_):
        with RecordWriter(root / spec.id / rank_log_name(rank), rank=rank, local_rank=rank, size=np_) as w:
            w.write("env", benchmark="cifar10", model="resnet20", unit="images", parameters=PARAMS,
                    gradient_tensors=1, flags={"batch_size": batch})
            w.write("phase", phase="timed", steps=30)
            for i in range(30):
                w.write("step", step=i, warmup=False, duration=step_s * (1 + rng.normal(0, 0.002)), samples=batch,
                        loss=1.0)
            w.write("summary", steps=30, samples=30 * batch)


def _results(root: Path, sweep: tuple[int, ...] = (16, 32, 64)) -> Path:
    for batch in sweep:
        _run(root, 1, batch, _compute(batch))
    _run(root, 2, 32, _compute(32) + ring_allreduce_s(4e6, 2, INTRA) + 0.5e-3)
    _collectives(root, INTRA, 1)
    _collectives(root, INTER, 2)
    return root


def test_each_row_computes_at_its_batch_from_the_fitted_curve(tmp_path: Path) -> None:
    result = project(collect([_results(tmp_path)]), nodes=[1, 2, 4], gpus_per_node=1, algorithms=("ring",),
                     batch=BatchAsked(per_gpu=128))
    rows = result.table.set_index("nodes")
    assert set(rows["workload"]) == {"cifar10 resnet20 batch 128 a GPU fp32"}  # one family, not one a batch
    assert (rows["batch_per_gpu"] == 128).all()
    for nodes in (2, 4):
        expected = _compute(128) + ring_allreduce_s(4e6, nodes, INTER) + 0.5e-3
        assert rows.loc[nodes, "step_ms"] == pytest.approx(expected * 1e3, rel=0.01)
        assert rows.loc[nodes, "throughput"] == pytest.approx(nodes * 128 / expected, rel=0.01)
        assert rows.loc[nodes, "efficiency"] == pytest.approx(_compute(128) / expected, rel=0.02)  # one GPU at 128
    inputs = " ".join(w_input for w in result.workloads for w_input in w.inputs)
    assert "x batch^0.75, fitted from the batches measured: 16" in inputs
    # 128 is one doubling (ln 2) beyond the largest batch measured: the track record's error per e-fold of it
    assert rows.loc[2, "batch_e"] == pytest.approx(math.log(2))
    inside = project(collect([tmp_path]), nodes=[2], gpus_per_node=1, algorithms=("ring",),
                     batch=BatchAsked(per_gpu=64)).table.iloc[0]
    wide = rows.loc[2, "throughput_high"] / rows.loc[2, "throughput"]
    narrow = inside["throughput_high"] / inside["throughput"]
    assert wide / narrow == pytest.approx(math.exp(1.96 * calibration().per_batch_e * math.log(2)), rel=0.05)
    header, cells = table_rows(result.table)
    assert "batch a GPU" in header and any("x2 from the nearest measured" in c[-1] for c in cells)


def test_a_global_batch_is_shared_by_each_node_counts_gpus(tmp_path: Path) -> None:
    result = project(collect([_results(tmp_path)]), nodes=[1, 2, 4, 8], gpus_per_node=1, algorithms=("ring",),
                     batch=BatchAsked(global_batch=96))
    rows = result.table.set_index("nodes")
    assert list(rows["batch_per_gpu"]) == [96, 48, 24, 12]
    for nodes, each in ((2, 48), (4, 24), (8, 12)):
        expected = _compute(each) + ring_allreduce_s(4e6, nodes, INTER) + 0.5e-3
        assert rows.loc[nodes, "step_ms"] == pytest.approx(expected * 1e3, rel=0.01)
        assert rows.loc[nodes, "throughput"] == pytest.approx(96 / expected, rel=0.01)
    # strong scaling: the speedup is against one GPU doing the whole global batch, so what a shrinking share
    # costs is in the efficiency
    assert rows.loc[1, "efficiency"] == pytest.approx(1.0, rel=1e-6)
    for nodes in (2, 4, 8):
        assert rows.loc[nodes, "speedup"] == pytest.approx(rows.loc[nodes, "throughput"] / (96 / _compute(96)),
                                                           rel=0.01)
    assert rows.loc[8, "efficiency"] < rows.loc[4, "efficiency"] < rows.loc[2, "efficiency"] < 1
    few = project(collect([tmp_path]), nodes=[1, 2, 4], gpus_per_node=1, algorithms=("ring",),
                  batch=BatchAsked(global_batch=3))
    assert list(few.table["nodes"]) == [1, 2]  # 4 GPUs would take less than one sample each
    assert any("less than one sample a GPU at 4 node(s)" in n for n in few.notes)
    assert any("global batch 3 over 2 GPUs (2 node(s)): 1 a GPU, 2 in all" in n for n in few.notes)


def test_one_batch_measured_is_taken_as_linear_and_said(tmp_path: Path) -> None:
    result = project(collect([_results(tmp_path, sweep=(32,))]), nodes=[2], gpus_per_node=1, algorithms=("ring",),
                     batch=BatchAsked(per_gpu=64))
    row = result.table.iloc[0]
    assert row["step_ms"] == pytest.approx((2 * _compute(32) + ring_allreduce_s(4e6, 2, INTER) + 0.5e-3) * 1e3,
                                           rel=0.01)
    assert any("compute at another batch taken as linear in it" in i for w in result.workloads for i in w.inputs)


@pytest.mark.bad_input
@pytest.mark.parametrize("argv, words", [
    (["--batch-per-gpu", "0"], "--batch-per-gpu"),
    (["--batch-per-gpu", "8", "--global-batch", "64"], "not allowed with"),
    (["--global-batch", str(1 << 30)], "at most 16,777,216 samples"),
    (["--backtest", "--global-batch", "64"], "not with --backtest"),
])
def test_batch_flags_refused_in_one_line(tmp_path: Path, argv: list[str], words: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert hvdbench_main(["project", str(_results(tmp_path / "r")), "--gpus-per-node", "1", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0], err
