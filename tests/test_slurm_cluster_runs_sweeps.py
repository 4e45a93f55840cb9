"""A real single-host SLURM cluster: a 2-task Horovod benchmark submitted through submitit and through
the sbatch template gives complete rank logs and a report; a cancelled job is recorded as cancelled and
submitted again by ``submit --resume``."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from hvdbench.launchers.queues import refresh
from hvdbench.core.records import ParseStats, rank_log_name, read_records

from conftest import BIN, REPO, hvdbench_exe

pytestmark = [pytest.mark.slow, pytest.mark.mpi, pytest.mark.timeout(900)]
TINY = "[--mlp-input, '32', --mlp-widths, '32', --steps, '6', --warmup-steps, '1', --threads, '1']"


def _sweep(tmp_path: Path, name: str, workloads: str, np: str = "[1, 2]", time_limit: int = 10,
           system: str = "test-cluster") -> Path:
    path = tmp_path / f"{name.split()[0]}.yaml"
    path.write_text(f"""
name: "{name}"
system: "{system}"
launcher: srun
timeout: 240
workloads: {workloads}
axes: {{np: {np}}}
slurm: {{gpus: false, time: {time_limit}, mpi: pmix}}
""")
    return path


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([hvdbench_exe(), *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def _wait(what: str, check: Callable[[], Any], timeout: float = 300.0, cluster: Any = None,
          root: Path | None = None) -> Any:
    """Poll check until it gives something; a run that ended badly meanwhile fails the test at once."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        bad = {d.name: s for d, s in refresh(root).items() if s.status in ("failed", "lost")} if root else {}
        if bad:
            raise AssertionError(f"waiting for {what}: {bad}")
        time.sleep(2.0)
    raise AssertionError(f"{what} not seen within {timeout:g} s\n{cluster.log_tail() if cluster else ''}")


def _states(root: Path) -> dict[str, str]:
    return {folder.name: status.status for folder, status in refresh(root).items()}


def _complete_logs(run_dir: Path, np: int) -> None:
    for rank in range(np):
        records = read_records(run_dir / rank_log_name(rank), ParseStats())
        kinds = [r["kind"] for r in records]
        assert kinds.count("summary") == 1 and kinds.count("step") >= 6, (rank, kinds)
        env = next(r for r in records if r["kind"] == "env")
        assert env["size"] == np and env["variables"].get("SLURM_JOB_ID")


