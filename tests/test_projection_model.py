"""The projection's arithmetic against hand-computed cases, and ``project`` on results written to known
alpha, beta and compute: it recovers them, projects what they imply, and refuses missing inputs in one line."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hvdbench.analysis.projection.allreduce_model import (Link, StepModel, curve_problem, fit_link, flat_allreduce_s,
                                               fusion_schedule, hierarchical_allreduce_s, parse_link, ring_allreduce_s)
from hvdbench.analysis.collect import collect
from hvdbench.analysis.projection.project import ERROR_PER_DOUBLING, project
from hvdbench.analysis.projection.shown import table_rows, write_projection
from hvdbench.cli import main as hvdbench_main
from hvdbench.core.errors import ReportError, UsageError
from hvdbench.core.records import RecordWriter, rank_log_name
from hvdbench.core.spec import RunSpec

ARGS = ("--model", "resnet20", "--batch-size", "32")


def test_ring_allreduce_time_is_2_p_minus_1_steps_of_alpha_plus_a_pth_of_the_bytes() -> None:
    link = Link("l", alpha_s=10e-6, beta_s=1e-9)  # 10 µs, 1 GB/s
    # 4 ranks, 8 MB: 2*3 steps of (10 µs + 2 MB at 1 GB/s = 2 ms)
    assert ring_allreduce_s(8e6, 4, link) == pytest.approx(6 * (10e-6 + 2e-3), rel=1e-12)
    assert ring_allreduce_s(8e6, 1, link) == 0.0
    assert link.gbs == pytest.approx(1.0)


def test_hierarchical_and_flat_allreduce_across_nodes_by_hand() -> None:
    intra, inter = Link("nv", 1e-6, 1e-11), Link("ib", 5e-6, 1e-10)  # 100 GB/s within, 10 GB/s per node between
    # 2 nodes x 4: reduce-scatter + allgather of 64 MB within (2*3 steps of 1 µs + 16 MB at 100 GB/s), and
    # across: 2*1 steps of 5 µs + (16 MB / 2 nodes) x 4 local ranks sharing the node's 10 GB/s
    within = 6 * (1e-6 + 16e6 * 1e-11)
    across = 2 * (5e-6 + 8e6 * 1e-10 * 4)
    assert hierarchical_allreduce_s(64e6, 2, 4, intra, inter) == pytest.approx(within + across, rel=1e-12)
    # one ring of 8 ranks at the pace of the slower link
    assert flat_allreduce_s(64e6, 2, 4, intra, inter) == pytest.approx(14 * (5e-6 + 8e6 * 1e-10), rel=1e-12)
    assert flat_allreduce_s(64e6, 2, 1, intra, inter) == pytest.approx(2 * (5e-6 + 32e6 * 1e-10), rel=1e-12)
    assert flat_allreduce_s(64e6, 1, 4, intra, None) == ring_allreduce_s(64e6, 4, intra)


@pytest.mark.parametrize("ranks", [2, 4, 8])
def test_a_link_fit_recovers_alpha_and_beta_from_a_ring_curve(ranks: int) -> None:
    truth = Link("t", 25e-6, 1 / 3e9)
    sizes = [2.0 ** k for k in range(10, 27)]
    fitted = fit_link(sizes, [ring_allreduce_s(s, ranks, truth) for s in sizes], ranks, "t")
    assert fitted.alpha_s == pytest.approx(truth.alpha_s, rel=1e-6)
    assert fitted.beta_s == pytest.approx(truth.beta_s, rel=1e-6)


def test_a_measured_link_costs_what_was_measured_and_scales_by_the_ring_formula() -> None:
    sizes, times = [1e3, 1e6, 1e7], [1e-3, 2e-3, 12e-3]  # a curve no straight line fits: flat, then steep
    link = fit_link(sizes, times, 2, "m")
    assert [ring_allreduce_s(s, 2, link) for s in sizes] == pytest.approx(times, rel=1e-9)
    assert ring_allreduce_s(math.sqrt(1e6 * 1e7), 2, link) == pytest.approx(math.sqrt(2e-3 * 12e-3), rel=1e-9)
    ratio = link.formula_s(1e6, 8) / link.formula_s(1e6, 2)
    assert ring_allreduce_s(1e6, 8, link) == pytest.approx(2e-3 * ratio, rel=1e-9)


def test_link_specs_parse_with_units_and_add_the_measured_software_latency() -> None:
    link = parse_link("ib400=50,2us", software=Link("intra", 30e-6, 1e-10))
    assert link.name == "ib400" and link.gbs == pytest.approx(50.0) and link.alpha_s == pytest.approx(32e-6)
    assert parse_link("eth=12.5,0.05ms").alpha_s == pytest.approx(50e-6)
    assert parse_link("x=1,3").alpha_s == pytest.approx(3e-6)  # a bare latency is in µs


@pytest.mark.parametrize("text", ["ib400", "ib=50", "=50,2us", "ib=fast,2us", "ib=-1,2us", "ib=0,2us",
                                  "ib=50,2parsecs", "ib=50,-2us", "ib=inf,2us", "ib=1e-300,2us", "ib=50,1e300us"])
def test_a_link_spec_that_does_not_parse_is_one_line(text: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_link(text)
    message = str(info.value)
    assert "\n" not in message and ("NAME=GB/s,latency" in message or "a link has" in message), message


def test_fusion_fills_buffers_up_to_the_threshold_when_everything_is_ready_at_once() -> None:
    buffers, end = fusion_schedule(10e6, 10, 0.06, 4e6, 1e-3, lambda b: b * 1e-9, overlaps=False)
    assert buffers == pytest.approx([4e6, 4e6, 2e6])
    assert end == pytest.approx(0.06 + 10e6 * 1e-9)


def test_step_bounds_and_the_overlap_a_measured_step_implies_by_hand() -> None:
    # 10 tensors ready every 6 ms over a 60 ms backward, each allreduce 1 ms: reduced one by one as they come
    model = StepModel(compute_s=0.100, backward_s=0.060, grad_bytes=10e6, tensors=10, fusion_bytes=64e6, cycle_s=1e-3)
    exchange, full, none = model.bounds(lambda b: 1e-3)
    assert exchange == pytest.approx(10e-3 + 0.5e-3)          # ten allreduces + half a cycle
    assert none == pytest.approx(0.1105)
    assert full == pytest.approx(0.100 + 1e-3 + 0.5e-3)       # only the last allreduce sticks out
    assert model.overlap_of(lambda b: 1e-3, 0.106) == pytest.approx((0.1105 - 0.106) / (0.1105 - 0.1015))
    assert model.step_s(lambda b: 1e-3, 0.5) == pytest.approx((0.1105 + 0.1015) / 2)
    # one tensor ready at the end of backward cannot overlap: both bounds agree
    one = StepModel(compute_s=0.100, backward_s=0.060, grad_bytes=4e6, tensors=1, cycle_s=1e-3)
    _, full, none = one.bounds(lambda b: 10e-3)
    assert full == pytest.approx(none) == pytest.approx(0.1105)


# --- project() on written results: compute 100 ms, 4 MB of gradients in one tensor, alpha/beta known ---------

INTRA, INTER = Link("intra", 10e-6, 1e-9), Link("inter", 50e-6, 1e-8)  # 1 GB/s within, 0.1 GB/s between nodes
COMPUTE, PARAMS = 0.100, 1_000_000


def _training(root: Path, np_: int, step_s: float, *, independent: bool = False, nodes: int = 1,
              tensors: int = 1, extra: tuple[str, ...] = ()) -> None:
    spec = RunSpec(benchmark="cifar10", args=ARGS + (("--independent",) if independent else ()) + extra, np=np_,
                   nodes=nodes)
    run_dir = root / spec.id
    spec.write(run_dir)
    rng = np.random.default_rng(np_ + 10 * independent)
    for rank in range(np_):
        with RecordWriter(run_dir / rank_log_name(rank), rank=rank, local_rank=rank, size=np_) as w:
            w.write("env", benchmark="cifar10", model="resnet20", unit="images", parameters=PARAMS,
                    gradient_tensors=tensors,
                    flags={"batch_size": 32, **({"exchange": extra[-1]} if extra else {})})
            w.write("phase", phase="timed", steps=30)
            for i in range(30):
                duration = step_s * (1 + rng.normal(0, 0.002))
                w.write("step", step=i, warmup=False, duration=duration, samples=32, loss=1.0)
            w.write("summary", steps=30, samples=960)


def _collectives(root: Path, link: Link, nodes: int) -> None:
    spec = RunSpec(benchmark="collectives", args=("--ops", "allreduce"), np=2, nodes=nodes)
    run_dir = root / spec.id
    spec.write(run_dir)
    for rank in range(2):
        with RecordWriter(run_dir / rank_log_name(rank), rank=rank, local_rank=rank, size=2) as w:
            w.write("env", benchmark="collectives", model="collectives", unit="GB/s")
            for k in range(10, 25, 2):
                t = ring_allreduce_s(2.0 ** k, 2, link)  # each call first waits a 1 ms cycle
                jitter = 1e-4 * nodes  # two curves are two measurements, never the same times (they would be a copy)
                w.write("comm", op="allreduce", backend="horovod", dtype="fp32", bytes=2 ** k, elements=2 ** k // 4,
                        times=[1e-3 + t * (1 + 0.001 * i + jitter) for i in range(5)], correct=True)
            w.write("summary", cases=8, skipped=0)


def _results(root: Path, *, twin: bool = True, inter: bool = True) -> Path:
    exchange = ring_allreduce_s(4e6, 2, INTRA) + 0.5e-3  # one 4 MB buffer at 2 ranks, half a 1 ms cycle
    _training(root, 1, COMPUTE)
    _training(root, 2, COMPUTE + exchange)
    if twin:
        _training(root, 2, COMPUTE, independent=True)
    _collectives(root, INTRA, 1)
    if inter:
        _collectives(root, INTER, 2)
    return root


def test_project_recovers_the_links_and_projects_what_they_imply(tmp_path: Path) -> None:
    result = project(collect([_results(tmp_path)]), nodes=[1, 2, 4], gpus_per_node=1, algorithms=("ring",))
    links = result.links.set_index("kind")
    assert links.loc["intra", "alpha_us"] == pytest.approx(10.0, rel=0.02)
    assert links.loc["intra", "gbs"] == pytest.approx(1.0, rel=0.02)
    assert links.loc["inter", "alpha_us"] == pytest.approx(50.0, rel=0.02)
    assert links.loc["inter", "gbs"] == pytest.approx(0.1, rel=0.02)
    rows = result.table.set_index("nodes")
    for nodes in (2, 4):  # a ring of 4 MB over `nodes` ranks, one per node, on the inter-node link
        expected = COMPUTE + ring_allreduce_s(4e6, nodes, INTER) + 0.5e-3
        assert rows.loc[nodes, "step_ms"] == pytest.approx(expected * 1e3, rel=0.01)
        assert rows.loc[nodes, "efficiency"] == pytest.approx(COMPUTE / expected, rel=0.02)
        assert rows.loc[nodes, "efficiency_low"] <= rows.loc[nodes, "efficiency"] <= rows.loc[nodes, "efficiency_high"]
    assert rows.loc[1, "efficiency"] == pytest.approx(1.0, rel=0.01)


def test_project_with_a_what_if_link_needs_no_cross_node_curve(tmp_path: Path) -> None:
    result = project(collect([_results(tmp_path, inter=False)]), nodes=[2], gpus_per_node=2, links=["ib=25,2us"])
    assert set(result.table["link"]) == {"ib"} and set(result.table["algorithm"]) == {"ring", "hierarchical"}
    ring = result.table.set_index("algorithm").loc["ring"]
    what_if = Link("ib", INTRA.alpha_s + 2e-6, 1 / 25e9)  # the measured software latency + 2 µs
    slower = max(ring_allreduce_s(4e6, 4, INTRA), ring_allreduce_s(4e6, 4, what_if))  # the ring's pace
    assert ring["exchange_ms"] == pytest.approx((slower + 0.5e-3) * 1e3, rel=0.01)


@pytest.mark.parametrize("case, words", [
    (dict(twin=False), "--independent twin"),
    (dict(inter=False), "across nodes"),
])
def test_a_projection_without_its_inputs_names_the_run_to_add(tmp_path: Path, case: dict, words: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    root = _results(tmp_path / "r", **case)
    with pytest.raises(ReportError, match=words):
        project(collect([root]), nodes=[1, 2])
    assert hvdbench_main(["project", str(root), "--nodes", "1,2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and words in err


def test_bad_node_counts_and_link_specs_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _results(tmp_path)
    for argv, words in ((["--nodes", "0"], "--nodes"), (["--link", "ib=fast"], "NAME=GB/s,latency")):
        assert hvdbench_main(["project", str(root), *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and words in err, err
    only_two = tmp_path / "two"
    _training(only_two, 2, 0.2, nodes=2)
    _training(only_two, 2, 0.1, nodes=2, independent=True)
    with pytest.raises(ReportError, match="below the 2 node"):
        project(collect([only_two]), nodes=[1, 2])


def test_project_writes_a_section_a_table_and_a_plot(tmp_path: Path) -> None:
    text, paths = write_projection([_results(tmp_path / "r")], tmp_path / "out", [1, 2, 8], gpus_per_node=1,
                                   links=["slow=0.05,100us"])
    assert "overlap" in text and "measured between nodes" in text and "slow" in text
    assert paths["plot"].read_text().startswith("<svg") and "## Projection" in paths["markdown"].read_text()
    import pandas as pd

    table = pd.read_csv(paths["csv"])
    assert set(table["nodes"]) == {1, 2, 8} and math.isfinite(table["throughput"].sum())


# --- refusing to guess ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("sizes, times, words", [
    ([1e3, 1e6], [1e-4, 1e-3], "a link fit needs 3 or more"),
    ([1e3, 1e5, 1e7], [5e-3, 2e-3, 1e-3], "times fall as sizes grow"),
    ([1e3, 1e5, 1e7], [1e-6, 1.0000001e-6, 1.0000002e-6], "which no link has"),
    ([1e3, 1e5, 1e7], [0.5, 0.6, 0.7], "which no link has"),
])
def test_a_curve_no_link_could_give_is_refused_with_its_reason(sizes: list[float], times: list[float],
                                                               words: str) -> None:
    assert words in (curve_problem(sizes, times, 2) or "")


def test_a_plausible_curve_passes() -> None:
    sizes = [2.0 ** k for k in range(10, 25, 2)]
    assert curve_problem(sizes, [ring_allreduce_s(s, 2, INTRA) for s in sizes], 2) is None


def test_a_projection_from_a_curve_of_two_sizes_is_one_line_naming_the_run(tmp_path: Path) -> None:
    root = _results(tmp_path, inter=False)
    run_dir = next(d for d in root.iterdir() if d.name.startswith("collectives"))
    for rank in range(2):  # the same run measured at two sizes only
        lines = (run_dir / rank_log_name(rank)).read_text().splitlines()
        keep = [line for line in lines if '"kind": "comm"' not in line.replace('"kind":"comm"', '"kind": "comm"')]
        comm = [line for line in lines if line not in keep][:2]
        (run_dir / rank_log_name(rank)).write_text("\n".join(keep[:-1] + comm + keep[-1:]) + "\n")
    with pytest.raises(ReportError, match=r"allreduce curve .*: 2 message size\(s\): a link fit needs 3"):
        project(collect([root]), nodes=[1, 2], links=["ib=25,2us"])


def test_node_counts_beyond_any_system_and_links_named_twice_are_one_line(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    root = _results(tmp_path)
    for argv, words in ((["--nodes", "1,1000000000"], "beyond 65,536 nodes"),
                        (["--link", "ib=25,2us", "--link", "ib=50,1us"], "--link ib given twice")):
        assert hvdbench_main(["project", str(root), *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and words in err, err


def test_rows_beyond_the_measured_node_counts_say_so_and_widen_their_interval(tmp_path: Path) -> None:
    result = project(collect([_results(tmp_path)]), nodes=[1, 2, 16], gpus_per_node=1, algorithms=("ring",))
    rows = result.table.set_index("nodes")
    assert math.isnan(rows.loc[1, "extrapolated_x"])  # the training runs were measured on one node
    assert rows.loc[2, "extrapolated_x"] == 2 and rows.loc[16, "extrapolated_x"] == 16
    for nodes, doublings in ((2, 1), (16, 4)):
        row = rows.loc[nodes]
        assert row["efficiency_high"] / row["efficiency"] > 1 + ERROR_PER_DOUBLING * doublings * 0.99
    assert "extrapolated ×16" in " ".join(" ".join(r) for r in table_rows(result.table)[1])


def test_the_overlap_comes_from_the_run_across_nodes_where_there_is_one(tmp_path: Path) -> None:
    """Gradients in 100 tensors (so overlap is possible): the 1-node run shows its exchange hidden, the 2-node
    run shows it not hidden at all; with the 2-node run measured, its overlap is the one used."""
    def results(root: Path, across: bool) -> Path:
        _training(root, 1, COMPUTE, tensors=100)
        _training(root, 2, COMPUTE, tensors=100)  # everything hidden within the node
        _training(root, 2, COMPUTE, independent=True, tensors=100)
        _collectives(root, INTRA, 1)
        _collectives(root, INTER, 2)
        if across:
            _training(root, 2, COMPUTE + ring_allreduce_s(4e6, 2, INTER) + 0.5e-3, nodes=2, tensors=100)
        return root

    within = project(collect([results(tmp_path / "a", False)]), nodes=[2], gpus_per_node=1, algorithms=("ring",))
    ((_, (phi_within, _, _, how_within)),) = within.overlap.items()
    assert "within one node" in how_within
    across = project(collect([results(tmp_path / "b", True)]), nodes=[2], gpus_per_node=1, algorithms=("ring",))
    ((_, (phi_across, _, _, how_across)),) = across.overlap.items()
    assert "across nodes from 2 rank(s) on 2 node(s)" in how_across and "1 node" not in how_across
    assert phi_within > 0.7 and phi_across < phi_within - 0.5


def test_a_sharded_exchange_or_a_parameter_server_is_not_projected_as_an_allreduce(tmp_path: Path) -> None:
    sharded = tmp_path / "fsdp"  # FSDP's runs alone (no 1-rank run, which would project Horovod's exchange)
    _training(sharded, 2, COMPUTE * 1.5, extra=("--exchange", "fsdp"))
    _training(sharded, 2, COMPUTE, independent=True)
    _collectives(sharded, INTRA, 1)
    _collectives(sharded, INTER, 2)
    with pytest.raises(ReportError, match="exchange.s. fsdp cannot be projected"):
        project(collect([sharded]), nodes=[1, 2])
    both = _results(tmp_path / "both")
    _training(both, 2, COMPUTE * 1.5, extra=("--exchange", "ps"))
    result = project(collect([both]), nodes=[1, 2], gpus_per_node=1, algorithms=("ring",))
    assert [w.label for w in result.workloads] == ["cifar10 resnet20 batch 32 fp32"]  # Horovod's alone
    assert any("exchange ps left out" in line for line in result.workloads[0].inputs)
