"""A job asks what its run needs however the run's flags are spelled, in the shape its launcher starts tasks, and
nothing a user writes becomes a scheduler directive except through the keys hvdbench checks: the CPUs a rank and its
loader's workers need read by the workload's own parser (``--data files`` and ``--data=files`` alike) for SLURM,
pyxis and PBS; GPUs a task only where a task is a rank; a setup line that would be read as a directive refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from hvdbench.core.errors import UsageError
from hvdbench.core.spec import RunSpec
from hvdbench.launchers.pbs import PbsOptions, pbs_script
from hvdbench.launchers.slurm_allocation import allocation_jobs
from hvdbench.launchers.slurm_jobs import cpus_per_rank, job_parameters
from hvdbench.launchers.slurm_options import SlurmOptions
from hvdbench.launchers.sweep import load_sweep

SPELLINGS = [("--data", "files", "--data-dir", "/d", "--loader-workers", "8"),
             ("--data=files", "--data-dir=/d", "--loader-workers=8"),
             ("--loader-workers=8", "--data", "files", "--data-dir", "/d")]


@pytest.mark.parametrize("args", SPELLINGS)
def test_cpus_a_rank_needs_are_read_as_the_workload_reads_its_flags(tmp_path: Path, args: tuple[str, ...]) -> None:
    """Every spelling of 8 loader workers reading files: 9 CPUs a rank for an srun task, 8 ranks x 9 for mpirun's one
    task a node, the same for a pyxis shape's allocation and PBS's select line."""
    per_rank = RunSpec(benchmark="imagenet", np=8, launcher="srun", controller="mpi", args=args)
    per_node = RunSpec(benchmark="imagenet", np=8, launcher="mpirun", controller="mpi", args=args)
    assert cpus_per_rank(per_rank) == 9 and job_parameters(SlurmOptions(), per_rank, "s")["cpus_per_task"] == 9
    assert job_parameters(SlurmOptions(), per_node, "s")["cpus_per_task"] == 72
    [job] = allocation_jobs([per_node], SlurmOptions(), name="s", sweep_file=tmp_path / "s.yaml", root=tmp_path,
                            command=["hvdbench"], container=None)
    assert "#SBATCH --cpus-per-task=72" in job.script
    assert "ncpus=72" in pbs_script(per_node, PbsOptions(), "s", tmp_path / "run", "python3")


def test_a_task_gets_one_gpu_only_where_a_task_is_a_rank() -> None:
    """gpus_per_task with srun (a task a rank): one GPU a task; with mpirun (one task a node starts every rank):
    the node's GPUs, as without it, never one GPU for eight ranks."""
    options = SlurmOptions(gpus_per_task=True)
    srun = RunSpec(benchmark="imagenet", np=8, launcher="srun", controller="mpi")
    mpirun = RunSpec(benchmark="imagenet", np=8, launcher="mpirun", controller="mpi")
    assert job_parameters(options, srun, "s")["gpus_per_task"] == 1
    params = job_parameters(options, mpirun, "s")
    assert "gpus_per_task" not in params and params["gpus_per_node"] == 8 and params["tasks_per_node"] == 1
    typed = job_parameters(SlurmOptions(gpus_per_task=True, gpu_type="h100"), mpirun, "s")
    assert typed["slurm_gres"] == "gpu:h100:8" and "gpus_per_task" not in typed["slurm_additional_parameters"]


SWEEP = """name: s
workloads: [cifar10]
axes: {np: [1]}
"""


@pytest.mark.parametrize("block, line", [("slurm", "#SBATCH --gpus-per-node=1"), ("slurm", "  #sbatch --partition=x"),
                                         ("pbs", "#PBS -l select=1:ngpus=1"), ("pbs", "#PBS -q other")])
