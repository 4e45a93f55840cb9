"""Faults in a real sweep of Horovod runs: a rank killed mid-run marks its run failed well within the
timeout and the sweep goes on; a run that hangs (a rank stopped) is killed at its timeout; a sweep
interrupted with Ctrl-C and resumed later runs only what is missing and loses nothing finished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hvdbench.analysis.history.query import Selection, select
from hvdbench.analysis.history.store import open_store
from hvdbench.core.records import ParseStats, rank_log_name, read_records

from conftest import hvdbench_exe

pytestmark = [pytest.mark.slow, pytest.mark.bad_input, pytest.mark.timeout(600)]
STEPS = "[--mlp-input, '32', --mlp-widths, '32', --warmup-steps, '1', --threads, '1', --steps, '{steps}']"


def _sweep(tmp_path: Path, name: str, steps: list[int], timeout: int, np: str = "[2]") -> Path:
    path = tmp_path / f"{name}.yaml"
    workloads = ", ".join(f"{{benchmark: mlp, args: {STEPS.format(steps=s)}}}" for s in steps)
    path.write_text(f"name: {name}\ntimeout: {timeout}\nbaseline: false\nworkloads: [{workloads}]\n"
                    f"axes: {{np: {np}}}\n")
    return path


def _start(sweep: Path, root: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([hvdbench_exe(), "sweep", str(sweep), "-o", str(root), "--no-report"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def _rank_pid(root: Path, steps: int, rank: int, deadline: float) -> int:
    """The pid of a rank of the run with that many steps, once it has timed a step."""
    while time.monotonic() < deadline:
        for run_json in root.glob("*/run.json"):
            if str(steps) in json.loads(run_json.read_text())["spec"]["args"]:
                log = run_json.parent / rank_log_name(rank)
                records = read_records(log, ParseStats()) if log.exists() else []
                if any(r["kind"] == "step" and not r["warmup"] for r in records):
                    return int(next(r for r in records if r["kind"] == "env")["pid"])
        time.sleep(0.5)
    raise AssertionError("the rank never started its timed steps")


def _status(root: Path, steps: int) -> dict:
    for run_json in root.glob("*/run.json"):
        if str(steps) in json.loads(run_json.read_text())["spec"]["args"]:
            return json.loads((run_json.parent / "status.json").read_text())
    raise AssertionError(f"no run with {steps} steps")


def test_a_killed_rank_fails_its_run_and_the_sweep_goes_on(tmp_path: Path, hvd_env: dict) -> None:
    root = tmp_path / "results"
    proc = _start(_sweep(tmp_path, "killed", [100000, 5], timeout=200), root, hvd_env)
    start = time.monotonic()
    os.kill(_rank_pid(root, 100000, 1, start + 120), signal.SIGKILL)
    out, _ = proc.communicate(timeout=300)
    killed = _status(root, 100000)
    assert killed["status"] == "failed" and killed["seconds"] < 150, out
    assert _status(root, 5)["status"] == "ok", out
    assert proc.returncode == 1 and "sweep: 1 failed, 1 ok" in out
    shown = subprocess.run([hvdbench_exe(), "status", str(root)], capture_output=True, text=True)
    assert shown.returncode == 1 and shown.stdout.splitlines()[-1] == "1 failed, 1 ok"
    assert any(" failed " in line and killed["message"][:40] in line for line in shown.stdout.splitlines())


def test_a_hung_run_is_killed_at_its_timeout(tmp_path: Path, hvd_env: dict) -> None:
    root = tmp_path / "results"
    proc = _start(_sweep(tmp_path, "hung", [100000], timeout=45), root, hvd_env)
    pid = _rank_pid(root, 100000, 1, time.monotonic() + 120)
    os.kill(pid, signal.SIGSTOP)  # rank 1 stops answering: rank 0 waits in its allreduce forever
    try:
        out, _ = proc.communicate(timeout=200)
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    hung = _status(root, 100000)
    assert hung["status"] == "timeout" and "no end after 45 s" in hung["message"], out
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    """Running or stopped (a zombie waiting for its parent counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def test_an_interrupted_sweep_resumes_with_only_the_missing_runs(tmp_path: Path, hvd_env: dict) -> None:
    root = tmp_path / "results"
    sweep = _sweep(tmp_path, "resume", [5, 100000, 6], timeout=300, np="[1]")
    proc = _start(sweep, root, hvd_env)
    _rank_pid(root, 100000, 0, time.monotonic() + 120)
    finished = next(p.parent for p in root.glob("*/status.json") if json.loads(p.read_text())["status"] == "ok")
    kept = {p.name: p.read_bytes() for p in finished.iterdir()}
    proc.send_signal(signal.SIGINT)  # what Ctrl-C sends to the foreground process
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "finished runs are kept" in out
    assert _status(root, 100000)["status"] == "interrupted"
    sweep.write_text(sweep.read_text().replace("'100000'", "'4'"))  # the long run, now short; the rest unchanged
    store = tmp_path / "history.sqlite"
    again = subprocess.run([hvdbench_exe(), "sweep", str(sweep), "-o", str(root), "--no-report", "--store", str(store),
                            "--tag", "image=ngc-24.04"], capture_output=True, text=True, env=hvd_env, timeout=300)
    assert again.returncode == 0, again.stdout
    # the interrupted sweep recorded nothing; this one every run in the root, the interrupted one too (history)
    assert f"history: 4 added in {store}" in again.stdout
    with open_store(str(store)) as opened:  # the tag on the runs this sweep ran, the run it skipped not
        tagged = select(opened, Selection(tags=(("image", "ngc-24.04"),)))
    assert len(tagged) == 2 and finished.name not in set(tagged["run_id"])
    assert again.stdout.count("already complete, skipped") == 1 and "sweep: 3 ok" in again.stdout
    assert {p.name: p.read_bytes() for p in finished.iterdir()} == kept
    assert len([p for p in root.glob("*/status.json") if json.loads(p.read_text())["status"] == "ok"]) == 3


def test_a_second_sweep_on_the_same_output_is_refused_naming_the_first(tmp_path: Path, hvd_env: dict) -> None:
    """One sweep at a time per results root (an exclusive lock): a second one says who holds it and runs
    nothing; once the first ends the root is free again, and a killed sweep leaves nothing stuck."""
    root = tmp_path / "results"
    first = _start(_sweep(tmp_path, "held", [100000], timeout=200, np="[1]"), root, hvd_env)
    _rank_pid(root, 100000, 0, time.monotonic() + 120)
    second = subprocess.run([hvdbench_exe(), "sweep", str(_sweep(tmp_path, "other", [5], timeout=60, np="[1]")), "-o",
                             str(root), "--no-report"], capture_output=True, text=True, env=hvd_env, timeout=120)
    lines = second.stderr.strip().splitlines()
    assert second.returncode == 2 and len(lines) == 1, second.stderr
    assert f"is in use by another hvdbench sweep (pid {first.pid} on " in lines[0]
    assert len(list(root.glob("*/run.json"))) == 1  # the second sweep ran nothing
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=60)
    again = subprocess.run([hvdbench_exe(), "sweep", str(_sweep(tmp_path, "other", [5], timeout=120, np="[1]")), "-o",
                            str(root), "--no-report"], capture_output=True, text=True, env=hvd_env, timeout=300)
    assert again.returncode == 0 and "sweep: 1 ok" in again.stdout, again.stdout + again.stderr


