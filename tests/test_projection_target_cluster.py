"""A target cluster in one file: the shipped examples load, every bad key is one line naming it and the valid
ones, and ``project --target`` projects to the target's node counts, GPUs per node, bus and NICs, and says
per workload how many nodes keep efficiency above the target's floor."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from hvdbench.analysis.projection.project import efficiency_holds
from hvdbench.analysis.projection.target import SHIPPED, load_target, parse_target
from hvdbench.cli import main as hvdbench_main
from hvdbench.core.errors import UsageError

from test_projection_model import _results

GOOD = """name = "two boxes"
gpu = "L4"
gpus_per_node = 2
nodes = [1, 2, 4]
efficiency_below = 50
[intra_node]
bus = "PCIe"
gbs = 10
latency_us = 5
[inter_node]
nics = 2
nic_gbit = 100
latency_us = 8
"""


def test_the_shipped_targets_load_with_their_nics_as_a_nodes_bandwidth() -> None:
    names = sorted(p.stem for p in SHIPPED.glob("*.toml"))
    assert names == ["dgx-h100", "hgx-a100", "pcie-8gpu"]
    dgx = load_target("dgx-h100")
    assert (dgx.gpus_per_node, dgx.inter_gbs, dgx.inter_link()) == (8, 400.0, "DGX-H100=400,5us")
    assert load_target("hgx-a100").inter_gbs == 100.0 and load_target("pcie-8gpu").inter_gbs == 25.0


@pytest.mark.parametrize("edit, words", [
    (("gpus_per_node = 2", "gpus_per_node = 2\nnics = 4"), "unknown key nics (valid: name, gpu, gpus_per_node"),
    (("gpu = \"L4\"\n", ""), "missing gpu (the GPU model of its nodes"),
    (("nic_gbit = 100", "nic_gbit = 100\nspeed = 1"), "unknown key inter_node.speed (valid: nics, nic_gbit"),
    (("gbs = 10\n", ""), "missing intra_node.gbs"),
    (("gbs = 10", "gbs = -3"), "intra_node.gbs = -3: expected a number > 0"),
    (("nics = 2", "nics = 2.5"), "inter_node.nics = 2.5: expected a whole number > 0"),
    (("nodes = [1, 2, 4]", "nodes = [1, 0]"), "nodes = [1, 0]: expected a list of whole numbers > 0"),
    (("efficiency_below = 50", "efficiency_below = 120"), "efficiency_below = 120: expected a percentage"),
    (("efficiency_below = 50", "efficiency_below = 0.8"), "a fraction such as 0.8 is refused"),  # 0.8% or 80%?
    (("gpus_per_node = 2", "gpus_per_node = 100000"), "gpus_per_node = 100000: no cluster has that"),
    (("gbs = 10", "gbs = 1e-300"), "intra_node.gbs = 1e-300: no cluster has that"),
    (("latency_us = 8", "latency_us = 1e300"), "inter_node.latency_us = 1e+300: no cluster has that"),
    (("name = ", "name == "), "not TOML"),
])
def test_each_bad_key_is_one_line_naming_it(edit: tuple[str, str], words: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_target(GOOD.replace(*edit), "cluster.toml")
    assert words in str(caught.value) and "\n" not in str(caught.value), str(caught.value)


def test_project_to_a_target_uses_its_nodes_bus_and_nics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _results(tmp_path / "r")
    target = tmp_path / "cluster.toml"
    target.write_text(GOOD)
    assert hvdbench_main(["project", str(root), "--target", str(target), "--algorithm", "ring"]) == 2
    err = capsys.readouterr().err  # its compute was not measured on the target's L4s: refused unless asked
    assert "its GPUs are L4, but the compute of" in err and "--keep-measured-compute" in err
    assert hvdbench_main(["project", str(root), "--target", str(target), "--algorithm", "ring",
                          "--keep-measured-compute"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("projected onto two boxes's links with compute measured on an unrecorded device, not on "
                          "the target's L4")
    table = pd.read_csv(root / "report" / "projection.csv")
    assert sorted(set(table["nodes"])) == [1, 2, 4] and set(table["gpus_per_node"]) == {2}
    assert set(table["link"]) == {"PCIe (within a node)", "measured", "two-boxes"}
    assert "target two boxes (" in out and "efficiency stays at or above 50%" in out
    assert all("(compute measured on an unrecorded device)" in line for line in out.splitlines() if " ring " in line)
    assert hvdbench_main(["project", str(root), "--target", "no-such-cluster"]) == 2
    err = capsys.readouterr().err.strip()
    assert "no such file, nor a shipped target (dgx-h100, hgx-a100, pcie-8gpu)" in err and "\n" not in err


def test_how_many_nodes_keep_efficiency_above_the_floor_by_point_and_interval() -> None:
    rows = [{"workload": "w", "link": "l", "algorithm": "ring", "nodes": n, "efficiency": e, "efficiency_low": lo,
             "efficiency_high": hi} for n, e, lo, hi in ((2, 0.9, 0.85, 0.95), (4, 0.82, 0.78, 0.86),
                                                        (8, 0.7, 0.6, 0.81), (16, 0.5, 0.4, 0.6))]
    (line,) = efficiency_holds(pd.DataFrame(rows), 80)
    assert line == ("w on l (ring): efficiency stays at or above 80% up to 4 node(s) "
                    "(95% interval: from up to 2 node(s) to up to 8 node(s))")
    (never,) = efficiency_holds(pd.DataFrame(rows), 30)
    assert "through all 16 nodes projected" in never
    (below,) = efficiency_holds(pd.DataFrame(rows), 99)  # never said as "up to not even 2 nodes"
    assert below.startswith("w on l (ring): efficiency falls below 99% already at 2 nodes (95% interval: from below "
                            "it already at 2 nodes to below it already at 2 nodes)")


def test_the_report_carries_the_projection_where_the_results_allow_one(tmp_path: Path) -> None:
    root = _results(tmp_path / "r")
    assert hvdbench_main(["report", str(root)]) == 0
    text = (root / "report" / "report.md").read_text()
    assert "## Projection" in text and "efficiency falls below 80% already at 2 nodes" in text  # never "up to not even"
    one_node = _results(tmp_path / "one", inter=False)  # no run across nodes: no projection section
    assert hvdbench_main(["report", str(one_node)]) == 0
    assert "## Projection" not in (one_node / "report" / "report.md").read_text()
