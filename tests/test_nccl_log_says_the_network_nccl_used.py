"""The network NCCL used, read from NCCL INFO logs recorded on real clusters and published by their owners
(tests/fixtures/nccl/README.md: source, machine and what each should parse to). The traps: a ``NET/Socket :
Using`` line that is only NCCL 2.4's bootstrap interface, a socket fallback beside an RDMA device, a plugin's
network, RoCE behind NCCL's IB transport, GPUDirect RDMA shown per channel or per HCA."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hvdbench import cli
from hvdbench.readers.nccl_log import parse_nccl_log, read_nccl_log

FIXTURES = Path(__file__).parent / "fixtures" / "nccl"
N = None  # the log does not say

# file: (nccl_version, network, plugin, gdr, devices, intra_node, nodes, a warning's words or None)
EXPECTED: dict[str, tuple[Any, ...]] = {
    "ib-gdrdma-h20-2node-cumem.txt": (N, "IB", N, True, ["2", "3"], ["P2P/CUMEM"], 2, None),
    "plugin-ibext-v8-gdrdma-h100-nccl2.21.5.txt": ("2.21.5+cuda12.4", "IBext_v8", "IBext_v8", True, ["0", "3"],
                                                   ["P2P/CUMEM"], 2, None),
    "plugin-ibext-sharp-h100-4hca.txt": (N, "IBext", "NCCL RDMA Plugin v6", N,
                                         ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5"], [], N, None),
    "roce-dgxh100-nccl2.19.3-2hca.txt": ("2.19.3+cuda12.3", "RoCE", N, N, ["mlx5_10", "mlx5_11"], [], N, None),
    "ib-nogdr-no-peermem-2node.txt": (N, "IB", N, False, ["0"], [], N, "no GPUDirect RDMA"),
    "ib-nogdr-a100-2node-p2p-direct.txt": (N, "IB", N, False, ["3"], ["P2P/direct pointer"], N, "no GPUDirect RDMA"),
    "socket-fallback-with-roce-device.txt": (N, "Socket", N, False, ["bond0"], [], N, "over TCP sockets (bond0)"),
    "single-node-nvls-8gpu-nccl2.24.3-ibext-loaded.txt": ("2.24.3+cuda12.2", "IBext_v8", "NCCL RDMA Plugin v8", N,
                                                          [f"ibp{i}" for i in range(8)], [], N, None),
    "horovod-ib-nogdr-2node.txt": (N, "IB", N, False, ["0"], [], N, "no GPUDirect RDMA"),
    "horovod-efa-ofi-plugin-p2p-ipc.txt": (N, "AWS Libfabric", "AWS Libfabric", False, ["0"], ["P2P/IPC"], N,
                                           "NET/OFI Couldn't open AV"),
    "horovod-roce-34hca-nccl2.4.2.txt": ("2.4.2+cuda10.0", "RoCE", N, N, 34, [], N, None),
    "ib-ipoib-bootstrap-socket-line-nccl2.4.7.txt": ("2.4.7+cuda10.0", "IB", N, N, ["mlx5_0"], [], N, None),
}


def test_every_recorded_log_is_covered() -> None:
    logs = {p.name for p in FIXTURES.glob("*.txt") if not p.name.startswith(("ibstat", "ibv_", "nccl-env-vars"))}
    assert logs == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_recorded_log_parses_to_what_its_readme_says(name: str) -> None:
    version, network, plugin, gdr, devices, intra, nodes, warning = EXPECTED[name]
    fabric = read_nccl_log(FIXTURES / name)
    assert (fabric.nccl_version, fabric.network, fabric.plugin, fabric.gdr) == (version, network, plugin, gdr)
    assert (len(fabric.devices) if isinstance(devices, int) else fabric.devices) == devices
    assert (fabric.intra_node, fabric.nodes) == (intra, nodes)
    if warning is None:
        assert fabric.warnings == []
    else:
        assert any(warning in said for said in fabric.warnings), fabric.warnings


def test_a_planted_socket_fallback_on_an_ib_node_is_warned_and_the_bootstrap_line_is_not() -> None:
    ib_listed = "h1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>"
    bootstrap = "h1:1:2 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>"
    fell_back = [bootstrap, "h1:1:2 [0] NCCL INFO Using network Socket",
                 "h1:1:3 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0", ib_listed]
    fabric = parse_nccl_log(fell_back)
    assert fabric.network == "Socket" and "over TCP sockets (eth0)" in fabric.warnings[0]
    assert "mlx5_0, mlx5_1" in fabric.warnings[0]
    fine = parse_nccl_log([bootstrap, ib_listed, "h1:1:3 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via "
                                                 "NET/IB/1/GDRDMA"])
    assert (fine.network, fine.gdr, fine.devices, fine.warnings) == ("IB", True, ["mlx5_1"], [])


def test_the_command_prints_each_file_and_json_and_names_a_bad_one(capsys: pytest.CaptureFixture[str],
                                                                    tmp_path: Path) -> None:
    hostile = tmp_path / "evil.log"
    hostile.write_text("NCCL version 2.21\x1b]0;pwned\x07\nUsing network IB\n")
    status = cli.main(["nccl-log", str(FIXTURES / "roce-dgxh100-nccl2.19.3-2hca.txt"), str(hostile),
                       str(tmp_path / "missing.log")])
    out, err = capsys.readouterr()
    assert status == 2 and "network: RoCE" in out and "devices: mlx5_10, mlx5_11" in out
    assert "\x1b" not in out and "\\x1b" in out and "missing.log: cannot read it" in err
    assert cli.main(["nccl-log", "--json", str(FIXTURES / "socket-fallback-with-roce-device.txt")]) == 0
    parsed = json.loads(capsys.readouterr().out)
    assert list(parsed.values())[0]["network"] == "Socket"


def test_a_gpu_rank_sends_nccl_info_to_its_own_file_unless_the_user_chose(tmp_path: Path) -> None:
    from hvdbench.core.nccl_env import info_variables

    path = tmp_path / "nccl-rank-3.log"
    assert info_variables({}, path) == {"NCCL_DEBUG_FILE": str(path), "NCCL_DEBUG": "INFO",
                                        "NCCL_DEBUG_SUBSYS": "INIT,NET"}
    assert info_variables({"NCCL_DEBUG": "info", "NCCL_DEBUG_SUBSYS": "ALL"}, path) == {"NCCL_DEBUG_FILE": str(path)}
    for theirs in ({"NCCL_DEBUG": "WARN"}, {"NCCL_DEBUG_FILE": "/tmp/nccl.%h.%p"}):
        assert info_variables(theirs, path) == {}
    assert info_variables({}, tmp_path / "100%" / "nccl-rank-0.log") == {}  # NCCL would read %..


def test_a_run_across_nodes_over_sockets_is_a_column_a_section_and_a_summary_warning(tmp_path: Path) -> None:
    import shutil

    from conftest import write_run
    from hvdbench.analysis.collect import collect
    from hvdbench.analysis.report.build import build
    from hvdbench.core.spec import RunFolder, RunSpec

    for nodes, log in ((1, "ib-gdrdma-h20-2node-cumem.txt"), (2, "socket-fallback-with-roce-device.txt")):
        spec = RunSpec(benchmark="cifar10", np=2, nodes=nodes, args=("--model", "resnet20"))
        folder = RunFolder(write_run(tmp_path, spec, [[0.1] * 8, [0.1] * 8]))
        for rank in (0, 1):
            shutil.copy(FIXTURES / log, folder.nccl_log(rank))
    collection = collect([tmp_path])
    runs = collection.runs.set_index("nodes")
    assert (runs.loc[1, "nccl_network"], runs.loc[1, "nccl_gdr"], runs.loc[1, "nccl_nics"]) == ("IB", True, "2; 3")
    assert pd_isna(runs.loc[1, "fabric_warnings"]) and runs.loc[1, "nccl_transports"] == "P2P/CUMEM"
    assert runs.loc[2, "nccl_network"] == "Socket" and "over TCP sockets (bond0)" in runs.loc[2, "fabric_warnings"]
    report = build(collection)
    fabric = next(s for s in report.sections if s.title == "The network NCCL used")
    assert [row[3] for row in fabric.rows] == ["IB", "Socket"]
    summary = next(s for s in report.sections if s.title == "Executive summary").lines
    assert sum("Fabric warning" in line for line in summary) == 1


def pd_isna(value: object) -> bool:
    import pandas as pd

    return bool(pd.isna(value))


# The HCA tools' outputs recorded on real clusters (fixtures/nccl/README.md): (device, state, rate, link layer) per port
HCA_EXPECTED: dict[str, list[tuple[Any, ...]]] = {
    "ibstat-h100-ndr400-one-ca.txt": [("mlx5_5", "active", 400.0, "InfiniBand")],
    "ibstat-roce200-ethernet-and-down.txt": [("mlx5_0", "active", 200.0, "Ethernet"),
                                             ("mlx5_1", "active", 200.0, "Ethernet"), ("mlx5_10", "down", N, N)],
    "ibv_devinfo-h100-cx7-port-down.txt": [("mlx5_0", "down", N, "InfiniBand")],
    "ibstatus-roce-bond-host.txt": [("mlx5_bond_0", "active", 25.0, "Ethernet")],
}


@pytest.mark.parametrize("name", sorted(HCA_EXPECTED))
def test_every_recorded_hca_output_parses_to_what_its_readme_says(name: str) -> None:
    from hvdbench.core.hca import parse_hca_ports

    ports = parse_hca_ports((FIXTURES / name).read_text())
    assert [(p["device"], p["state"], p["rate_gbps"], p["link_layer"]) for p in ports] == HCA_EXPECTED[name]


def test_node_fabric_asks_the_tools_there_and_names_the_modules() -> None:
    import subprocess

    from hvdbench.core import hca

    outputs = {"ibstat": (FIXTURES / "ibstat-h100-ndr400-one-ca.txt").read_text(),
               "ofed_info": "MLNX_OFED_LINUX-24.10:\n",
               "ucx_info": "# Library version: 1.17.0\n# UCT version=1.17.0 revision 7bb2722\n"}
    here = {"ibstat", "ofed_info", "ucx_info"}
    original = hca.shutil.which
    try:
        hca.shutil.which = lambda tool: f"/usr/bin/{tool}" if tool in here else None  # type: ignore[assignment]
        fabric = hca.node_fabric({"LOADEDMODULES": "cuda/12.8:nccl/2.26:", "HPCX_DIR": "/opt/hpcx-v2.21/"},
                                 run=lambda argv, **_: subprocess.CompletedProcess(argv, 0, outputs[argv[0]], ""))
    finally:
        hca.shutil.which = original  # type: ignore[assignment]
    assert fabric["source"] == "ibstat" and fabric["ofed"] == "MLNX_OFED_LINUX-24.10" and fabric["ucx"] == "1.17.0"
    assert fabric["hpcx"] == "hpcx-v2.21" and fabric["modules"] == ["cuda/12.8", "nccl/2.26"]
    assert hca.active_rdma(fabric) == ["mlx5_5 (InfiniBand 400 Gb/s)"]
    assert hca.node_fabric({}, run=lambda *a, **k: None)["modules"] == []


def test_a_socket_fallback_names_the_nodes_active_rdma_ports() -> None:
    from hvdbench.readers.nccl_log import run_fabric

    fallback = read_nccl_log(FIXTURES / "socket-fallback-with-roce-device.txt")
    fallback.warnings = []  # a log that does not itself show the RDMA device: the node's record must say it
    merged = run_fabric([fallback], 2, ["mlx5_bond_0 (Ethernet 25 Gb/s)"])
    assert merged is not None and merged.network == "Socket"
    assert merged.warnings[0].startswith("a run across 2 nodes moved its data over TCP sockets, although the node has "
                                         "active RDMA ports mlx5_bond_0 (Ethernet 25 Gb/s)")


def test_no_gpudirect_rdma_beside_a_nic_on_the_gpus_pcie_switch_is_warned() -> None:
    from hvdbench.readers.nccl_log import run_fabric
    from hvdbench.core.topology import read_topology_file

    dgx1 = read_topology_file(Path(__file__).parent / "fixtures" / "topology" / "dgx1-v100-nv1-nv2.txt")
    hgx = read_topology_file(Path(__file__).parent / "fixtures" / "topology" / "hgx-a100-nv12-mlx5.txt")
    assert dgx1.near_nics(2) == [{"nic": "mlx5_0", "link": "PIX"}] and dgx1.near_nics(0) == []  # NODE: a host bridge
    assert hgx.near_nics(3) == [{"nic": "mlx5_0", "link": "PXB"}] and hgx.near_nics(7) == []
    no_gdr = read_nccl_log(FIXTURES / "ib-nogdr-a100-2node-p2p-direct.txt")
    warned = run_fabric([no_gdr], 2, near_nics=["mlx5_0 (PXB)"])
    assert warned is not None and any(w.startswith("no GPUDirect RDMA although the GPU shares a PCIe switch with "
                                                   "mlx5_0 (PXB)") for w in warned.warnings)
    far = run_fabric([no_gdr], 2)
    assert far is not None and not any("shares a PCIe switch" in w for w in far.warnings)
    with_gdr = run_fabric([read_nccl_log(FIXTURES / "ib-gdrdma-h20-2node-cumem.txt")], 2, near_nics=["mlx5_0 (PIX)"])
    assert with_gdr is not None and not any("shares a PCIe switch" in w for w in with_gdr.warnings)


def test_what_was_used_is_told_apart_from_what_was_only_available() -> None:
    """NVLS "available" is not NVLS used; a one-node run whose channels all stay within the node moved no byte over
    the network it named; GPUDirect RDMA off for want of nvidia-peermem says so; a log cut before "Using network"
    still names the network its transport's own line shows."""
    nvls = read_nccl_log(FIXTURES / "single-node-nvls-8gpu-nccl2.24.3-ibext-loaded.txt")
    assert nvls.intra_node == [] and nvls.available == ["NVLS"]
    one_node = parse_nccl_log(["h:1:2 [0] NCCL INFO Using network IB", "h:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 8 "
                               "nNodes 1 localRanks 8", "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"])
    assert one_node.network is None and one_node.available == ["IB"] and one_node.intra_node == ["P2P/IPC"]
    peermem = read_nccl_log(FIXTURES / "ib-nogdr-no-peermem-2node.txt")
    assert any("nvidia-peermem module is not loaded" in w for w in peermem.warnings), peermem.warnings
    cut = parse_nccl_log(["h:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>"])
    assert cut.network == "IB" and cut.devices == ["mlx5_0", "mlx5_1"]
    from hvdbench.readers.nccl_log import fabric_lines

    assert "no channel line in the log shows data over it" in "\n".join(fabric_lines(cut))


