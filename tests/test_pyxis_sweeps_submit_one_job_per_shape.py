"""Ranks in a pyxis image through ``hvdbench submit``: srun's --container-* flags reach only the tasks of an srun that
gets them, so the sweep goes as one batch job per shape (nodes x ranks per node) whose batch step runs that shape's
runs in its allocation. The scripts are golden (sized from the sweep: nodes, a task and typed GPU per rank, CPUs for a
rank and its loader's workers, time for its runs in turn, partition, account, QOS), kept beside the results, and each
run is marked with its job's id; the in-allocation step takes only its shape."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from hvdbench.core.errors import LaunchError
from hvdbench.launchers import slurm_allocation as allocation
from hvdbench.launchers.plan import plan
from hvdbench.launchers.job_shape import NodeShape
from hvdbench.launchers.sweep import load_sweep

SWEEP = Path(__file__).parent / "fixtures" / "pyxis-submit" / "sweep.yaml"
GOLDEN_2X8 = """#!/bin/bash
# hvdbench: the 1 run(s) of shape 2x8 (nodes x ranks per node) of sweep.yaml, one after another in this allocation, \
each with its own limit;
# the time asks 18 min a run. Made by hvdbench submit; resubmitting resumes.
# CPUs a rank: 14 (the partition's nodes: 112 CPUs / 8 GPUs; a rank and its loader's workers need 7).
#SBATCH --time=18
#SBATCH --job-name=hvdbench-pyxis-scaling-2x8
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --cpus-per-task=14
#SBATCH --gres=gpu:h100:8
#SBATCH --partition=gpu
#SBATCH --account=proj1
#SBATCH --qos=high
#SBATCH --output=/r/slurm-jobs/2x8-%j.out
#SBATCH --signal=B:USR2@120
set -euo pipefail
exec /py -m hvdbench.cli sweep {sweep} --in-allocation --shape 2x8 -o /r --no-report
"""


def _jobs(root: Path = Path("/r"), nodes: NodeShape | None = NodeShape(112, 8)) -> tuple[
        list[allocation.AllocationJob], Any]:
    sweep = load_sweep(SWEEP)
    planned = plan(sweep, scheduled=True)
    options = sweep.scheduler.options if sweep.scheduler else None
    return allocation.allocation_jobs(planned.specs, options, name=sweep.name, sweep_file=SWEEP, root=root,
                                      command=["/py", "-m", "hvdbench.cli"], container=None,
                                      shape_of_nodes=nodes), planned


def test_each_shape_is_one_job_sized_from_the_sweep() -> None:
    jobs, planned = _jobs()
    assert [job.shape for job in jobs] == ["1x1", "1x8", "2x8"]
    assert sorted(r for job in jobs for r in job.runs) == sorted(s.id for s in planned.specs)
    assert jobs[2].script == GOLDEN_2X8.format(sweep=SWEEP.resolve())
    assert "--gres=gpu:h100:1" in jobs[0].script and "--ntasks-per-node=1" in jobs[0].script
    unknown = _jobs(nodes=None)[0][2].script  # sinfo could not say: what a rank and its loader need, said
    assert "#SBATCH --cpus-per-task=7\n" in unknown and "sinfo could not say" in unknown
    small = _jobs(nodes=NodeShape(32, 8))[0][2].script  # 4 CPUs a GPU, less than the loader needs: the loader's
    assert "#SBATCH --cpus-per-task=7\n" in small and "more than the node's share of 4" in small


@pytest.mark.bad_input
@pytest.mark.parametrize("printed, job", [("9003\n", "9003"), ("9003;cluster1\n", "9003"),
                                          ("loading modules...\nSubmitted batch job 9003\n", "9003"),
                                          ("site banner\n9004\n", "9004")])
def test_a_job_id_is_read_from_what_sbatch_printed_however_chatty(printed: str, job: str) -> None:
    assert allocation.job_id_of(printed) == job


@pytest.mark.bad_input
def test_no_job_id_in_what_sbatch_printed_is_one_line_never_a_sentence_as_an_id() -> None:
    with pytest.raises(LaunchError, match="sbatch printed no job id .*Your job was accepted.*check squeue"):
        allocation.job_id_of("Your job was accepted\n")


def test_submit_keeps_the_scripts_and_marks_each_run_with_its_job(tmp_path: Path) -> None:
    jobs, planned = _jobs(tmp_path)
    asked: list[list[str]] = []

    def sbatch(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        asked.append(argv)
        return subprocess.CompletedProcess(argv, 0, f"{100 + len(asked)};cluster\n", "")

    assert allocation.submit(jobs, tmp_path, planned.specs, sbatch) == [("1x1", "101"), ("1x8", "102"), ("2x8", "103")]
    assert [a[-1] for a in asked] == [str(tmp_path / "slurm-jobs" / f"{s}.sbatch") for s in ("1x1", "1x8", "2x8")]
    assert (tmp_path / "slurm-jobs" / "2x8.sbatch").read_text() == jobs[2].script
    from hvdbench.core.spec import RunStatus

    two = next(s for s in planned.specs if s.nodes == 2)
    status = RunStatus.read(tmp_path / two.id)
    assert status is not None and status.status == "submitted" and status.job_id == "103"


@pytest.mark.bad_input
def test_sbatch_refusing_a_shape_is_one_line(tmp_path: Path) -> None:
    jobs, planned = _jobs(tmp_path)

    def refuse(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 1, "", "sbatch: error: Invalid account or account/partition\n")

    with pytest.raises(LaunchError, match="sbatch refused the job of shape 1x1: sbatch: error: Invalid account"):
        allocation.submit(jobs, tmp_path, planned.specs, refuse)


def test_the_dry_run_prints_every_script_and_the_in_allocation_step_takes_its_shape(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hvdbench.cli import main

    assert main(["submit", str(SWEEP), "-o", str(tmp_path / "r"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count("#!/bin/bash") == 3 and "3 job(s), one per shape, 3 run(s)" in out
    assert main(["sweep", str(SWEEP), "--shape", "2x8", "--dry-run", "-o", str(tmp_path / "r")]) == 0
    printed = capsys.readouterr().out
    assert "srun" in printed and "--container-image" in printed and "-np1-" not in printed
    assert main(["sweep", str(SWEEP), "--shape", "3x8", "--dry-run", "-o", str(tmp_path / "r")]) == 2
    assert "--shape 3x8: no run of" in capsys.readouterr().err
