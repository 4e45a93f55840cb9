"""A real two-node SLURM cluster that hands out GPUs (tests/gpu_cluster.py): sweeps over 1 and 2 nodes x 1
and 2 GPUs per node through submitit and through the sbatch template, srun and mpirun inside the
allocation, one GPU per task, and a rank killed on node2 whose run is retried. Every rank records its
host, Horovod's cross rank layout and the GPU SLURM gave it; the report has the node axis."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from hvdbench.launchers.queues import refresh
from hvdbench.core.records import rank_log_name

from conftest import BIN, REPO
from slurm_runs import TINY, cli, envs, mlp_args, running_run, settled_ok, status_of, sweep_file

pytestmark = [pytest.mark.slow, pytest.mark.mpi, pytest.mark.timeout(900)]


def _check_layout(run_dir: Path, nodes: int, per_node: int, how: str) -> None:
    spec = json.loads((run_dir / "run.json").read_text())["spec"]
    assert (spec["nodes"], spec["np"]) == (nodes, nodes * per_node)
    ranks = envs(run_dir)
    assert len(ranks) == nodes * per_node
    hosts = {e["host"] for e in ranks}
    assert len(hosts) == nodes and hosts <= {"node1", "node2"}, hosts
    for env in ranks:
        layout = (env["horovod"] or env["torchrun"])["layout"]  # torchrun's ranks meet without Horovod
        assert layout["cross_size"] == nodes and layout["local_size"] == per_node
        choice, variables = env["gpu_choice"], env["variables"]
        assert choice["how"] == how and choice["physical"] in range(4), choice
        given = variables.get("SLURM_STEP_GPUS") or variables.get("SLURM_JOB_GPUS")
        assert given and str(choice["physical"]) in given.split(","), (choice, variables)
        assert variables["CUDA_VISIBLE_DEVICES"] == choice["visible"]  # SLURM's, not overwritten
    for host in {e["host"] for e in ranks}:  # the ranks of one node were given distinct GPUs
        physical = [e["gpu_choice"]["physical"] for e in ranks if e["host"] == host]
        assert len(set(physical)) == len(physical) or how == "the only visible GPU", physical


def test_submitit_sweeps_over_nodes_and_gpus_per_node_get_the_gpus_slurm_grants(gpu_cluster: Any,
                                                                                  tmp_path: Path) -> None:
    started = time.monotonic()
    grid = sweep_file(tmp_path, "grid", f"launcher: srun\nworkloads: [{{benchmark: mlp, args: {TINY}}}]\n"
                                    "axes: {nodes: [1, 2], gpus_per_node: [1, 2]}\nslurm: {time: 10, partition: gpu}")
    per_task = sweep_file(tmp_path, "per-task", f"launcher: srun\nworkloads: [{{benchmark: mlp, args: {TINY}}}]\n"
                                            "axes: {nodes: [2], gpus_per_node: [2]}\n"
                                            "slurm: {time: 10, gpus_per_task: true}")
    too_big = sweep_file(tmp_path, "too-big", f"launcher: srun\nworkloads: [{{benchmark: mlp, args: {TINY}}}]\n"
                                          "axes: {nodes: [3], gpus_per_node: [1]}")
    refused = cli("submit", str(too_big), "-o", str(tmp_path / "never"))
    assert refused.returncode != 0 and "needs 3 nodes but the default partition has 2" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and not (tmp_path / "never").exists()
    for sweep, root in ((grid, tmp_path / "grid"), (per_task, tmp_path / "per-task")):
        out = cli("submit", str(sweep), "-o", str(root))
        assert out.returncode == 0, out.stderr
    settled_ok(tmp_path / "grid", 4, gpu_cluster)
    settled_ok(tmp_path / "per-task", 1, gpu_cluster)
    for run_dir in (tmp_path / "grid").glob("mlp-*"):
        spec = json.loads((run_dir / "run.json").read_text())["spec"]
        nodes = spec["nodes"]
        _check_layout(run_dir, nodes, spec["np"] // nodes, "local rank" if spec["np"] // nodes > 1
                      else "the only visible GPU")
    _check_layout(next((tmp_path / "per-task").glob("mlp-*")), 2, 2, "the only visible GPU")
    report = cli("report", str(tmp_path / "grid"))
    assert report.returncode == 0, report.stderr
    csv = (tmp_path / "grid" / "report" / "scaling.csv").read_text().splitlines()
    nodes_column = csv[0].split(",").index("nodes")
    assert sorted({line.split(",")[nodes_column] for line in csv[1:]}) == ["1", "2"]
    print(f"\n[two-node cluster] submitit sweeps: {time.monotonic() - started:.0f} s")


def test_the_sbatch_template_runs_srun_and_mpirun_across_two_nodes(gpu_cluster: Any, tmp_path: Path) -> None:
    started = time.monotonic()
    sweep = sweep_file(tmp_path, "in-job", f"launcher: [srun, mpirun]\ntransport: tcp\n"
                                      f"workloads: [{{benchmark: mlp, args: {TINY}}}]\n"
                                      "axes: {nodes: [2], gpus_per_node: [2]}")
    root = tmp_path / "results"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    out = subprocess.run(["sbatch", "--parsable", "--nodes=2", "--ntasks-per-node=2", "--gpus-per-node=2",
                          f"--output={tmp_path}/job-%j.out", f"--export=ALL,HVDBENCH={BIN / 'hvdbench'}",
                          str(REPO / "slurm" / "hvdbench.sbatch"), str(sweep), "-o", str(root)],
                         capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 420
    while subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True).stdout.strip() \
            not in ("", "COMPLETED") and time.monotonic() < deadline:
        time.sleep(2)
    log = (tmp_path / f"job-{job}.out").read_text()
    states = {d.name: s.status for d, s in refresh(root).items()}
    assert sorted(states.values()) == ["ok", "ok"], f"{states}\n{log[-3000:]}\n{gpu_cluster.log_tail()}"
    for run_dir in root.glob("mlp-*"):
        _check_layout(run_dir, 2, 2, "local rank")
        spec = json.loads((run_dir / "run.json").read_text())["spec"]
        assert spec["transport"] == "tcp"
        env0 = envs(run_dir)[0]
        assert env0["variables"].get("OMPI_MCA_pml") == "ob1"  # transport tcp reached Open MPI either way
        assert (env0["mpi_components"] or {}).get("pml") == ["ob1"], env0["mpi_components"]
    print(f"\n[two-node cluster] sbatch template, srun and mpirun: {time.monotonic() - started:.0f} s")


def test_submit_runs_every_launcher_across_two_nodes_with_a_typed_gpu(gpu_cluster: Any, tmp_path: Path) -> None:
    """The docs' own slurm: {partition, gpu_type} through a real submit (it died in submitit's parameter check), and
    mpirun, horovodrun (Gloo and MPI controllers) and torchrun across two nodes under submit (they were refused: the
    first task starts every rank over the job's hosts; horovodrun's ssh reaches the other node through srun, no sshd
    there)."""
    started = time.monotonic()
    ddp = TINY.replace("]", ", --exchange, ddp]")
    for name, head, args in (("typed", "launcher: mpirun\ntransport: tcp", TINY),
                             ("horovod", "launcher: horovodrun\ncontroller: [gloo, mpi]", TINY),
                             ("torchrun", "launcher: torchrun", ddp)):
        sweep = sweep_file(tmp_path, name, f"{head}\nworkloads: [{{benchmark: mlp, args: {args}}}]\n"
                                           "axes: {nodes: [2], gpus_per_node: [1]}\n"
                                           "slurm: {time: 10, partition: gpu, gpu_type: h100}")
        out = cli("submit", str(sweep), "-o", str(tmp_path / name))
        assert out.returncode == 0, out.stderr
    for root, runs in (("typed", 1), ("horovod", 2), ("torchrun", 1)):
        settled_ok(tmp_path / root, runs, gpu_cluster)
        for run_dir in (tmp_path / root).glob("mlp-*"):
            _check_layout(run_dir, 2, 1, "the only visible GPU")
    script = next((tmp_path / "typed").rglob("*_submission.sh")).read_text()
    assert "#SBATCH --gres=gpu:h100:1" in script and "#SBATCH --partition=gpu" in script
    print(f"\n[two-node cluster] submit, typed GPU, mpirun, horovodrun and torchrun over the allocation: "
          f"{time.monotonic() - started:.0f} s")


def test_a_rank_killed_on_node2_is_retried_and_nothing_measured_is_lost(gpu_cluster: Any, tmp_path: Path) -> None:
    started = time.monotonic()
    sweep = sweep_file(tmp_path, "retried", f"launcher: srun\nretries: 1\nworkloads: [{{benchmark: mlp, args: "
                                            f"{mlp_args(400)}}}]\naxes: {{nodes: [2], gpus_per_node: [1]}}\n"
                                            f"slurm: {{time: 10}}")
    root = tmp_path / "results"
    assert cli("submit", str(sweep), "-o", str(root)).returncode == 0
    run_dir, pid = running_run(root, 1)
    measured = (run_dir / rank_log_name(0)).read_text()
    os.kill(pid, signal.SIGKILL)  # rank 1 runs on node2
    settled_ok(root, 1, gpu_cluster, timeout=480)
    first = run_dir / "attempt-1"
    status = status_of(first)  # kept as how it ended
    assert status["status"] == "failed" and "retry 1 of 1, job" in status["message"], status
    assert (first / rank_log_name(0)).read_text().startswith(measured[:200])  # the first attempt's logs kept
    assert {e["host"] for e in envs(run_dir)} == {"node1", "node2"}
    report = cli("report", str(root))
    assert report.returncode == 0 and "Retried runs" in (root / "report" / "report.md").read_text()
    print(f"\n[two-node cluster] killed rank retried: {time.monotonic() - started:.0f} s")


def test_nccl_tests_between_the_nodes_run_as_steps_and_are_taken_in(gpu_cluster: Any, tmp_path: Path) -> None:
    """hvdbench fabric --nccl-tests over the two nodes: the pair's step runs through srun on both (a stand-in for
    all_reduce_perf prints a recorded output from its first task), its output is kept and taken in as a run."""
    started = time.monotonic()
    recorded = Path(__file__).parent / "fixtures" / "nccl-tests" / "all_reduce_perf-2node.txt"
    program = tmp_path / "all_reduce_perf"
    program.write_text(f"#!/bin/bash\nif [[ $SLURM_PROCID == 0 && $SLURM_STEP_NUM_NODES == 2 ]]; then\n"
                       f"    sed 's/node01/node1/; s/node02/node2/' {recorded}\nfi\n")
    program.chmod(0o755)
    out = cli("fabric", "--nccl-tests", str(program), "--hosts", "node1,node2", "--gpus-per-node", "1", "--mpi", "none",
              "-o", str(tmp_path / "fabric"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "hosts node1,node2: busbw 75.06 GB/s at the largest size" in out.stdout, out.stdout
    assert (tmp_path / "fabric" / "nccl-tests" / "node1-node2.txt").stat().st_size > 0
    print(f"\n[two-node cluster] nccl-tests between the nodes: {time.monotonic() - started:.0f} s")