def test_fabric_checks_each_port_before_a_benchmark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """hvdbench fabric on recorded outputs: a port down is flagged, so is a port up at a lower rate than the node's
    others; here, with no HCA, that is said in one line (exit 4: nothing to judge); a file of no port is refused."""
    from hvdbench.cli import main
    from hvdbench.core.hca import port_findings

    assert main(["fabric", str(FIXTURES / "ibstat-roce200-ethernet-and-down.txt"),
                 str(FIXTURES / "ibstat-h100-ndr400-one-ca.txt")]) == 1
    out = capsys.readouterr().out
    assert "flagged: mlx5_10 port 1 is down (Disabled)" in out and "mlx5_5 port 1: active, LinkUp, 400 Gb/s" in out
    slow = [{"device": "mlx5_0", "port": 1, "state": "active", "rate_gbps": 400.0, "link_layer": "InfiniBand"},
            {"device": "mlx5_1", "port": 1, "state": "active", "rate_gbps": 200.0, "link_layer": "InfiniBand"}]
    assert port_findings(slow) == ["mlx5_1 port 1 runs at 200 Gb/s where the node's other InfiniBand ports run 400: "
                                   "a cable or a port that trained down"]
    (tmp_path / "x.txt").write_text("nothing here\n")
    assert main(["fabric", str(tmp_path / "x.txt")]) == 2
    assert "no HCA port in it" in capsys.readouterr().err
    if not any(Path(p).is_dir() for p in ("/sys/class/infiniband",)):
        assert main(["fabric"]) == 4
        assert "no HCA port here" in capsys.readouterr().out


