"""NVML-derived topology equals the ``nvidia-smi topo -m`` text of the same machine, for NVSwitch (HGX A100
NV12), NVLink pairs (DGX-1 NV1/NV2), PCIe-only (PIX/PHB/SYS) and NUMA-column fixtures, read through an NVML
stand-in that answers as each machine would; where NVML and nvidia-smi disagree, every pair is named."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import hvdbench_exe
from hvdbench.core.node_topology import disagreements, node_topology, read_nvml_topology
from hvdbench.launchers.placement import by_link_class
from hvdbench.core.topology import TopologyError, parse_topo_text
from nvml_standin import StandInNvml

FIXTURES = Path(__file__).parent / "fixtures" / "topology"
MACHINES = ["hgx-a100-nv12-mlx5.txt", "p4d-a100-nv12-numa.txt", "dgx1-v100-nv1-nv2.txt", "pcie-8gpu-pix-phb-sys.txt"]


@pytest.mark.parametrize("name", MACHINES)
def test_nvml_and_the_text_give_the_same_topology(name: str) -> None:
    text = parse_topo_text((FIXTURES / name).read_text(), name)
    nvml = read_nvml_topology(StandInNvml(text))
    assert disagreements(nvml, text) == []
    assert [(g.cpus, g.numa_node) for g in nvml.gpus] == [(g.cpus, g.numa_node) for g in text.gpus]
    assert all(g.pci_bus_id for g in nvml.gpus)


def test_nvswitch_pairs_read_as_nv12_not_the_pcie_path() -> None:
    text = parse_topo_text((FIXTURES / "hgx-a100-nv12-mlx5.txt").read_text())
    standin = StandInNvml(text)
    assert standin.switched  # every link ends at an NVSwitch, none at a GPU
    nvml = read_nvml_topology(standin)
    assert nvml.gpu_classes() == ["NV12"]
    assert [p.name.split(":")[0] for p in by_link_class(nvml, 2)] == ["NV12"]


def test_a_down_switch_link_shows_as_the_smaller_bonded_set() -> None:
    text = parse_topo_text((FIXTURES / "p4d-a100-nv12-numa.txt").read_text())
    standin = StandInNvml(text)
    standin.links[3] = standin.links[3][:11]  # GPU3 lost one of its 12 links
    nvml = read_nvml_topology(standin)
    assert nvml.link(3, 5) == "NV11" and nvml.link(0, 5) == "NV12"
    assert disagreements(nvml, text) == [f"GPU{min(3, b)}-GPU{max(3, b)}: NV11 (nvml) vs NV12 (text)"
                                         for b in range(8) if b != 3]


def test_both_views_are_read_and_every_disagreeing_pair_named() -> None:
    smi = (FIXTURES / "dgx1-v100-nv1-nv2.txt").read_text()
    standin = StandInNvml(parse_topo_text(smi))
    for a, b in ((0, 1), (1, 0)):  # the driver sees the GPU0-GPU1 NVLink down
        standin.links[a] = [link for link in standin.links[a] if link[1] != standin.bus[b]]
    node = node_topology(standin, smi)
    assert node.disagreements == ("GPU0-GPU1: NODE (nvml) vs NV1 (nvidia-smi topo -m)",)
    assert node.topology.link(0, 1) == "NODE"  # NVML, the driver's own word, is what placements use
    assert [n.name for n in node.topology.nics] == ["mlx5_0"] and node.topology.links[("GPU2", "mlx5_0")] == "PIX"


def test_mig_gpus_are_marked_and_said() -> None:
    text = parse_topo_text((FIXTURES / "pcie-8gpu-pix-phb-sys.txt").read_text())
    standin = StandInNvml(text)
    standin.states[2].mig = True
    node = node_topology(standin, "")
    assert node.topology.gpus[2].mig and not node.topology.gpus[1].mig
    assert node.notes == ("GPU2 is in MIG mode: shown as its physical GPU; its instances share no NVLink",)


RAGGED = "\tGPU0\tGPU1\nGPU0\t X \nGPU1\tNV1\t X \n"  # a row short of a cell


def test_an_unreadable_nvidia_smi_matrix_leaves_the_nvml_view_and_says_so() -> None:
    text = parse_topo_text((FIXTURES / "dgx1-v100-nv1-nv2.txt").read_text())
    node = node_topology(StandInNvml(text), RAGGED)
    assert node.text is None and node.topology.gpu_classes() == ["NV2", "NV1", "SYS"]
    assert len(node.notes) == 1 and "row GPU0 has 1 cells" in node.notes[0] and "NVML's view alone" in node.notes[0]

    class NoDriver:
        def nvmlInit(self) -> None:
            raise RuntimeError("NVML Shared Library Not Found")

    with pytest.raises(TopologyError) as err:  # neither view: both reasons in one line
        node_topology(NoDriver(), RAGGED)
    assert "\n" not in str(err.value) and "row GPU0 has 1 cells" in str(err.value)


def test_no_driver_and_no_nvidia_smi_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")

    class NoDriver:
        def nvmlInit(self) -> None:
            raise RuntimeError("NVML Shared Library Not Found")

    with pytest.raises(TopologyError) as err:
        node_topology(NoDriver())
    assert "\n" not in str(err.value) and "no nvidia-smi on PATH" in str(err.value)


def test_topo_prints_a_saved_file_as_json(tmp_path: Path) -> None:
    proc = subprocess.run([hvdbench_exe(), "topo", "--file", str(FIXTURES / "dgx1-v100-nv1-nv2.txt"), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["disagreements"] == [] and data["topology"]["gpu_classes"] == ["NV2", "NV1", "SYS"]


def test_an_nvml_too_old_to_name_switches_says_so() -> None:
    text = parse_topo_text((FIXTURES / "hgx-a100-nv12-mlx5.txt").read_text(), "smi")

    class OldNvml(StandInNvml):
        def __getattribute__(self, name: str):  # type: ignore[no-untyped-def]
            if name == "nvmlDeviceGetNvLinkRemoteDeviceType":
                raise AttributeError(name)  # a library from before NVSwitch systems
            return super().__getattribute__(name)

    node = node_topology(OldNvml(text), (FIXTURES / "hgx-a100-nv12-mlx5.txt").read_text())
    assert node.nvml is not None and "96 NVLinks end at devices this NVML cannot name" in node.nvml.source
    assert len(node.disagreements) == 28  # every pair: the text's NV12 against NVML's PCIe path