def test_ranks_end_with_their_killed_sweep_and_a_resume_finds_none_running(tmp_path: Path, hvd_env: dict) -> None:
    """kill -9 of the sweep: its launcher hears of it (a parent-death signal) and ends its ranks; a resume
    right after ends whatever of the earlier attempt still runs before it touches the run's folder."""
    root = tmp_path / "results"
    sweep = _sweep(tmp_path, "orphans", [100000], timeout=300)
    proc = _start(sweep, root, hvd_env)
    ranks = [_rank_pid(root, 100000, rank, time.monotonic() + 120) for rank in (0, 1)]
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    deadline = time.monotonic() + 60
    while any(_alive(pid) for pid in ranks) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not any(_alive(pid) for pid in ranks), "ranks outlived their sweep"


def test_a_resume_ends_what_an_earlier_attempt_left_running(tmp_path: Path) -> None:
    """Processes naming a run's folder (a launcher or rank left behind) are ended before the folder is
    touched, and the resume says so."""
    from hvdbench.launchers.local import LocalExecutor
    from hvdbench.core.spec import RunSpec

    spec = RunSpec(benchmark="mlp")
    run_dir = tmp_path / spec.id
    run_dir.mkdir(parents=True)
    stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "--log-dir", str(run_dir)])
    said: list[str] = []
    try:
        # Until the child has exec'd, its command line is this test's; an earlier attempt's process has.
        deadline = time.monotonic() + 30
        while (str(run_dir).encode() not in Path(f"/proc/{stray.pid}/cmdline").read_bytes()
               and time.monotonic() < deadline):
            time.sleep(0.05)
        LocalExecutor(tmp_path, report=said.append).prepare(spec, run_dir)
        assert said and "1 process(es) of an earlier attempt still running here" in said[0], (
            said, Path(f"/proc/{stray.pid}/cmdline").read_bytes())
        assert stray.wait(timeout=30) is not None and not _alive(stray.pid)
    finally:
        stray.kill()