@pytest.mark.bad_input
def test_every_ranks_own_version_banner_is_one_run_and_a_process_starting_again_is_another() -> None:
    """Recent NCCL prints its version from every rank: a job of 16 ranks over two hosts is one run (it was read as
    one run a rank); the same process printing its version again starts the next run; process ids that repeat on
    another host are other processes."""
    from hvdbench.readers.nccl_log import parse_nccl_runs

    lines = (FIXTURES / "roce-dgxh100-nccl2.19.3-2hca.txt").read_text().splitlines()
    banners = [f"dgxh100-{3 + r % 2}:{5000 + r}:{5000 + r} [{r % 8}] NCCL INFO NCCL version 2.19.3+cuda12.3"
               for r in range(16)]  # the log's own version, as every rank of its job prints it
    banners.append("dgxh100-4:5000:5000 [0] NCCL INFO NCCL version 2.19.3+cuda12.3")  # host 4's 5000 is its own
    runs = parse_nccl_runs([*banners, *lines])
    assert len(runs) == 1 and runs[0].network == "RoCE" and runs[0].nccl_version == "2.19.3+cuda12.3"
    again = parse_nccl_runs([*banners, *lines, banners[0], *lines])
    assert len(again) == 2 and [r.network for r in again] == ["RoCE", "RoCE"]


