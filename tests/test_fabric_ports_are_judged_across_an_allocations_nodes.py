"""``hvdbench fabric --all-nodes``: every node of an allocation asked for its HCA ports in one command (ibstat as a
one-task srun step a node), each node judged on its own, the nodes set against one another (a node whose links all
trained down, or that shows a port fewer, which its own ports cannot show), its drain command printed, a node that
does not answer flagged, in text and JSON."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hvdbench.cli import main
from hvdbench.core.hca import allocation_findings, parse_hca_ports
from hvdbench.launchers.fabric_ports import ask_nodes, port_steps

FIXTURE = Path(__file__).parent / "fixtures" / "nccl" / "ibstat-h100-ndr400-one-ca.txt"


def _two_ports(rate: str = "400") -> str:
    """Two NDR ports (mlx5_0, mlx5_1) as ibstat prints them, at ``rate``."""
    one = FIXTURE.read_text(encoding="utf-8").replace("Rate: 400", f"Rate: {rate}")
    return one.replace("'mlx5_5'", "'mlx5_0'") + one.replace("'mlx5_5'", "'mlx5_1'")


def test_the_nodes_are_set_against_one_another() -> None:
    good, slow = parse_hca_ports(_two_ports()), parse_hca_ports(_two_ports("200"))
    assert allocation_findings({"node01": good, "node02": good, "node03": slow}) == [
        "node03's fastest InfiniBand port runs 200 Gb/s where other nodes' run 400: the node's links trained down "
        "(a switch port, a cable, a NIC setting)"]
    assert allocation_findings({"node01": good, "node02": good, "node03": good[:1]}) == [
        "node03 has 1 active InfiniBand port(s) where most nodes have 2"]
    assert allocation_findings({"node01": good, "node02": good}) == [] and allocation_findings({"node01": slow}) == []


def test_each_node_is_asked_by_its_own_step_and_one_that_hangs_or_fails_is_said() -> None:
    assert port_steps(["node01"]) == [("node01", ["srun", "--nodes=1", "--ntasks=1", "--nodelist=node01", "--quiet",
                                                  "ibstat"])]

    def srun(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        node, tool = argv[3].split("=", 1)[1], argv[-1]
        if node == "node02":
            raise subprocess.TimeoutExpired(argv, kwargs["timeout"])
        if node == "node03" and tool == "ibstat":  # no ibstat there: ibv_devinfo is asked next
            return subprocess.CompletedProcess(argv, 127, "", "srun: error: execve(): ibstat: No such file\n")
        return subprocess.CompletedProcess(argv, 0, _two_ports() if tool == "ibstat" else "", "")

    got = ask_nodes(["node01", "node02", "node03"], 5, srun)
    assert [(n, text is not None) for n, text, _ in got] == [("node01", True), ("node02", False), ("node03", False)]
    assert got[1][2] == "srun ibstat did not finish in 5 s" and got[2][2] == "srun ibv_devinfo: exit 0: no output"


@pytest.mark.slow
def test_fabric_all_nodes_asks_every_node_and_names_the_one_to_drain(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for node, rate in (("node01", "400"), ("node02", "400"), ("node03", "200"), ("node04", "400")):
        (tmp_path / f"{node}.txt").write_text(_two_ports(rate), encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(  # a stand-in srun: each node's saved ibstat, node04 never answers
        "#!/bin/sh\nfor a; do case $a in --nodelist=*) node=${a#--nodelist=};; esac; done\n"
        f"[ \"$node\" = node04 ] && exit 1\ncat {tmp_path}/$node.txt\n", encoding="utf-8")
    (bin_dir / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "node[01-04]")
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    assert main(["fabric", "--all-nodes", "--timeout", "30"]) == 1
    out = capsys.readouterr().out
    assert "node01:\n  mlx5_0 port 1: active, LinkUp, 400 Gb/s, InfiniBand" in out
    assert "node04: no answer (srun ibv_devinfo: exit 1: no output)" in out
    assert "flagged across the nodes: node03's fastest InfiniBand port runs 200 Gb/s where other nodes' run 400" in out
    assert "to take it out of service: scontrol update NodeName=node03 State=DRAIN" in out
    assert main(["fabric", "--all-nodes", "--hosts", "node01,node02", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["source"] for s in data["sources"]] == ["node01", "node02"] and data["across_nodes"] == []
    assert main(["fabric", "--all-nodes", str(tmp_path / "node01.txt")]) == 2
    assert "--all-nodes asks every node" in capsys.readouterr().err
