"""The CPU binder: each local rank (as Open MPI, SLURM or Horovod numbers it) runs on its GPU's CPUs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hvdbench.core.bind import parse_cpus
from hvdbench.core.job_env import job_env
from hvdbench.core.records import ParseStats, rank_log_name, read_records

from conftest import hvdbench_exe

SHOW = "import os; print(sorted(os.sched_getaffinity(0)))"


def local_rank(env: dict[str, str]) -> int | None:
    return job_env(env).number("local_rank")


def test_local_rank_comes_from_whichever_launcher_started_the_rank() -> None:
    assert local_rank({"OMPI_COMM_WORLD_LOCAL_RANK": "3"}) == 3
    assert local_rank({"SLURM_LOCALID": "1"}) == 1
    assert local_rank({"HOROVOD_LOCAL_RANK": "2"}) == 2
    assert local_rank({"FLUX_TASK_LOCAL_ID": "5", "FLUX_JOB_ID": "f1"}) == 5
    # ranks an MPI launcher started inside a job's first task inherit its SLURM_LOCALID 0: the launcher's wins
    assert local_rank({"SLURM_JOB_ID": "7", "SLURM_LOCALID": "0", "OMPI_COMM_WORLD_LOCAL_RANK": "3"}) == 3
    assert local_rank({}) is None
    assert parse_cpus("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two CPUs")
@pytest.mark.parametrize("variable", ["OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "HOROVOD_LOCAL_RANK"])
def test_each_local_rank_gets_its_own_cpu_list(variable: str) -> None:
    for rank, cpus in ((0, [0]), (1, [1])):
        env = {k: v for k, v in os.environ.items() if k not in ("OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")}
        env[variable] = str(rank)
        out = subprocess.run([sys.executable, "-m", "hvdbench.core.bind", "0;1", "--", "-c", SHOW],
                             capture_output=True, text=True, env=env)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == str(cpus)


def test_a_cpu_the_host_lacks_is_one_line_and_no_run() -> None:
    env = {**os.environ, "SLURM_LOCALID": "0"}
    out = subprocess.run([sys.executable, "-m", "hvdbench.core.bind", "4096-4099", "--", "-c", "print('ran')"],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.startswith("error: CPU binding of local rank 0 to '4096-4099': CPU(s) [4096, 4097")
    out = subprocess.run([sys.executable, "-m", "hvdbench.core.bind", "0", "--", "-c", "print('ran')"],
                         capture_output=True, text=True, env={**env, "SLURM_LOCALID": "5"})
    assert out.returncode == 2 and "local rank 5 has no CPU list among 1" in out.stderr


@pytest.mark.slow
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two CPUs")
def test_a_sweep_binds_each_rank_to_its_gpus_cpus_through_horovodrun(tmp_path: Path, hvd_env: dict) -> None:
    topo = tmp_path / "topo.txt"
    topo.write_text("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tPIX\t0\t0\nGPU1\tPIX\t X \t1\t0\n")
    sweep = tmp_path / "bind.yaml"
    sweep.write_text(f"""
name: bind
topology: {topo}
baseline: false
workloads: [{{benchmark: mlp, args: [--device, cpu, --mlp-input, '32', --mlp-widths, '32', --steps, '3',
                                     --threads, '1']}}]
axes: {{np: [2], placements: [PIX]}}
""")
    out = subprocess.run([hvdbench_exe(), "sweep", str(sweep), "-o", str(tmp_path / "r"), "--no-report"],
                         capture_output=True, text=True, env=hvd_env, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:]
    run_dir = next((tmp_path / "r").glob("mlp-np2-*"))
    assert "-m hvdbench.core.bind '0;1' --" in (run_dir / "command.sh").read_text()
    for rank in (0, 1):
        env = next(r for r in read_records(run_dir / rank_log_name(rank), ParseStats()) if r["kind"] == "env")
        assert env["affinity"] == [rank] and env["variables"]["CUDA_VISIBLE_DEVICES"] == "0,1"
