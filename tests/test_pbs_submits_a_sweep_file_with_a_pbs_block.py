"""The submission side of a second scheduler: a sweep file's ``pbs:`` block sends its runs to PBS through qsub (one
job a run, its script kept under pbs-jobs/), whose one task starts every rank over the job's node file; qstat's
JSON says what the results cannot (queued, ended without a record, gone). The end-to-end test runs a real
Horovod job through a one-node PBS stand-in (tests/pbs_standin.py: qsub runs the script here, detached, with PBS's
variables); the rest are the script's golden lines, qstat's states and one-line refusals."""

from __future__ import annotations

from dataclasses import replace
import json
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conftest import hvdbench_exe, run_folders
from hvdbench.core.spec import RunSpec, RunStatus
from hvdbench.launchers.pbs import PbsOptions, pbs_script
from hvdbench.launchers.pbs_queue import pbs_node_shape
from hvdbench.launchers.job_shape import NodeShape
from hvdbench.launchers.pbs_queue import qstat_states
from hvdbench.launchers.queues import refresh
from hvdbench.launchers.schedulers import queue_of
from hvdbench.launchers.sweep import SweepError, load_sweep
from pbs_standin import install
from slurm_runs import envs

TINY = "[--mlp-input, '32', --mlp-widths, '32', --steps, '6', --warmup-steps, '1', --threads, '1']"


def _sweep(tmp_path: Path, pbs: str, launcher: str = "mpirun", extra: str = "") -> Path:
    path = tmp_path / "pbs-sweep.yaml"
    path.write_text(f"name: pbs-sweep\nlauncher: {launcher}\ntimeout: 300\nbaseline: false\n"
                    f"workloads: [{{benchmark: mlp, args: {TINY}}}]\n"
                    f"axes: {{nodes: [1], gpus_per_node: [2]}}\npbs: {pbs}\n{extra}")
    return path


