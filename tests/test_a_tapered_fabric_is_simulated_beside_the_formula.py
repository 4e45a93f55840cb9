"""The SimGrid second opinion on the exchange across nodes: on a non-blocking tree the simulated ring is the formula's
(within 1%), on a 4:1 tree with the job's nodes scattered it is several times slower (the leaves' uplinks shared,
which no alpha-beta formula shows), packed nodes keep a tapered tree's ring inside its leaves, the bound holds (1,024
nodes in seconds), and ``project --target`` with a ``[fabric]`` flags the rows where the two disagree by more than
15%; where SimGrid is not installed, one line says so and the projection stands."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from hvdbench.analysis.projection import simulated
from hvdbench.analysis.projection.simulated import Tree, second_opinion, simulate_ring
from hvdbench.analysis.projection.target import parse_target
from hvdbench.cli import main as hvdbench_main
from hvdbench.core.errors import UsageError

from test_projection_model import _results
from test_projection_target_cluster import GOOD

needs_simgrid = pytest.mark.skipif(not simulated.available(), reason="SimGrid's Python module is not installed")
FABRIC = '[fabric]\nnodes_per_leaf = 2\ntaper = 4\nplacement = "scattered"\n'


@needs_simgrid
@pytest.mark.slow
def test_a_non_blocking_tree_is_the_formula_and_a_tapered_one_with_scattered_nodes_is_not() -> None:
    for nodes in (2, 16, 256):
        assert simulate_ring(nodes, 1e9, 50.0, 5e-6, Tree(16, 1.0)).ratio == pytest.approx(1.0, abs=0.01)
    scattered = simulate_ring(256, 1e9, 50.0, 5e-6, Tree(16, 4.0, "scattered"))
    assert 3.0 < scattered.ratio < 4.5  # 15 flows a leaf out through 4 nodes' worth of uplink: ~3.75x
    assert simulate_ring(256, 1e9, 50.0, 5e-6, Tree(16, 4.0, "packed")).ratio == pytest.approx(1.0, abs=0.05)
    big = simulate_ring(1024, 1e9, 50.0, 5e-6, Tree(32, 4.0, "scattered"))
    assert big.wall_s < 60 and big.ratio > 2  # the bound: 1,024 nodes in well under 10 minutes
    found, lines = second_opinion([1, 2, 8], 1e8, 50.0, 5e-6, Tree(2, 4.0))
    assert sorted(found) == [2, 8] and "calibration: on a non-blocking tree of the same leaves at 8 nodes, ×1.00" in \
        lines[0]


def test_the_fabric_table_is_checked_key_by_key() -> None:
    target = parse_target(GOOD + FABRIC, "cluster.toml")
    assert target.tree == Tree(2, 4.0, "scattered")
    assert parse_target(GOOD, "cluster.toml").tree is None
    for edit, words in ((("scattered", "random"), "fabric.placement = 'random': expected packed or scattered"),
                        (("taper = 4", "taper = 0.5"), "fabric.taper = 0.5 (1 to 64)"),
                        (("taper = 4", "taper = 4\nspines = 2"), "unknown key fabric.spines")):
        with pytest.raises(UsageError, match=words.replace("(", r"\(").replace(")", r"\)")):
            parse_target(GOOD + FABRIC.replace(*edit), "cluster.toml")


def test_without_simgrid_the_second_opinion_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simulated, "available", lambda: False)
    found, lines = second_opinion([2, 4], 1e8, 50.0, 5e-6, Tree(16, 4.0))
    assert found == {} and lines == [f"second opinion (SimGrid) not run: {simulated.MISSING}"]


@needs_simgrid
@pytest.mark.slow
def test_project_to_a_tapered_target_flags_the_rows_simulator_and_formula_disagree_on(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _results(tmp_path / "r")
    target = tmp_path / "cluster.toml"
    target.write_text(GOOD.replace("nodes = [1, 2, 4]", "nodes = [1, 2, 4, 16]").replace("nic_gbit = 100",
                                                                                        "nic_gbit = 1000") + FABRIC)
    assert hvdbench_main(["project", str(root), "--target", str(target), "--algorithm", "ring",
                          "--keep-measured-compute"]) == 0
    out = capsys.readouterr().out
    assert "second opinion: a ring of" in out and "on 2 nodes a leaf switch, uplinks 4:1, the job's nodes scattered" \
        in out and "calibration: on a non-blocking tree" in out
    table = pd.read_csv(root / "report" / "projection.csv")
    mine = table[table["link"] == "two-boxes"].set_index("nodes")
    assert mine.loc[2, "simulated_x"] == pytest.approx(1.0, abs=0.02)  # two nodes on one leaf: no uplink crossed
    assert mine.loc[16, "simulated_x"] > 1.15
    assert "SimGrid: ×" in out and table[table["link"] == "measured"]["simulated_x"].isna().all()