def test_a_setup_line_that_would_be_read_as_a_directive_is_refused(tmp_path: Path, block: str, line: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(SWEEP + f"{block}:\n  setup: [module load cuda, {line!r}]\n")
    with pytest.raises(UsageError) as caught:
        load_sweep(path)
    said = str(caught.value)
    assert f"{block}.setup[1]: " in said and "would be read as a" in said and "\n" not in said
    path.write_text(SWEEP + f"{block}:\n  setup: [module load cuda, 'echo {line.strip()[1:]}']\n")
    assert load_sweep(path)  # the same words, not at the start of the line: a command


SINFO = "gpu01|gpu:h100:8(S:0-1)|gpu*|112\ngpu02|gpu:h100:8(S:0-1)|gpu*|112\nlogin|(null)|cpu|16\n"


def test_a_rank_gets_its_nodes_share_of_cpus_and_the_dry_run_shows_the_job_as_submitted(tmp_path: Path) -> None:
    """2 x 8 ranks under mpirun on nodes of 112 CPUs and 8 H100s (as a stand-in sinfo says): the job script is the
    one sbatch would get (no --wckey=submitit), 14 CPUs a rank (its share; its loader needs 5) so 112 for the one
    task a node, and the first task's line is mpirun's over the allocation's two nodes; without sinfo, what the
    loader needs, said; a sweep's cpus_per_task overrides either."""
    import os
    import subprocess
    import sys

    from conftest import hvdbench_exe
    from hvdbench.launchers.job_shape import NodeShapes
    from hvdbench.launchers.slurm_jobs import NodeShape, node_shape, rank_cpus

    def sinfo(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        assert argv[:5] == ["sinfo", "-h", "-N", "-o", "%N|%G|%P|%c"]
        return subprocess.CompletedProcess(argv, 0, SINFO, "")

    assert node_shape("gpu", sinfo) == NodeShapes((NodeShape(112, 8),)) == node_shape(None, sinfo)
    spec = RunSpec(benchmark="imagenet", np=16, nodes=2, launcher="mpirun", controller="mpi",
                   args=("--data", "loader", "--loader-workers", "4"))
    assert rank_cpus(SlurmOptions(), spec, NodeShape(112, 8))[0] == 14
    assert rank_cpus(SlurmOptions(), spec, None) == (5, "what a rank and its loader needs: sinfo could not say what "
                                                        "the partition's nodes hold; slurm.cpus_per_task sets it")
    assert rank_cpus(SlurmOptions(cpus_per_task=3), spec, NodeShape(112, 8)) == (3, "slurm.cpus_per_task")
    from hvdbench.launchers.slurm_jobs import partition_problem

    small = lambda argv, **_: subprocess.CompletedProcess(argv, 0, SINFO.replace("|112", "|32"), "")  # noqa: E731
    greedy = RunSpec(benchmark="imagenet", np=16, nodes=2, launcher="srun", controller="mpi",
                     args=("--data", "loader", "--loader-workers", "4"))
    assert partition_problem([greedy], SlurmOptions(partition="gpu"), small) == (
        f"run {greedy.id} asks 5 CPU(s) for each of its 8 rank(s) a node (a rank and its loader's workers) but "
        "partition gpu's smallest nodes that hold it have 32: fewer --loader-workers, or fewer ranks a node")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sinfo").write_text("#!/bin/sh\ncat <<'EOF'\n" + SINFO + "EOF\n")
    (bin_dir / "sinfo").chmod(0o755)
    sweep = tmp_path / "m.yaml"
    sweep.write_text("name: t\nlauncher: mpirun\nworkloads: [{benchmark: imagenet, args: [--data, loader, "
                     "--loader-workers, '4']}]\naxes: {nodes: [2], gpus_per_node: [8]}\n"
                     "slurm: {partition: gpu, time: 30, gpu_type: h100}\n")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    out = subprocess.run([hvdbench_exe(), "submit", str(sweep), "--dry-run", "-o", str(tmp_path / "r")],
                         capture_output=True, text=True, env=env, timeout=120, check=True).stdout
    job = out.split("imagenet-np16-", 1)[1]
    assert "        #SBATCH --cpus-per-task=112\n" in job and "        #SBATCH --gres=gpu:h100:8\n" in job
    assert "        #SBATCH --nodes=2\n" in job and "        #SBATCH --ntasks-per-node=1\n" in job
    assert "wckey" not in out and sys.executable not in job.split("srun", 1)[0]
    assert ("    CPUs a rank: 14 (the partition's nodes that hold 8 GPU(s): 112 CPUs / 8 GPUs; a rank and its loader's "
            "workers need 5)") in job
    assert "mpirun -np 16 -H node1:8,node2:8 " in job and "GPU-hours: at most 8.5" in out


@pytest.mark.bad_input
@pytest.mark.parametrize("nodes, gpus, want", [
    ("gpu01|gpu:h100:8|gpu*|128\ngpu02|gpu:h100:8|gpu*|128\nsvc|(null)|gpu*|16\n", 8, 16),  # a GPU-less node beside
    ("big1|gpu:a100:8|gpu*|64\nbig2|gpu:a100:8|gpu*|64\nsmall|gpu:a100:2|gpu*|48\n", 8, 8),  # a 2-GPU node beside
    ("big1|gpu:a100:8|gpu*|64\nbig2|gpu:a100:8|gpu*|64\nsmall|gpu:a100:2|gpu*|48\n", 2, 8),  # fits either: the least
])
def test_cpus_a_rank_come_from_the_nodes_that_can_hold_the_run(nodes: str, gpus: int, want: int) -> None:
    """One GPU-less 16-CPU node in the partition gave 8-GPU jobs on 128-CPU nodes 3 CPUs a rank; a 48-CPU 2-GPU node
    beside 64-CPU 8-GPU ones asked 24 a rank x 8 = 192 a node that no node has. Sized from the nodes that can hold
    the run (and, of those, the least share), on SLURM and PBS alike."""
    import json
    import subprocess
    from types import SimpleNamespace

    from hvdbench.launchers.pbs import PbsOptions, pbs_script
    from hvdbench.launchers.pbs_queue import pbs_node_shape
    from hvdbench.launchers.slurm_jobs import node_shape, partition_problem, rank_cpus

    sinfo = lambda argv, **_: subprocess.CompletedProcess(argv, 0, nodes, "")  # noqa: E731
    spec = RunSpec(benchmark="imagenet", np=2 * gpus, nodes=2, launcher="srun", controller="mpi")
    cpus, why = rank_cpus(SlurmOptions(), spec, node_shape(None, sinfo))
    assert cpus == want and f"the partition's nodes that hold {gpus} GPU(s)" in why
    assert cpus * spec.ranks_per_node <= 64 or want == 16
    assert partition_problem([spec], SlurmOptions(), sinfo) is None
    pbs = {"nodes": {line.split("|")[0]: {"resources_available": {
        "ncpus": int(line.split("|")[3]), **({"ngpus": int(line.split("|")[1].rsplit(":", 1)[1])} if "gpu:" in
                                            line else {})}} for line in nodes.splitlines()}}
    shapes = pbs_node_shape(lambda argv, **_: SimpleNamespace(returncode=0, stdout=json.dumps(pbs), stderr=""),
                            gpus=False)
    script = pbs_script(spec, PbsOptions(), "t", Path("/r") / spec.id, "py", 0, shapes)
    assert f"# CPUs a rank: {want} (PBS's nodes that hold {gpus} GPU(s)" in script
