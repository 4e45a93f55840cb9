"""The planner names one placement per link class, keeps NUMA, lists subsets up to symmetry, and never
proposes a GPU that does not exist."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import hvdbench_exe
from hvdbench.launchers.placement import by_link_class, check_devices, default_counts, exhaustive, explicit
from hvdbench.core.topology import read_topology_file
from hvdbench.core.errors import UsageError

FIXTURES = Path(__file__).parent / "fixtures" / "topology"
ALL = sorted(FIXTURES.glob("*.txt"))


def names(placements) -> list[str]:
    return [p.name for p in placements]


def test_dgx1_pairs_one_per_class() -> None:
    topo = read_topology_file(FIXTURES / "dgx1-v100-nv1-nv2.txt")
    assert names(by_link_class(topo, 2)) == ["NV2:0,3", "NV1:0,1", "SYS:0,5"]
    assert names(by_link_class(topo, 4)) == ["NV1:0,1,2,3", "SYS:0,1,2,4"]
    assert names(by_link_class(topo, 8)) == ["all"]


def test_pcie_node_prefers_one_socket_and_records_its_cpus() -> None:
    topo = read_topology_file(FIXTURES / "pcie-8gpu-pix-phb-sys.txt")
    pairs = by_link_class(topo, 2)
    assert names(pairs) == ["PIX:0,1", "PHB:0,2", "SYS:0,4"]
    assert pairs[0].numa_nodes == (0,) and pairs[0].cpus == tuple(range(0, 14)) + tuple(range(28, 42))
    assert pairs[2].numa_nodes == (0, 1)
    four = by_link_class(topo, 4)
    assert names(four) == ["PHB:0,1,2,3", "SYS:0,1,2,4"] and four[0].numa_nodes == (0,)
    assert four[0].visible_devices == "0,1,2,3"


def test_nvswitch_node_keeps_a_pair_on_one_numa_node() -> None:
    topo = read_topology_file(FIXTURES / "hgx-a100-nv12-mlx5.txt")
    (pair,) = by_link_class(topo, 2)
    assert pair.name == "NV12:0,1" and pair.numa_nodes == (3,)
    (four,) = by_link_class(topo, 4)
    assert len(four.numa_nodes) == 2  # two GPUs per NUMA node: four need two nodes at least


def test_exhaustive_lists_subsets_up_to_symmetry() -> None:
    topo = read_topology_file(FIXTURES / "pcie-8gpu-pix-phb-sys.txt")
    found = exhaustive(topo, 2)
    assert names(found) == ["01", "02", "04"] and [p.slowest for p in found] == ["PIX", "PHB", "SYS"]
    three = exhaustive(topo, 3)
    assert names(three) == ["012", "014", "024"]
    nvswitch = read_topology_file(FIXTURES / "p4d-a100-nv12-numa.txt")
    assert names(exhaustive(nvswitch, 2)) == ["01", "04"]  # same links; same or different NUMA node


@pytest.mark.parametrize("path", ALL, ids=[p.stem for p in ALL])
def test_every_placement_uses_existing_distinct_gpus(path: Path) -> None:
    topo = read_topology_file(path)
    count = len(topo.gpus)
    for k in range(1, count + 1):
        for placement in by_link_class(topo, k) + exhaustive(topo, k):
            assert len(placement.devices) == k == len(set(placement.devices))
            assert all(0 <= d < count for d in placement.devices)
            assert placement.slowest == topo.slowest(placement.devices)
    assert default_counts(topo)[-1] == count


def test_gpus_that_do_not_exist_are_refused() -> None:
    topo = read_topology_file(FIXTURES / "dgx1-v100-nv1-nv2.txt")
    with pytest.raises(UsageError, match=r"GPU id\(s\) \[8, 9\] do not exist: this node has 8 GPU\(s\), ids 0-7"):
        check_devices(topo, [0, 8, 9])
    with pytest.raises(UsageError, match="cannot place 9 GPU"):
        by_link_class(topo, 9)
    with pytest.raises(UsageError, match="repeat"):
        explicit(topo, [1, 1])
    assert explicit(topo, [2, 6]).name == "NV1:2,6"


def test_topo_command_prints_matrix_and_placements_or_json(tmp_path: Path) -> None:
    fixture = str(FIXTURES / "dgx1-v100-nv1-nv2.txt")
    text = subprocess.run([hvdbench_exe(), "topo", "--file", fixture], capture_output=True, text=True, timeout=60)
    assert text.returncode == 0
    assert "links between GPUs, fastest first: NV2, NV1, SYS" in text.stdout
    assert "NV2:0,3" in text.stdout and "placements of 8 GPU(s)" in text.stdout
    js = subprocess.run([hvdbench_exe(), "topo", "--file", fixture, "--json", "--gpus", "2"],
                        capture_output=True, text=True, timeout=60)
    import json

    data = json.loads(js.stdout)
    assert [p["name"] for p in data["placements"]["2"]] == ["NV2:0,3", "NV1:0,1", "SYS:0,5"]
    assert data["topology"]["gpu_classes"] == ["NV2", "NV1", "SYS"]


def test_topo_without_a_driver_says_so_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run([hvdbench_exe(), "topo"], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin"})
    if proc.returncode == 0:
        pytest.skip("this machine has an NVIDIA driver")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "no NVIDIA driver" in lines[0] and "--file" in lines[0]
    bad = tmp_path / "bad.txt"
    bad.write_text("GPU0 GPU1\nGPU0 X NV1\nGPU1 PIX X\n")
    proc = subprocess.run([hvdbench_exe(), "topo", "--file", str(bad)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "line 2: not symmetric" in proc.stderr


def test_run_devices_become_one_visible_list_per_run_checked_against_the_node(tmp_path: Path) -> None:
    fixture = str(FIXTURES / "dgx1-v100-nv1-nv2.txt")
    base = [hvdbench_exe(), "run", "cifar10", "--topology", fixture, "--output", str(tmp_path), "--dry-run"]
    ok = subprocess.run(base + ["--np", "1,2", "--devices", "2,6"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0
    lines = ok.stdout.splitlines()
    assert "CUDA_VISIBLE_DEVICES=2 HVDBENCH_DEVICES=2 horovodrun -np 1" in lines[0]
    assert "CUDA_VISIBLE_DEVICES=2,6 HVDBENCH_DEVICES=2,6 horovodrun -np 2" in lines[1]
    for args, text in ((["--np", "2", "--devices", "0,9"], "GPU id(s) [9] do not exist: this node has 8 GPU(s)"),
                       (["--np", "1,4", "--devices", "0,3"], "--np 4 needs more GPUs than --devices 0,3 gives"),
                       (["--np", "2", "--devices", "0,x"], "expected comma-separated GPU ids")):
        bad = subprocess.run(base + args, capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and text in bad.stderr
