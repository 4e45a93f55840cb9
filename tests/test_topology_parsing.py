"""The topology parser reads every form of `nvidia-smi topo -m` seen in the wild, and refuses bad ones
with a one-line error naming the line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hvdbench.core.node_topology import topology_from_nvml_values
from hvdbench.core.topology import (Topology, TopologyError, parse_topo_text, read_topology_file,
                                          topology_from_json)

FIXTURES = Path(__file__).parent / "fixtures" / "topology"
DGX1 = (FIXTURES / "dgx1-v100-nv1-nv2.txt").read_text()


def test_dgx1_hybrid_cube_mesh() -> None:
    topo = parse_topo_text(DGX1)
    assert [g.index for g in topo.gpus] == list(range(8)) and [n.name for n in topo.nics] == ["mlx5_0"]
    assert topo.gpu_classes() == ["NV2", "NV1", "SYS"]
    assert (topo.link(0, 3), topo.link(0, 1), topo.link(0, 5), topo.link(7, 6)) == ("NV2", "NV1", "SYS", "NV2")
    assert topo.links[("GPU2", "mlx5_0")] == "PIX" and topo.links[("mlx5_0", "GPU0")] == "NODE"
    assert topo.gpus[4].cpus == tuple(range(12, 24)) + tuple(range(36, 48))
    assert all(g.numa_node is None for g in topo.gpus)  # this driver printed no NUMA column


def test_pcie_node_with_title_nic_and_numa_columns() -> None:
    topo = read_topology_file(FIXTURES / "pcie-8gpu-pix-phb-sys.txt")
    assert topo.gpu_classes() == ["PIX", "PHB", "SYS"]
    assert [g.numa_node for g in topo.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert [n.label for n in topo.nics] == ["NIC0"] and topo.links[("NIC0", "GPU5")] == "SYS"


@pytest.mark.parametrize("name, numa", [("hgx-a100-nv12-mlx5.txt", [3, 3, 1, 1, 7, 7, 5, 5]),
                                        ("p4d-a100-nv12-numa.txt", [0, 0, 0, 0, 1, 1, 1, 1])])
def test_nvswitch_nodes(name: str, numa: list[int]) -> None:
    topo = read_topology_file(FIXTURES / name)
    assert topo.gpu_classes() == ["NV12"] and [g.numa_node for g in topo.gpus] == numa


def test_tabs_title_nic_legend_and_nv18() -> None:
    topo = read_topology_file(FIXTURES / "own-4gpu-tabs-nic-legend.txt")
    assert topo.gpu_classes() == ["NV18", "NODE", "SYS"]
    assert [(n.label, n.name) for n in topo.nics] == [("NIC0", "mlx5_0"), ("NIC1", "mlx5_1")]
    assert topo.links[("GPU3", "NIC1")] == "PIX" and topo.gpus[3].numa_node == 1


@pytest.mark.parametrize("transform", [
    lambda t: t.replace("    ", "\t"),                      # tab-separated
    lambda t: re.sub(r"[ \t]+", " ", t),                    # single spaces
    lambda t: "GPU Topology:\n\n" + t,                       # a title line above
    lambda t: t.replace("\n", "\r\n"),                      # Windows line ends
    lambda t: t.split("\n\nLegend")[0],                     # no legend below
])
def test_same_matrix_in_every_whitespace_form(transform) -> None:
    assert parse_topo_text(transform(DGX1)).to_json()["matrix"] == parse_topo_text(DGX1).to_json()["matrix"]


def test_underlined_header_of_current_drivers_and_a_one_gpu_node() -> None:
    """Drivers of the 5xx series underline the header (ESC[4m ... ESC[0m) even in captured output, and
    print an empty cell before GPU NUMA ID; a one-GPU node's matrix is GPU0 to itself."""
    one = "\t\x1b[4mGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\nGPU0\t X \t0-15\t0\t\tN/A\n"
    topo = parse_topo_text(one)
    assert [(g.index, g.cpus, g.numa_node) for g in topo.gpus] == [(0, tuple(range(16)), 0)] and not topo.links
    two = ("\t\x1b[4mGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n"
           "GPU0\t X \tNV18\t0-59\t0\t\tN/A\nGPU1\tNV18\t X \t0-59\t0\t\tN/A\n")
    assert parse_topo_text(two).gpu_classes() == ["NV18"]


def test_old_soc_code_reads_as_sys() -> None:
    assert parse_topo_text(DGX1.replace("SYS", "SOC")).link(0, 5) == "SYS"


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("GPU3    NV2     NV1     NV2      X      SYS", "GPU3    NV2     NV1     NV2      X"),
     r"line 5: row GPU3 has \d+ cells, expected 9 links"),
    (lambda t: t.replace("GPU1    NV1      X      NV2     NV1", "GPU1    NV1      X      NV2     PIX"),
     r"line 3: not symmetric: GPU1-GPU3 is PIX but GPU3-GPU1 is NV1"),
    (lambda t: t.replace("GPU6    SYS     SYS     NV1", "GPU6    SYS     SYS     QPI"),
     r"line 8: GPU6-GPU2: unknown link code 'QPI'"),
    (lambda t: t.replace("GPU5    SYS     NV2     SYS     SYS     NV1      X",
                         "GPU5    SYS     NV2     SYS     SYS     NV1     NV1"),
     r"line 7: GPU5 to itself is 'NV1', expected X"),
    (lambda t: "\n".join(line for line in t.splitlines() if not line.startswith("GPU7")),
     r"no row for GPU7"),
    (lambda t: "nothing to see here\n", r"no topology matrix"),
])
def test_malformed_matrices_are_one_line_errors_naming_the_line(edit, message: str) -> None:
    with pytest.raises(TopologyError, match=message) as err:
        parse_topo_text(edit(DGX1), "dgx1.txt")
    assert "\n" not in str(err.value) and str(err.value).startswith("dgx1.txt: ")