@pytest.mark.slow
def test_a_pbs_block_submits_through_qsub_and_the_run_completes(hvd_env: dict, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    install(tmp_path / "bin", tmp_path / "pbs")
    env = {**hvd_env, "PATH": f"{tmp_path / 'bin'}:{hvd_env['PATH']}"}
    monkeypatch.setenv("PATH", env["PATH"])  # refresh() below asks the stand-in's qstat
    root = tmp_path / "results"
    out = subprocess.run([hvdbench_exe(), "submit", str(_sweep(tmp_path, "{gpus: false, time: 10}")), "-o", str(root)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "job 1.standin" in out.stdout
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        states = {d.name: s.status for d, s in refresh(root).items()}
        if set(states.values()) <= {"ok", "failed", "lost"}:
            break
        time.sleep(1)
    (run_dir,) = run_folders(root)
    assert states == {run_dir.name: "ok"}, (run_dir / "status.json").read_text()
    ranks = envs(run_dir)
    assert [e["variables"].get("PBS_JOBID") for e in ranks] == ["1.standin"] * 2  # both ranks inside the PBS job
    assert (run_dir / "command.sh").read_text().startswith("mpirun -np 2 -H localhost:2 ")  # over its node file
    script = (root / "pbs-jobs" / f"{run_dir.name}.pbs").read_text()
    assert "#PBS -l select=1:ncpus=2:mpiprocs=2\n" in script and "#PBS -l walltime=00:10:00\n" in script
    status = subprocess.run([hvdbench_exe(), "status", str(root)], capture_output=True, text=True, env=env, timeout=60)
    assert status.returncode == 0 and "job 1.standin" in status.stdout, status.stdout


def test_the_job_script_asks_for_one_chunk_a_node_with_its_ranks_cpus_and_gpus() -> None:
    spec = RunSpec(benchmark="imagenet", np=16, launcher="mpirun", controller="mpi", nodes=2,
                   args=("--data", "files", "--loader-workers", "3"))
    options = PbsOptions(queue="gpu", account="p1", time_min=95, resources=("model=h100",),
                         directives=("-l filesystems=home",), setup=("module load openmpi",))
    script = pbs_script(spec, options, "scale", Path("/r") / spec.id, "/venv/bin/python", retries=1)
    assert script.splitlines() == [
        "#!/bin/bash", "#PBS -N hvdbench-scale", "#PBS -l select=2:ncpus=32:mpiprocs=8:ngpus=8:model=h100",
        "#PBS -l place=scatter", "#PBS -l walltime=01:35:00", f"#PBS -o /r/pbs-jobs/{spec.id}.out",
        f"#PBS -e /r/pbs-jobs/{spec.id}.err",
        "#PBS -r y", "#PBS -V", "#PBS -q gpu", "#PBS -A p1", "#PBS -l filesystems=home",
        "# CPUs a rank: 4 (what a rank and its loader needs: pbsnodes could not say what PBS's nodes hold; pbs.ncpus "
        "sets it)", "module load openmpi",
        f"exec /venv/bin/python -m hvdbench.launchers.job_task /r/{spec.id} /venv/bin/python 1"]
    nodes = {"nodes": {"gpu01": {"resources_available": {"ncpus": 96, "ngpus": 8}},
                       "gpu02": {"resources_available": {"ncpus": 112, "ngpus": 8}},
                       "login": {"resources_available": {"ncpus": 16}}}}
    shape = pbs_node_shape(lambda argv, **_: SimpleNamespace(returncode=0, stdout=json.dumps(nodes), stderr=""))
    assert shape is not None and shape.nodes == (NodeShape(96, 8), NodeShape(112, 8))  # the nodes with GPUs
    assert shape.for_spec(spec, True) == NodeShape(96, 8)  # the least share: 12 CPUs a rank, its loader's 4 within
    shared = pbs_script(spec, options, "scale", Path("/r") / spec.id, "/venv/bin/python", 1, shape)
    assert "#PBS -l select=2:ncpus=96:mpiprocs=8:ngpus=8:model=h100\n" in shared
    assert ("# CPUs a rank: 12 (PBS's nodes that hold 8 GPU(s): 96 CPUs / 8 GPUs; a rank and its loader's workers need "
            "4)\n") in shared
    assert "ncpus=64:" in pbs_script(spec, replace(options, ncpus=64), "scale", Path("/r") / spec.id, "py", 1, shape)


def test_qstat_json_gives_queued_running_finished_and_failed_and_an_unknown_job_is_lost(tmp_path: Path) -> None:
    table = {"Jobs": {"1.s": {"job_state": "Q", "comment": "Not Running: Insufficient amount of resource: ngpus"},
                      "2.s": {"job_state": "R"}, "3.s": {"job_state": "F", "Exit_status": 0},
                      "4.s": {"job_state": "F", "Exit_status": 271, "comment": "Job exceeded resource walltime"}}}

    def qstat(argv: list[str], **_: Any) -> SimpleNamespace:
        assert argv[:5] == ["qstat", "-x", "-f", "-F", "json"]
        return SimpleNamespace(returncode=153, stdout=json.dumps(table), stderr="qstat: Unknown Job Id 5.s\n")

    states = qstat_states(["1.s", "2.s", "3.s", "4.s", "5.s"], qstat)
    assert {k: v[0] for k, v in states.items()} == {"1.s": "pending", "2.s": "running", "3.s": "completed",
                                                    "4.s": "failed"}
    assert queue_of("4.s").name == "pbs" and queue_of("123").name == "slurm" and queue_of("12_3").name == "slurm"
    for job in ("1.s", "4.s", "5.s"):
        RunStatus("submitted", None, 0.0, "", job_id=job).write(tmp_path / f"run-{job}")
        RunSpec(benchmark="mlp", np=1).write(tmp_path / f"run-{job}")
    seen = {d.name: (s.status, s.message) for d, s in refresh(tmp_path, qstat).items()}
    assert seen["run-1.s"] == ("pending", "job 1.s pending (Not Running: Insufficient amount of resource: ngpus)")
    assert seen["run-4.s"][0] == "failed" and seen["run-5.s"][0] == "lost"


@pytest.mark.bad_input
@pytest.mark.parametrize("pbs, launcher, extra, says", [
    ("{queue: gpu}", "srun", "", "launcher srun starts its ranks as srun steps, which a PBS job has not"),
    ("{queue: gpu}", "mpirun", "slurm: {partition: gpu}\n", "pbs: a sweep file names one scheduler"),
    ("{directives: ['-N other']}", "mpirun", "", "pbs.directives: -N is set by hvdbench (the sweep name)"),
    ("{resources: [ngpus=8]}", "mpirun", "", "pbs.resources: ngpus=8 is set by hvdbench"),
    ("{directives: ['-l x=1; rm -rf /']}", "mpirun", "", "pbs.directives[0]: "),
    ("{directives: ['-l place=scatter:excl']}", "mpirun", "", "-l place is set by hvdbench from each run; remove it "
     "(for nodes of the job's own give pbs.exclusive: true: place=scatter:excl)"),
    ("{resources: [ncpus=64]}", "mpirun", "", "pbs.resources: ncpus=64 is set by hvdbench from each run; remove it "
     "(pbs.ncpus sets it)"),
])
def test_what_pbs_cannot_take_is_one_line(tmp_path: Path, pbs: str, launcher: str, extra: str, says: str) -> None:
    sweep = _sweep(tmp_path, pbs, launcher, extra)
    try:
        load_sweep(sweep)
    except SweepError as exc:
        assert says in str(exc)
        return
    out = subprocess.run([hvdbench_exe(), "submit", str(sweep), "-o", str(tmp_path / "r"), "--dry-run"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and says in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
