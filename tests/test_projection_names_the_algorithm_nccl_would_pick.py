"""The collective algorithm on record in a projection from one's own runs: tree's latency grows with log2 of the
nodes where a ring's grows with every rank, NVLS and CollNet exist only where a target's fabric has them, NCCL's pick
is the fastest by the same costs and each row names it, and a link fitted where NCCL could play tree's best case
(two nodes, no NCCL_ALGO=Ring) is said on the row."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from hvdbench.analysis.collect import collect
from hvdbench.analysis.projection.allreduce_model import (ALGORITHMS, COLLNET_RADIX, NVLS_GAIN, Fabric, Link,
                                                          flat_allreduce_s, nccl_pick, ring_allreduce_s,
                                                          tree_allreduce_s)
from hvdbench.analysis.projection.inputs import Curve, pick_curve
from hvdbench.analysis.projection.project import _link_note, project
from hvdbench.analysis.projection.shown import algorithm_cell, table_rows
from hvdbench.analysis.projection.target import load_target, parse_target
from hvdbench.cli import main as hvdbench_main
from hvdbench.core.errors import UsageError

from test_projection_model import _results

INTRA, INTER = Link("nv", 3e-6, 1 / 360e9), Link("ib", 5e-6, 1 / 400e9)  # a DGX H100's figures


def test_a_tree_pays_log2_of_the_nodes_in_latency_and_every_byte_twice() -> None:
    # 64 nodes x 8: 2 (log2 64 · 5 µs + 7 · 3 µs) and 2 · 1 MB over the slower link (NVLink's 360 GB/s per GPU)
    expected = 2 * (6 * 5e-6 + 7 * 3e-6) + 2 * 1e6 / 360e9
    assert tree_allreduce_s(1e6, 64, 8, INTRA, INTER) == pytest.approx(expected, rel=1e-12)
    assert tree_allreduce_s(1e6, 1, 8, INTRA, None) == ring_allreduce_s(1e6, 8, INTRA)  # NCCL rings in one node
    # the ring's latency grows with every rank: at 1,024 nodes it is hundreds of times the tree's
    assert flat_allreduce_s(1e3, 1024, 8, INTRA, INTER) > 300 * tree_allreduce_s(1e3, 1024, 8, INTRA, INTER)


def test_nccl_picks_the_fastest_of_the_fabrics_algorithms_by_their_costs() -> None:
    plain, full = Fabric(), Fabric(nvls=True, collnet=True)
    assert plain.algorithms() == ("ring", "tree") and full.algorithms() == ("ring", "tree", "nvls", "collnet")
    for nodes in (2, 16, 1024):
        for nbytes in (1e3, 1e6, 1e8):
            for fabric in (plain, full):
                pick = nccl_pick(nbytes, nodes, 8, INTRA, INTER, fabric)
                times = {a: ALGORITHMS[a](nbytes, nodes, 8, INTRA, INTER) for a in fabric.algorithms()}
                assert pick in fabric.algorithms() and times[pick] == min(times.values())
    assert nccl_pick(1e3, 1024, 8, INTRA, INTER) == "tree"
    assert nccl_pick(1e8, 1, 8, INTRA, None) == "ring" and nccl_pick(1e8, 1, 8, INTRA, None, full) == "nvls"


def test_nvls_gains_what_nccls_maintainers_measured_and_collnet_a_switch_level_not_a_node() -> None:
    # one 8-GPU board, 1 GB: the ring's bandwidth term over NVLS's is the 30% (480 against 370 GB/s bus bandwidth)
    ring, nvls = ALGORITHMS["ring"](1e9, 1, 8, INTRA, None), ALGORITHMS["nvls"](1e9, 1, 8, INTRA, None)
    assert ring / nvls == pytest.approx(NVLS_GAIN, rel=0.01)
    # CollNet's latency is a switch level each way: the same from 33 to 1,024 nodes (two levels of 32)
    small = [ALGORITHMS["collnet"](8.0, n, 1, INTER, INTER) for n in (COLLNET_RADIX + 1, COLLNET_RADIX ** 2)]
    assert small[0] == pytest.approx(small[1], rel=1e-9)
    assert ALGORITHMS["tree"](8.0, 1024, 1, INTER, INTER) > small[1]


def test_a_target_says_which_of_nvls_and_collnet_its_fabric_has(tmp_path: Path) -> None:
    dgx = load_target("dgx-h100")
    assert dgx.nccl_fabric() == Fabric(nvls=True, collnet=False) and "NVLS" in dgx.describe()
    assert load_target("hgx-a100").nccl_fabric() == Fabric()
    text = (Path(dgx.source).read_text(encoding="utf-8").replace("nvls = true", 'nvls = "yes"'))
    with pytest.raises(UsageError, match=r"intra_node\.nvls = 'yes': expected true or false"):
        parse_target(text, "t.toml")
    assert Fabric().refuses("nvls") and Fabric().refuses("collnet") and Fabric().refuses("tree") is None


def test_a_forced_nvls_without_a_fabric_that_has_it_is_refused_in_one_line(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    root = _results(tmp_path / "r")
    assert hvdbench_main(["project", str(root), "--algorithm", "nvls", "--gpus-per-node", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--algorithm nvls" in err[0] and "nvls = true" in err[0]


def test_every_projected_row_names_the_algorithm_and_nccls_pick(tmp_path: Path) -> None:
    collection = collect([_results(tmp_path)])
    chosen = project(collection, nodes=[1, 2, 64], gpus_per_node=1, algorithms=("nccl",))
    table = chosen.table.set_index("nodes")
    assert set(chosen.table["algorithm"]) == {"nccl"} and table.loc[64, "runs_as"] == "tree"
    forced = project(collection, nodes=[1, 2, 64], gpus_per_node=1, algorithms=("ring", "tree"))
    by = forced.table.set_index(["nodes", "algorithm"])
    # NCCL's pick costs no more than either algorithm forced, and at 64 nodes it is the tree's figure
    for nodes in (2, 64):
        assert table.loc[nodes, "step_ms"] <= min(by.loc[(nodes, "ring"), "step_ms"],
                                                  by.loc[(nodes, "tree"), "step_ms"]) * (1 + 1e-9)
    assert table.loc[64, "step_ms"] == pytest.approx(by.loc[(64, "tree"), "step_ms"], rel=1e-9)
    header, rows = table_rows(chosen.table)
    cells = [row[header.index("algorithm")] for row in rows]
    assert "nccl: tree" in cells and all(cell.startswith("nccl: ") for cell in cells)
    assert algorithm_cell("ring", "ring") == "ring"
    # the default where the measured curves are Gloo's or MPI's: the ring they ran, and hierarchical
    assert set(project(collection, nodes=[1, 2], gpus_per_node=2, algorithms=None).table["algorithm"]) == {
        "ring", "hierarchical"}


def _curve(nodes: int, nccl: bool, algo: str = "", run_id: str = "c") -> Curve:
    sizes = np.array([1e3, 1e5, 1e7])
    return Curve(run_id, "box", "gloo", nodes, nodes, sizes, tuple(np.full(5, 1e-3 * (i + 1)) for i in range(3)),
                 nccl=nccl, nccl_algo=algo)


def test_a_link_fitted_on_two_nodes_where_nccl_chose_is_flagged_and_more_nodes_preferred() -> None:
    assert "without NCCL_ALGO=Ring" in _link_note(_curve(2, True))
    assert _link_note(_curve(2, True, "Ring")) == _link_note(_curve(4, True)) == _link_note(_curve(2, False)) == ""
    assert _link_note(None) == ""
    two, four = _curve(2, True, run_id="two"), _curve(4, True, run_id="four")
    assert pick_curve([two, four], "box", "gloo", "inter").run_id == "four"
    assert math.isfinite(four.link().alpha_s)