def test_nvml_values_give_the_same_matrix_as_the_text() -> None:
    text = parse_topo_text(DGX1)
    # What NVML reports on a DGX-1: the PCIe common ancestor of every pair, and NVLinks between peers.
    pcie = [[0 if a == b else (10 if a // 2 == b // 2 else 40 if a // 4 == b // 4 else 50) for b in range(8)]
            for a in range(8)]
    nvlinks = [[int(text.link(a, b)[2:]) if a != b and text.link(a, b).startswith("NV") else 0 for b in range(8)]
               for a in range(8)]
    nvml = topology_from_nvml_values([f"00000000:{a:02X}:00.0" for a in range(8)], pcie, nvlinks,
                                     [g.cpus for g in text.gpus], [None] * 8)
    for a in range(8):
        for b in range(8):
            if a != b:
                assert nvml.link(a, b) == text.link(a, b)
    assert nvml.gpus[3].pci_bus_id == "00000000:03:00.0"  # bus ids kept


def test_nvml_asymmetry_and_unknown_levels_are_errors() -> None:
    with pytest.raises(TopologyError, match="not symmetric"):
        topology_from_nvml_values(["a", "b"], [[0, 10], [10, 0]], [[0, 2], [1, 0]], [(), ()], [None, None])
    with pytest.raises(TopologyError, match="unknown topology level 35"):
        topology_from_nvml_values(["a", "b"], [[0, 35], [35, 0]], [[0, 0], [0, 0]], [(), ()], [None, None])


def test_json_round_trip_and_saved_json_file(tmp_path: Path) -> None:
    import json

    topo = read_topology_file(FIXTURES / "own-4gpu-tabs-nic-legend.txt")
    again = topology_from_json(topo.to_json())
    assert again.to_json() | {"source": ""} == topo.to_json() | {"source": ""}
    saved = tmp_path / "topo.json"
    saved.write_text(json.dumps(topo.to_json()))
    assert isinstance(read_topology_file(saved), Topology)


def test_matrix_text_parses_back() -> None:
    topo = read_topology_file(FIXTURES / "own-4gpu-tabs-nic-legend.txt")
    again = parse_topo_text(topo.matrix_text())
    assert again.to_json()["matrix"] == topo.to_json()["matrix"] and again.nics == topo.nics


def test_topo_names_each_gpus_nearest_nic_and_warns_where_the_nic_is_across_the_cpus() -> None:
    topo = read_topology_file(FIXTURES / "hgx-a100-nv12-mlx5.txt")
    assert topo.nearest_nics()[:3] == [(0, "mlx5_0", "SYS"), (1, "mlx5_0", "SYS"), (2, "mlx5_0", "PXB")]
    warning = topo.nic_warning()
    assert warning is not None and warning.startswith("6 of 8 GPU(s) (0, 1, 4, 5, 6, 7) reach the nearest NIC only "
                                                      "across the CPUs' interconnect (SYS)")
    assert read_topology_file(FIXTURES / "own-4gpu-tabs-nic-legend.txt").nearest_nics()[3] == (3, "mlx5_1", "PIX")
