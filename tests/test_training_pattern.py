"""The collectives benchmark's training pattern (--pattern training --like RUN): the run's gradients read and
scaled, its flags refused in one line where they contradict it, a real 2-rank run that issues them through
Horovod, and the projection fitting its link from that curve while showing the isolated one beside it."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

import pytest

from conftest import hvdbench_exe, run_folders
from hvdbench.analysis.projection.allreduce_model import Link, fit_link, ring_allreduce_s, step_allreduce
from hvdbench.analysis.collect import collect
from hvdbench.analysis.tables.comm import comm_table
from hvdbench.analysis.projection.project import project
from hvdbench.core.collective_ops import comm_parser, check_comm_flags
from hvdbench.core.errors import UsageError
from hvdbench.core.records import RecordWriter, rank_log_name, read_records
from hvdbench.core.spec import RunSpec
from hvdbench.core.training_pattern import pattern_totals, read_like, scaled

from test_projection_model import COMPUTE, INTER, INTRA, _collectives, _results

LIKE_SIZES = [10, 2560, 256, 65536]


def _like_run(root: Path, sizes: list[int] | None = LIKE_SIZES) -> Path:
    spec = RunSpec(benchmark="mlp", args=("--batch-size", "4"), np=1)
    spec.write(root / spec.id)
    with RecordWriter(root / spec.id / rank_log_name(0), rank=0, local_rank=0, size=1) as w:
        extra = {} if sizes is None else {"gradient_sizes": sizes}
        w.write("env", benchmark="mlp", model="mlp", unit="samples", flags={"batch_size": 4}, **extra)
    return root / spec.id


def _flags(*argv: str) -> argparse.Namespace:
    flags = comm_parser().parse_args(list(argv))
    check_comm_flags(flags)
    return flags


def test_the_pattern_reads_the_runs_gradients_and_scales_them_to_each_size(tmp_path: Path) -> None:
    run = _like_run(tmp_path)
    assert read_like(str(run)) == (LIKE_SIZES, run.name, "mlp mlp batch 4")
    assert read_like(str(run / rank_log_name(0)))[0] == LIKE_SIZES  # a rank log names the run as well
    assert scaled(LIKE_SIZES, 2 * sum(LIKE_SIZES)) == [2 * n for n in LIKE_SIZES]
    assert scaled(LIKE_SIZES, 100) == [1, 3, 1, 95]  # each keeps its share, at least one element
    # the run's own total (68,362 elements) and each curve size: 4K, 64K (in fp32 elements)
    assert pattern_totals(LIKE_SIZES, 4096, 65536, 16, 4) == [1024, 16384, sum(LIKE_SIZES)]
    flags = _flags("--pattern", "training", "--like", str(run))
    assert (flags.ops, flags.backends, flags.gradient_sizes) == (["allreduce"], ["horovod"], LIKE_SIZES)
    assert _flags().ops == ["allreduce", "allgather", "broadcast", "alltoall"]  # isolated: every op, as before


@pytest.mark.parametrize("argv, words", [
    (["--pattern", "training"], "needs --like RUN"),
    (["--like", "x"], "give --pattern training"),
    (["--pattern", "training", "--like", "{run}", "--ops", "allgather"], "--ops allreduce --backends horovod"),
    (["--pattern", "training", "--like", "{missing}"], "cannot read"),
    (["--pattern", "training", "--like", "{old}"], "has no gradient_sizes"),
])
def test_a_pattern_that_contradicts_itself_or_names_no_training_run_is_one_line(tmp_path: Path, argv: list[str],
                                                                                words: str) -> None:
    paths = {"run": _like_run(tmp_path / "a"), "old": _like_run(tmp_path / "b", None), "missing": tmp_path / "none"}
    with pytest.raises(UsageError, match=words) as caught:
        _flags(*[a.format(**paths) for a in argv])
    assert "\n" not in str(caught.value)


@pytest.mark.slow
def test_a_training_pattern_issues_the_runs_gradients_through_horovod(tmp_path: Path) -> None:
    """A tiny MLP trained, then its gradients allreduced as its steps do on 2 ranks; every record checked."""
    common = ["--np", "1", "--no-report", "--steps", "3", "--warmup-steps", "1"]
    mlp = ["--mlp-input", "32", "--mlp-widths", "64", "--batch-size", "4"]
    subprocess.run([hvdbench_exe(), "run", "mlp", *common, "-o", str(tmp_path / "mlp"), *mlp], check=True,
                   capture_output=True, timeout=300)
    (like,) = run_folders(tmp_path / "mlp")
    sizes = next(r for r in read_records(like / rank_log_name(0)) if r["kind"] == "env")["gradient_sizes"]
    assert sizes == [10, 640, 64, 2048]  # output bias and weight, then the hidden layer's: backward's order
    done = subprocess.run([hvdbench_exe(), "run", "collectives", "--np", "2", "--no-report", "-o", str(tmp_path / "c"),
                           "--pattern", "training", "--like", str(like), "--min-bytes", "1K", "--max-bytes", "64K",
                           "--factor", "64", "--iters", "3", "--warmup-iters", "1"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-1500:]
    (run,) = run_folders(tmp_path / "c")
    for rank in range(2):
        comm = [r for r in read_records(run / rank_log_name(rank)) if r["kind"] == "comm"]
        # 1K, 64K and the run's own 2,762 elements (11,048 B), each 3 steps of 4 tensors
        assert [r["bytes"] for r in comm] == [1024, 4 * sum(sizes), 65536]
        assert all(r["pattern"] == "training" and r["tensors"] == 4 and r["correct"] and len(r["times"]) == 3
                   and r["like"] == like.name and r["like_workload"] == "mlp mlp batch 4" for r in comm)
    paths = set(comm_table(collect([tmp_path / "c"]))["path"])
    assert paths == {"Horovod (gloo), training pattern of mlp mlp batch 4"}


def _pattern_curve(root: Path, link: Link, nodes: int) -> None:
    """A training-pattern curve of the projection test's workload at ``link``: each step waits half a cycle."""
    spec = RunSpec(benchmark="collectives", args=("--pattern", "training"), np=2, nodes=nodes)
    spec.write(root / spec.id)
    for rank in range(2):
        with RecordWriter(root / spec.id / rank_log_name(rank), rank=rank, local_rank=rank, size=2) as w:
            w.write("env", benchmark="collectives", model="collectives", unit="GB/s")
            for k in range(10, 25, 2):
                t = ring_allreduce_s(2.0 ** k, 2, link)
                w.write("comm", op="allreduce", backend="horovod", dtype="fp32", bytes=2 ** k, elements=2 ** k // 4,
                        times=[0.5e-3 + t * (1 + 0.001 * i) for i in range(5)], correct=True, pattern="training",
                        tensors=1, like="cifar10-np1", like_workload="cifar10 resnet20 batch 32")
            w.write("summary", cases=8, skipped=0)


