"""Helpers of the tests that run sweeps as jobs on the two-node test cluster (tests/gpu_cluster.py): a sweep
file, the CLI, runs settled, each rank's env record, a rank's process, the steps a rank has logged."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

from hvdbench.launchers.queues import refresh
from hvdbench.launchers.schedulers import ACTIVE
from hvdbench.core.records import ParseStats, rank_log_name, read_records

from conftest import hvdbench_exe

TINY = "[--mlp-input, '32', --mlp-widths, '32', --steps, '6', --warmup-steps, '1', --threads, '1']"


def mlp_args(steps: int) -> str:
    """The tiny MLP's arguments with ``steps`` timed steps (20,000 take about 10 s on one core)."""
    return TINY.replace("'6'", f"'{steps}'")


def sweep_file(tmp_path: Path, name: str, body: str) -> Path:
    """A sweep file of the test system with the given body."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(f'name: {name}\nsystem: test-gpus\ntimeout: 300\nbaseline: false\n{body}\n')
    return path


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """hvdbench with these arguments, its output captured."""
    return subprocess.run([hvdbench_exe(), *args], capture_output=True, text=True, timeout=300)


EVENT_S = 480.0  # the most a SLURM event (a node found dead, a job requeued) may take on a loaded machine


def wait_for(check: Callable[[], Any], what: str, cluster: Any, timeout: float = EVENT_S) -> Any:
    """Poll ``check`` until it gives something: the next step waits on the event itself, never on a guess of how long
    it takes (a bound this far beyond SLURM's own timeouts fails naming the event, with the cluster's log tail)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(1.0)
    raise AssertionError(f"{what}: not seen within {timeout:g} s\n{cluster.log_tail()}")


def settled(root: Path, count: int, cluster: Any, timeout: float = 420.0) -> dict[str, str]:
    """Each run's final state once all ``count`` runs have one (ok or not)."""
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        states = {d.name: s.status for d, s in refresh(root).items()}
        if len(states) == count and not set(states.values()) & set(ACTIVE):
            return states
        time.sleep(2.0)
    raise AssertionError(f"runs under {root} not settled: {states}\n{cluster.log_tail()}")


def settled_ok(root: Path, count: int, cluster: Any, timeout: float = 420.0) -> None:
    """All ``count`` runs under ``root`` settled and ok; otherwise fail with why each other one ended: its status
    message, the tails of its own logs and of the job logs under ``root``, and the cluster's log tail."""
    states = settled(root, count, cluster, timeout)
    bad = sorted(name for name, state in states.items() if state != "ok")
    if bad:
        raise AssertionError(f"runs not ok under {root}: {states}\n" + "\n".join(_why(root / name) for name in bad)
                             + f"\n{cluster.log_tail()}")


def _why(run_dir: Path) -> str:
    """A failed run's status.json and the last lines of every log in it and of every job log beside it."""
    status = (run_dir / "status.json").read_text() if (run_dir / "status.json").is_file() else "(no status.json)"
    logs = sorted({*run_dir.rglob("*.log"), *run_dir.rglob("*.out"), *run_dir.rglob("*.err"),
                   *run_dir.parent.glob("slurm-jobs/*/*.out"), *run_dir.parent.glob("slurm-jobs/*/*.err")})
    tails = [f"--- {path}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-25:]) for path in logs]
    return f"=== {run_dir.name}: {status}\n" + "\n".join(tails)


def envs(run_dir: Path) -> list[dict[str, Any]]:
    """Each rank's env record, in rank order (each rank logged exactly one summary)."""
    out = []
    for rank in range(len(list(run_dir.glob("rank-*.jsonl")))):
        records = read_records(run_dir / rank_log_name(rank), ParseStats())
        assert [r["kind"] for r in records].count("summary") == 1, (run_dir, rank)
        out.append(next(r for r in records if r["kind"] == "env"))
    return out


def status_of(run_dir: Path) -> dict[str, Any]:
    """A run's (or a kept attempt's) status.json."""
    return json.loads((run_dir / "status.json").read_text())


def rank_pid(rank: int, run_dir: Path) -> int | None:
    """The process of one rank of a run (its SLURM task's child), found by its environment and command line."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if str(run_dir).encode() in cmdline and any(a.endswith(b"mlp.py") for a in cmdline) \
                and f"SLURM_PROCID={rank}".encode() in environ:
            return int(proc.name)
    return None


def running_run(root: Path, rank: int, timeout: float = 300.0) -> tuple[Path, int]:
    """The first run under root once ``rank`` has logged a few timed steps, and that rank's process."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run_dir = next(root.glob("mlp-*"), None)
        log = run_dir / rank_log_name(rank) if run_dir else None
        if run_dir and log and log.exists() and log.read_text().count('"kind":"step"') > 3:  # compact JSON
            pid = rank_pid(rank, run_dir)
            if pid is not None:
                return run_dir, pid
        time.sleep(0.5)
    raise AssertionError(f"no run under {root} got to its timed steps on rank {rank}")


def rank_host(run_dir: Path, rank: int) -> str:
    """The host a rank of a run under way runs on (its env record, the first it writes)."""
    records = read_records(run_dir / rank_log_name(rank), ParseStats())
    return str(next(r for r in records if r["kind"] == "env")["host"])
