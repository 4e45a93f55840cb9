"""Multi-node on one machine: two "hosts" (localhost and 127.0.0.1, the second reached through a local
sshd with a test key) for Gloo, and for MPI a second host with its own name and address (a network
namespace), so Horovod's cross-node layout, the hierarchical allreduce knob, NIC selection and the
report's node axis run for real."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from hvdbench.core.records import ParseStats, rank_log_name, read_records
from hvdbench.core.spec import RunSpec

from conftest import hvdbench_exe

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_a_two_host_sweep_spans_nodes_and_reports_the_node_axis(ssh_host: Any, tmp_path: Path, hvd_env: dict) -> None:
    sweep = tmp_path / "two-hosts.yaml"
    sweep.write_text(f"""
name: two-hosts
system: loopback
launcher: horovodrun
controller: gloo
hosts: [localhost, 127.0.0.1]
ssh_port: {ssh_host.port}
ssh_identity_file: {ssh_host.key}
timeout: 240
workloads:
  - {{benchmark: mlp, args: [--mlp-input, '32', --mlp-widths, '32', --steps, '8', --warmup-steps, '1', --threads, '1']}}
axes:
  nodes: [2]
  gpus_per_node: [1]
  env: {{HOROVOD_HIERARCHICAL_ALLREDUCE: ['0', '1']}}
""")
    root = tmp_path / "results"
    out = subprocess.run([hvdbench_exe(), "sweep", str(sweep), "-o", str(root)], capture_output=True, text=True,
                         env=hvd_env, timeout=540)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "sweep: 3 ok" in out.stdout
    spread = [d for d in root.iterdir() if (d / "run.json").exists() and RunSpec.read(d / "run.json").nodes == 2]
    assert len(spread) == 2
    for run_dir in spread:
        spec = RunSpec.read(run_dir / "run.json")
        command = (run_dir / "command.sh").read_text()
        assert "-H localhost:1,127.0.0.1:1" in command and f"--ssh-port {ssh_host.port}" in command
        hierarchical = spec.env_dict["HOROVOD_HIERARCHICAL_ALLREDUCE"] == "1"
        assert ("--hierarchical-allreduce" in command) == hierarchical
        layouts = []
        for rank in range(2):
            env = next(r for r in read_records(run_dir / rank_log_name(rank), ParseStats()) if r["kind"] == "env")
            layouts.append(env["horovod"]["layout"])
            assert env["variables"].get("HOROVOD_HIERARCHICAL_ALLREDUCE", "0") == ("1" if hierarchical else "0")
        assert layouts == [{"local_size": 1, "cross_rank": 0, "cross_size": 2},
                           {"local_size": 1, "cross_rank": 1, "cross_size": 2}]
    scaling = pd.read_csv(root / "report" / "scaling.csv")
    two = scaling[scaling["nodes"] == 2]
    assert len(two) == 2
    assert set(two["knobs"]) == {"HOROVOD_HIERARCHICAL_ALLREDUCE=0", "HOROVOD_HIERARCHICAL_ALLREDUCE=1"}
    assert two["node_speedup"].notna().all() and two["speedup"].notna().all()
    assert "By node count" in (root / "report" / "report.md").read_text()


@pytest.mark.mpi
def test_mpirun_across_a_namespace_host_spans_two_named_nodes(namespace_host: Any, tmp_path: Path,
                                                              hvd_env: dict) -> None:
    host = namespace_host
    sweep = tmp_path / "mpi-two-hosts.yaml"
    sweep.write_text(f"""
name: mpi-two-hosts
system: netns
launcher: mpirun
hosts: [{host.local_address}, {host.address}]
ssh_port: {host.port}
ssh_identity_file: {host.key}
timeout: 240
workloads:
  - {{benchmark: mlp, args: [--mlp-input, '32', --mlp-widths, '32', --steps, '8', --warmup-steps, '1', --threads, '1']}}
axes: {{nodes: [2], gpus_per_node: [1], env: {{NCCL_SOCKET_IFNAME: {host.iface}}}, exchange: [horovod, ddp]}}
""")
    root = tmp_path / "results"
    out = subprocess.run([hvdbench_exe(), "sweep", str(sweep), "-o", str(root)], capture_output=True, text=True,
                         env=hvd_env, timeout=540)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    spread = {RunSpec.read(d / "run.json").args.count("ddp"): d for d in root.iterdir()
              if (d / "run.json").exists() and RunSpec.read(d / "run.json").nodes == 2}
    run_dir = spread[0]
    # DDP across the two hosts: its ranks met at rank 0's address on the interface NCCL_SOCKET_IFNAME names
    ddp = [read_records(spread[1] / rank_log_name(rank), ParseStats()) for rank in range(2)]
    facts = next(r for r in ddp[0] if r["kind"] == "env")["exchange"]
    assert facts["rendezvous"].startswith(f"{host.local_address}:") and facts["gloo_interface"] == host.iface
    assert ddp[0][-1]["param_checksum"] == ddp[1][-1]["param_checksum"]
    command = (run_dir / "command.sh").read_text()
    assert f"-H {host.local_address}:1,{host.address}:1" in command
    assert f"btl_tcp_if_include {host.iface}" in command and f"plm_rsh_args '-p {host.port} -i " in command
    envs = [next(r for r in read_records(run_dir / rank_log_name(rank), ParseStats()) if r["kind"] == "env")
            for rank in range(2)]
    assert envs[1]["host"] == host.name and envs[0]["host"] != host.name
    assert [e["horovod"]["layout"] for e in envs] == [{"local_size": 1, "cross_rank": 0, "cross_size": 2},
                                                     {"local_size": 1, "cross_rank": 1, "cross_size": 2}]
    assert all(e["horovod"]["controller"] == "mpi" for e in envs)
    scaling = pd.read_csv(root / "report" / "scaling.csv")
    assert scaling.loc[scaling["nodes"] == 2, "node_speedup"].notna().all()