def test_submitit_jobs_give_complete_rank_logs_and_a_report(slurm_cluster: Any, tmp_path: Path) -> None:
    # a name that would end up in the job script is refused; labels and paths that would run commands if
    # any reached a shell unquoted are quoted
    hostile = _sweep(tmp_path, "via-submitit; touch pwned-name", f"[{{benchmark: mlp, args: {TINY}}}]")
    refused_name = _cli("submit", str(hostile), "-o", str(tmp_path / "never"), cwd=tmp_path)
    assert refused_name.returncode == 2 and "names the results directory and the jobs" in refused_name.stderr
    sweep = _sweep(tmp_path, "via-submitit", f"[{{benchmark: mlp, args: {TINY}}}]", system="a b; touch pwned-system")
    root = tmp_path / "results; touch pwned-path"
    out = _cli("submit", str(sweep), "-o", str(root), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count(": job ") == 2 and "submitted 2 job(s) of 2 run(s)" in out.stdout
    states = _wait("both jobs ok", lambda: (s := _states(root)) and set(s.values()) == {"ok"} and s,
                   cluster=slurm_cluster, root=root)
    assert len(states) == 2
    two = next(p for p in root.iterdir() if p.name.startswith("mlp-np2-"))
    _complete_logs(two, 2)
    status = json.loads((two / "status.json").read_text())
    assert status["status"] == "ok" and status["job_id"]
    shown = _cli("status", str(root))
    assert shown.returncode == 0 and "2 ok" in shown.stdout and f"job {status['job_id']}" in shown.stdout
    report = _cli("report", str(root))
    assert report.returncode == 0, report.stderr
    script = next((root / "slurm-jobs").glob("*/*_submission.sh")).read_text()
    assert "#SBATCH --job-name=hvdbench-via-submitit" in script
    assert not list(tmp_path.glob("pwned*")) and not list(root.glob("pwned*"))
    assert "a b; touch pwned-system" in report.stdout
    assert (root / "report" / "report.html").exists() and "srun" in report.stdout
    again = _cli("submit", str(sweep), "-o", str(root), "--resume")
    assert again.returncode == 0 and "submitted 0 job(s) of 2 run(s)" in again.stdout
    refused = _cli("submit", str(sweep), "-o", str(root))
    assert refused.returncode == 2 and "--resume submits only what is missing" in refused.stderr


def test_the_sbatch_template_runs_the_sweep_inside_one_allocation(slurm_cluster: Any, tmp_path: Path) -> None:
    ddp = TINY.replace("]", ", --exchange, ddp]")  # torch.distributed started from what srun gave Horovod
    sweep = _sweep(tmp_path, "via-sbatch", f"[{{benchmark: mlp, args: {TINY}}}, {{benchmark: mlp, args: {ddp}}}]",
                   np="[1, 2, 4]")
    root = tmp_path / "results"
    out = subprocess.run(["sbatch", "--parsable", "--nodes=1", "--ntasks=2", f"--output={tmp_path}/job-%j.out",
                          f"--export=ALL,HVDBENCH={BIN / 'hvdbench'}", str(REPO / "slurm" / "hvdbench.sbatch"),
                          str(sweep), "-o", str(root)], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip().split(";")[0]
    _wait("the job to leave the queue",
          lambda: subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True).stdout.strip()
          in ("", "COMPLETED"), cluster=slurm_cluster)
    log = (tmp_path / f"job-{job}.out").read_text()
    assert "2 run(s) need a larger allocation" in log, log
    states = _states(root)
    assert sorted(states.values()) == ["ok"] * 4, log
    for two in (p for p in root.iterdir() if p.name.startswith("mlp-np2-")):
        _complete_logs(two, 2)
        ranks = [read_records(two / rank_log_name(rank), ParseStats()) for rank in range(2)]
        assert ranks[0][-1]["param_checksum"] == ranks[1][-1]["param_checksum"]
    assert (root / "report" / "report.html").exists() and "images/s" not in log and "samples/s" in log


def test_a_cancelled_job_is_recorded_and_resubmitted_by_resume(slurm_cluster: Any, tmp_path: Path) -> None:
    long_args = "[--mlp-input, '32', --mlp-widths, '32', --steps, '1000000', --warmup-steps, '1', --threads, '1']"
    sweep = _sweep(tmp_path, "cancel", f"[{{benchmark: mlp, args: {TINY}}}, {{benchmark: mlp, args: {long_args}}}]",
                   np="[1]")
    sweep.write_text(sweep.read_text().replace("mpi: pmix}", "mpi: pmix, array_parallelism: 2}"))  # one job array
    root = tmp_path / "results"
    assert _cli("submit", str(sweep), "-o", str(root)).returncode == 0
    long_dir = next(p.parent for p in root.glob("*/run.json") if "1000000" in p.read_text())
    _wait("the long run to run and the short one to finish",
          lambda: sorted(_states(root).values()) == ["ok", "running"] and (long_dir / rank_log_name(0)).exists(),
          cluster=slurm_cluster, root=root)
    job = json.loads((long_dir / "status.json").read_text())["job_id"]
    assert "_" in job  # the two runs went as tasks of one job array
    subprocess.run(["scancel", job], check=True)
    _wait("the cancel to be recorded", lambda: _states(root).get(long_dir.name) == "cancelled", cluster=slurm_cluster)
    assert f"job {job} was cancelled" in json.loads((long_dir / "status.json").read_text())["message"]
    shown = _cli("status", str(root))
    assert shown.returncode == 1 and "cancelled" in shown.stdout and "1 ok" in shown.stdout
    resumed = _cli("submit", str(sweep), "-o", str(root), "--resume")
    assert resumed.returncode == 0 and "submitted 1 job(s) of 2 run(s)" in resumed.stdout, resumed.stdout
    assert resumed.stdout.startswith(f"{long_dir.name}: job ")
    new_job = json.loads((long_dir / "status.json").read_text())["job_id"]
    assert new_job != job
    queued = _cli("submit", str(sweep), "-o", str(root), "--resume")
    assert "submitted 0 job(s)" in queued.stdout  # queued or running: not submitted twice
    subprocess.run(["scancel", new_job], check=True)


def test_a_run_that_fails_in_its_job_says_why_in_one_line(slurm_cluster: Any, tmp_path: Path) -> None:
    args = "[--device, cuda, --mlp-input, '32', --mlp-widths, '32', --steps, '3']"  # no GPU on this cluster
    sweep = _sweep(tmp_path, "fails", f"[{{benchmark: mlp, args: {args}}}]", np="[2]")
    sweep.write_text(sweep.read_text() + "baseline: false\n")
    root = tmp_path / "results"
    assert _cli("submit", str(sweep), "-o", str(root)).returncode == 0
    status = _wait("the failure to be recorded", lambda: next(
        (s for s in refresh(root).values() if s.status not in ("submitted", "pending", "running")), None),
        timeout=120, cluster=slurm_cluster)
    assert status.status == "failed" and "no CUDA device is visible" in status.message, status
    assert "\n" not in status.message and status.job_id
    shown = _cli("status", str(root))
    assert shown.returncode == 1 and "1 failed" in shown.stdout


def test_horovodrun_inside_the_allocation_takes_its_hosts_from_slurm(slurm_cluster: Any, tmp_path: Path) -> None:
    sweep = _sweep(tmp_path, "hvdrun-in-job", f"[{{benchmark: mlp, args: {TINY}}}]", np="[2]")
    sweep.write_text(sweep.read_text().replace("launcher: srun", "launcher: horovodrun\ncontroller: gloo")
                     + "baseline: false\n")
    root = tmp_path / "results"
    assert _cli("submit", str(sweep), "-o", str(root)).returncode == 0
    _wait("the run to complete", lambda: set(_states(root).values()) == {"ok"}, cluster=slurm_cluster, root=root)
    run_dir = next(root.glob("mlp-np2-*"))
    _complete_logs(run_dir, 2)
    assert f"horovodrun -np 2 -H {slurm_cluster.node}:2 --gloo" in (run_dir / "command.sh").read_text()


def test_a_cancelled_sbatch_job_records_its_run_in_flight_and_keeps_the_rest(slurm_cluster: Any,
                                                                             tmp_path: Path) -> None:
    long_args = "[--mlp-input, '32', --mlp-widths, '32', --steps, '1000000', --warmup-steps, '1', --threads, '1']"
    sweep = _sweep(tmp_path, "sbatch-cancel",
                   f"[{{benchmark: mlp, args: {TINY}}}, {{benchmark: mlp, args: {long_args}}}]",
                   np="[1]")
    root = tmp_path / "results"
    out = subprocess.run(["sbatch", "--parsable", "--ntasks=1", f"--output={tmp_path}/job-%j.out",
                          f"--export=ALL,HVDBENCH={BIN / 'hvdbench'}", str(REPO / "slurm" / "hvdbench.sbatch"),
                          str(sweep), "-o", str(root), "--no-report"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    job = out.stdout.strip()
    long_dir = _wait("the long run to start", lambda: next(
        (p.parent for p in root.glob("*/run.json")
         if "1000000" in p.read_text() and (p.parent / rank_log_name(0)).exists()),
        None), cluster=slurm_cluster)
    subprocess.run(["scancel", job], check=True)
    _wait("the job to end", lambda: subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True,
                                                   text=True).stdout.strip() in ("", "CANCELLED"),
          cluster=slurm_cluster)
    status = json.loads((long_dir / "status.json").read_text())
    assert status["status"] == "cancelled" and status["job_id"] == job, status
    assert sorted(_states(root).values()) == ["cancelled", "ok"]
    log = (tmp_path / f"job-{job}.out").read_text()
    assert "hvdbench: stopped: job cancelled (SIGTERM); a run in flight is recorded as cancelled" in log, log
    assert "Traceback" not in log