def test_in_a_training_pattern_each_buffer_costs_its_share_of_the_streamed_step() -> None:
    """Fitted from isolated calls, a 1 MB buffer costs what a 1 MB call costs (its own latency and burst);
    fitted from a training pattern, a quarter of a 4 MB step costs a quarter of that step, at 2 and 4 nodes."""
    sizes = [2.0 ** k for k in range(12, 25, 2)]
    times = [1e-3 + ring_allreduce_s(b, 2, INTER) for b in sizes]
    isolated, stream = fit_link(sizes, times, 2, "inter"), fit_link(sizes, times, 2, "inter", stream=True)
    for nodes in (2, 4):
        whole = ring_allreduce_s(4e6, nodes, isolated)
        assert step_allreduce("ring", nodes, 1, None, stream, 4e6)(1e6) == pytest.approx(whole / 4)
        assert step_allreduce("ring", nodes, 1, None, isolated, 4e6)(1e6) == ring_allreduce_s(1e6, nodes, isolated)
        assert ring_allreduce_s(1e6, nodes, isolated) > whole / 4  # a lone message pays its latency


def test_the_projection_fits_its_link_from_the_training_pattern_and_shows_both(tmp_path: Path) -> None:
    """Isolated calls across nodes at 0.1 GB/s, the training pattern at 0.5 GB/s: the pattern's link is the
    one projected from, the isolated one a row marked not used."""
    root = _results(tmp_path)
    faster = Link("pattern", 20e-6, 2e-9)
    _pattern_curve(root, faster, 2)
    result = project(collect([root]), nodes=[2], gpus_per_node=1, algorithms=("ring",))
    links = result.links.set_index("link")
    assert links.loc["measured between nodes", "gbs"] == pytest.approx(0.5, rel=0.02)
    assert "training pattern of cifar10 resnet20 batch 32" in links.loc["measured between nodes", "source"]
    assert links.loc["measured between nodes (not used)", "gbs"] == pytest.approx(0.1, rel=0.02)
    assert "isolated calls" in links.loc["measured between nodes (not used)", "source"]
    step = result.table.set_index("nodes").loc[2, "step_ms"]
    assert step == pytest.approx((COMPUTE + ring_allreduce_s(4e6, 2, faster) + 0.5e-3) * 1e3, rel=0.01)


def test_an_overlap_fitted_at_one_link_projects_another(tmp_path: Path) -> None:
    """The overlap fitted from one collection's runs is the one a second projection uses, with its source."""
    fitted = project(collect([_results(tmp_path / "a")]), nodes=[2], gpus_per_node=1, algorithms=("ring",))
    given = {label: (0.8, draws * 0 + 0.8, "given") for label, (_, draws, _) in fitted.fitted_overlap().items()}
    other = tmp_path / "b"
    _results(other, inter=False)
    _collectives(other, INTRA, 2)  # another link between nodes
    result = project(collect([other]), nodes=[2], gpus_per_node=1, algorithms=("ring",), overlaps=given)
    assert {how for *_, how in result.overlap.values()} == {"given"}
    assert set(result.table["overlap"]) == {0.8}
