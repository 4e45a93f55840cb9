"""MPICH and Intel MPI for real, beside Open MPI: the environments scripts/mpi-env.sh makes (.venv-mpich on
Debian's MPICH, .venv-impi on Intel MPI's PyPI packages: Horovod built against each, mpi4py using each, its
hydra mpiexec first on PATH) each run a sweep with ``launcher: mpiexec`` across two hosts (this one and a
network namespace with its own name and address): raw-MPI collectives through mpi4py and a workload
trained through Horovod's MPI controller, every rank recording the MPI library it loaded. Inside the
two-node SLURM cluster, ``srun --mpi=pmi2`` starts each one's ranks. The Open MPI environment is left as
it was (its own ranks still load Open MPI)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from builds import built_beside
from conftest import REPO, run_folders
from slurm_runs import TINY, envs, settled_ok, sweep_file

# the limit is the test's own: the wait for an environment still building (scripts/test.sh) is not counted in it
pytestmark = [pytest.mark.slow, pytest.mark.late, pytest.mark.other_mpi,
              pytest.mark.timeout(900, func_only=True)]

# environment -> (what its ranks load, what mpiexec --version names)
MPIS = {"mpich": ("MPICH", "ch4:ucx"), "impi": ("Intel MPI", None)}
COLLECTIVES = "[--ops, allreduce, --backends, 'mpi,horovod', --min-bytes, '8', --max-bytes, 1M, --factor, '16', " \
              "--iters, '5', --warmup-iters, '2']"


@pytest.fixture(params=sorted(MPIS))
def other_mpi(request: pytest.FixtureRequest) -> tuple[str, Path, dict[str, str]]:
    """(name, its bin/, the caller's environment with that bin/ first on PATH, as 'source
    .venv-NAME/bin/activate' gives: its hvdbench, python, mpiexec and mpicc)."""
    name = request.param
    bin_dir = REPO / f".venv-{name}" / "bin"
    built_beside(name)  # where make test builds it beside the other tests
    if not (bin_dir / "hvdbench").exists():
        pytest.skip(f"no .venv-{name}: scripts/mpi-env.sh {name} makes it (make test runs it)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "PMIX_"))}
    return name, bin_dir, {**env, "PATH": f"{bin_dir}{os.pathsep}{env['PATH']}", "VIRTUAL_ENV": str(bin_dir.parent)}


def _loaded(run_dir: Path) -> list[dict[str, Any]]:
    return [(e["mpi"] or {}).get("loaded") or {} for e in envs(run_dir)]


def test_mpiexec_runs_collectives_and_horovod_across_two_hosts(other_mpi: tuple[str, Path, dict], namespace_host: Any,
                                                              tmp_path: Path) -> None:
    name, bin_dir, env = other_mpi
    host = namespace_host
    sweep = tmp_path / f"{name}-two-hosts.yaml"
    sweep.write_text(f"""
name: {name}-two-hosts
system: netns
launcher: mpiexec
transport: tcp
hosts: [{host.local_address}, {host.address}]
ssh_port: {host.port}
ssh_identity_file: {host.key}
timeout: 300
baseline: false
workloads:
  - {{benchmark: mlp, args: {TINY}}}
  - {{benchmark: collectives, args: {COLLECTIVES}}}
axes: {{nodes: [2], gpus_per_node: [1], env: {{UCX_NET_DEVICES: {host.iface}}}}}
""")
    root = tmp_path / "results"
    out = subprocess.run([str(bin_dir / "hvdbench"), "sweep", str(sweep), "-o", str(root)], capture_output=True,
                         text=True, env=env, timeout=800)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    runs = {d.name.split("-")[0]: d for d in run_folders(root)}
    assert sorted(runs) == ["collectives", "mlp"]
    for run_dir in runs.values():
        command = (run_dir / "command.sh").read_text()
        assert "mpiexec -n 2 -ppn 1 -hosts " in command and f"HVDBENCH_SSH_ARGS=-p {host.port} -i " in command
        assert [e["host"] == host.name for e in envs(run_dir)] == [False, True]
        loaded = _loaded(run_dir)
        assert {(m.get("implementation"), m.get("device")) for m in loaded} == {MPIS[name]}, loaded
    assert all(e["horovod"]["controller"] == "mpi" for e in envs(runs["mlp"]))
    comm = pd.read_csv(root / "report" / "collectives.csv")
    assert {"mpi", "horovod"} <= set(comm["backend"]) and comm["busbw_gbs"].gt(0).all()
    runs = pd.read_csv(root / "report" / "runs.csv")
    assert {m.split()[0] for m in runs["mpi"]} == {MPIS[name][0].split()[0]}  # the MPI each run loaded


def test_open_mpi_ranks_still_load_open_mpi(hvd_env: dict, tmp_path: Path) -> None:
    """Installing MPICH and Intel MPI beside it changed nothing for the first environment."""
    from conftest import hvdbench_exe

    out = tmp_path / "results"
    proc = subprocess.run([hvdbench_exe(), "run", "mlp", "--np", "2", "--launcher", "mpirun", "--output", str(out),
                           "--mlp-input", "32", "--mlp-widths", "32", "--steps", "4", "--warmup-steps", "1",
                           "--threads", "1"], capture_output=True, text=True, env=hvd_env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run_dir,) = run_folders(out)
    assert {m.get("implementation") for m in _loaded(run_dir)} == {"Open MPI"}


def test_srun_pmi2_and_mpiexec_start_the_ranks_on_two_slurm_nodes(other_mpi: tuple[str, Path, dict], gpu_cluster: Any,
                                                                   tmp_path: Path) -> None:
    """Two submits on the two-node SLURM: srun with SLURM's pmi2 wires each rank; hydra's mpiexec, run by the
    job's first task over the allocation's hosts, starts its proxies through SLURM (no sshd on the nodes)."""
    name, bin_dir, env = other_mpi
    for launcher, extra in (("srun", "mpi: pmi2, "), ("mpiexec", "")):
        sweep = sweep_file(tmp_path, f"{name}-{launcher}", f"launcher: {launcher}\n"
                                                           f"workloads: [{{benchmark: mlp, args: {TINY}}}]\n"
                                                           "axes: {nodes: [2], gpus_per_node: [1]}\n"
                                                           f"slurm: {{{extra}time: 10}}")
        out = subprocess.run([str(bin_dir / "hvdbench"), "submit", str(sweep), "-o", str(tmp_path / launcher)],
                             capture_output=True, text=True, env={**env, **gpu_cluster.env}, timeout=300)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    for launcher in ("srun", "mpiexec"):
        root = tmp_path / launcher
        settled_ok(root, 1, gpu_cluster)
        (run_dir,) = run_folders(root)
        ranks = envs(run_dir)
        assert [e["variables"].get("PMI_RANK") for e in ranks] == ["0", "1"]  # pmi2's or hydra's PMI wired each rank
        assert {e["host"] for e in ranks} == {"node1", "node2"}
        assert {m.get("implementation") for m in _loaded(run_dir)} == {MPIS[name][0]}
    assert (tmp_path / "mpiexec" / run_dir.name / "command.sh").read_text().startswith("mpiexec -n 2 -ppn 1 -hosts ")
