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