@pytest.mark.bad_input
def test_a_log_cut_short_still_names_the_network_its_lines_say_served() -> None:
    """The socket fallback's log without its "Using network Socket" line (cut short): IB found no device and the
    socket transport was set up, so sockets served, said as such, with the warning that RDMA went unused."""
    lines = [line for line in (FIXTURES / "socket-fallback-with-roce-device.txt").read_text().splitlines()
             if "Using network" not in line]
    fabric = parse_nccl_log(lines)
    assert fabric.network == "Socket" and fabric.devices == ["bond0"]
    assert any("though an RDMA device is there" in w for w in fabric.warnings)


def test_an_nccl_ib_hca_naming_a_down_port_is_flagged_where_the_engineer_looks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """NCCL_IB_HCA=mlx5_10 where mlx5_10's port is down (a recorded ibstat): flagged by name as NCCL matches names
    (exact with '=', else as a prefix; ':PORT'); a prefix that still matches an active port, and an exclusion that
    leaves one, are not; a run's env record that says both becomes the run's hca_named_down and a line of the
    executive summary; fabric --json carries the same findings."""
    from hvdbench.core.hca import named_down, parse_hca_ports
    from hvdbench.core.run_facts import hca_named_down as _hca_named_down

    ports = parse_hca_ports((FIXTURES / "ibstat-roce200-ethernet-and-down.txt").read_text())
    assert named_down("=mlx5_10", ports) == ["NCCL_IB_HCA names mlx5_10, and its port(s) are not active (mlx5_10 port "
                                             "1 down)"]
    assert named_down("mlx5_10:1,mlx5_0", ports) == [named_down("=mlx5_10", ports)[0].replace("mlx5_10,", "mlx5_10:1,")]
    assert named_down("mlx5_1", ports) == []  # a prefix: mlx5_1 is active, mlx5_10 is not: NCCL keeps mlx5_1
    assert named_down("^mlx5_10", ports) == [] and named_down("=mlx5_9", ports) == [
        "NCCL_IB_HCA names mlx5_9, which is no HCA port of this node"]

    class Facts:
        env = {"variables": {"NCCL_IB_HCA": "=mlx5_10"}, "node_fabric": {"hca_ports": ports}}

    assert _hca_named_down(Facts()) == named_down("=mlx5_10", ports)[0]  # type: ignore[arg-type]
    import pandas as pd

    from hvdbench.analysis.tables.system import fabric_alerts

    runs = pd.DataFrame({"run_id": ["r1"], "status": ["ok"], "nodes": [2], "fabric_warnings": [None],
                         "hca_named_down": [_hca_named_down(Facts())]})  # type: ignore[arg-type]
    assert fabric_alerts(runs) == ["Fabric warning: r1: NCCL_IB_HCA names mlx5_10, and its port(s) are not active "
                                   "(mlx5_10 port 1 down) on its first node: its traffic went another way, or nowhere "
                                   "(hvdbench fabric checks the ports)."]
    assert cli.main(["fabric", "--json", str(FIXTURES / "ibstat-roce200-ethernet-and-down.txt")]) == 1
    said = json.loads(capsys.readouterr().out)
    assert said["gpudirect_rdma"] is None and "mlx5_10 port 1 is down (Disabled)" in said["sources"][0]["flagged"]
    assert len(said["sources"][0]["ports"]) == len(ports)


@pytest.mark.bad_input
def test_two_jobs_in_one_log_are_two_runs_however_their_banners_are_prefixed() -> None:
    """A run of host gpu6 (NCCL 2.4.2, its banner behind a process's prefix) and then one of host kolyoz1 (2.21.5,
    its banner bare): two runs, each with its own version, network and devices; the one job of 16 ranks printing
    one version each stays one run."""
    from hvdbench.readers.nccl_log import parse_nccl_runs

    first = [line.replace("[1,0]<stdout>:NCCL version", "[1,0]<stdout>:gpu6:1407:1595 [0] NCCL INFO NCCL version")
             for line in (FIXTURES / "horovod-roce-34hca-nccl2.4.2.txt").read_text().splitlines()]
    second = [line for line in (FIXTURES / "plugin-ibext-v8-gdrdma-h100-nccl2.21.5.txt").read_text().splitlines()
              if not line.startswith("#")]
    runs = parse_nccl_runs([*first, *second])
    assert [(r.nccl_version, r.network) for r in runs] == [("2.4.2+cuda10.0", "RoCE"), ("2.21.5+cuda12.4", "IBext_v8")]
    assert all("mlx5" in " ".join(runs[0].devices) for _ in (0,)) and runs[1].devices != runs[0].devices
