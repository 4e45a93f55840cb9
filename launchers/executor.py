"""The executor interface both ways of running share (submitit's shape: one base, what differs per
scheduler a named hook): a results root, what is left to do on resume, each run's folder prepared alike
(its run.json written, an earlier attempt moved aside, never deleted), a placement the scheduler's grant
cannot hold refused alike, the retry policy (launchers/policy.py), one attempt's body (launchers/attempt.py), and
a dry-run description. The local
executor runs here, one run at a time (launchers/local.py); the SLURM one submits jobs (launchers/slurm.py)."""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Sequence

from hvdbench.core.errors import LaunchError
from hvdbench.core.gpu_choice import granted, placement_problem
from hvdbench.core.job_env import job_env
from hvdbench.core.spec import RunSpec, RunStatus, keep_earlier_attempt

from .base import Launcher
from .job_shape import gpus_needed


class Executor:
    """Runs or submits RunSpecs under one results root. The verb is ``execute``; hooks: ``describe`` (what running
    one would do), ``finished`` (whether resume leaves a run out). One attempt's body is launchers/attempt.py;
    ``limit_s`` says how long a run may hold its nodes and ``billed_gpus`` how many GPUs a node (the dry run's node- and
    GPU-hours)."""

    def __init__(self, root: Path, *, python: str = sys.executable, resume: bool = True, retries: int = 0,
                 report: Callable[[str], None] = lambda line: print(line, flush=True)) -> None:
        self.root, self.python, self.resume, self.retries, self.report = root, python, resume, retries, report
        self.order: dict[str, dict[str, int]] = {}  # each planned run's position and round (run.json's order)

    def plan_order(self, specs: Sequence[RunSpec]) -> None:
        """Where each spec stands in the plan about to run (its position of how many, its round of how many): written
        into its run.json, so a report says how its repeats were spread in time."""
        rounds = max((spec.repeat for spec in specs), default=0) + 1
        self.order = {spec.id: {"position": i, "of": len(specs), "round": spec.repeat + 1, "rounds": rounds}
                      for i, spec in enumerate(specs, 1)}

    def describe(self, spec: RunSpec) -> str:
        """What running ``spec`` would do, as the dry run prints it."""
        raise NotImplementedError

    def finished(self, spec: RunSpec) -> bool:
        """Whether resume leaves ``spec`` out (complete; under a scheduler also queued or running)."""
        raise NotImplementedError

    def limit_s(self) -> float | None:
        """The longest a run may hold its nodes (a local timeout, a job's time limit); None where unbounded."""
        return None

    def billed_gpus(self, spec: RunSpec) -> int:
        """GPUs a run holds on each node, as an allocation is billed (the dry run's GPU-hours): those it needs."""
        return gpus_needed(spec)

    def execute(self, specs: Sequence[RunSpec]) -> list[RunStatus]:
        """Run (here) or submit (a scheduler) every spec; each one's status: how it ended, or its submission."""
        raise NotImplementedError

    def todo(self, specs: Iterable[RunSpec]) -> list[RunSpec]:
        """The specs to run: all, or with resume those not finished."""
        return [s for s in specs if not (self.resume and self.finished(s))]

    def prepare(self, spec: RunSpec, run_dir: Path) -> None:
        """A run's folder before an attempt: processes an earlier attempt left running on this host ended
        first (a killed sweep's ranks), then its run.json written and what was there moved aside."""
        left = processes_of(run_dir) if run_dir.is_dir() else []
        if left:
            self.report(f"{spec.id}: {len(left)} process(es) of an earlier attempt still running here "
                        f"(pid {', '.join(map(str, left[:5]))}); ending them before the run starts again")
            stuck = end_processes(left)
            if stuck:
                raise LaunchError(f"{spec.id}: process(es) {', '.join(map(str, stuck))} of an earlier attempt do "
                                  "not end; the run's folder is left as it is")
        try:
            spec.write(run_dir, self.order.get(spec.id))
            keep_earlier_attempt(run_dir)
        except OSError as exc:
            raise LaunchError(f"cannot write the run directory {run_dir}: {exc.strerror}") from None


LOCK_FILE = ".hvdbench.lock"


@contextmanager
def results_lock(root: Path) -> Iterator[None]:
    """One sweep at a time per results root: an exclusive lock on ROOT/.hvdbench.lock that the kernel drops
    when its holder ends, however it ends (a killed sweep leaves nothing stuck). A second sweep on the same
    root is refused in one line naming the holder's pid, host and start."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        handle = open(root / LOCK_FILE, "a+", encoding="utf-8")
    except OSError as exc:
        raise LaunchError(f"cannot use the results directory {root}: {exc.strerror}") from None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip()[:200] or "another process"
            raise LaunchError(f"{root} is in use by another hvdbench sweep ({holder}): wait for it to end, or "
                              "give this one another --output") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
        handle.flush()
        yield


def processes_of(run_dir: Path) -> list[int]:
    """The processes on this host whose command line names the run's folder: its launcher and ranks (each
    is started with --log-dir pointing there), e.g. still running after their sweep was killed."""
    needle = str(run_dir.resolve()).encode()
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if needle in (entry / "cmdline").read_bytes() and int(entry.name) != os.getpid():
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue  # ended meanwhile, or not ours to read
    return found


def end_processes(pids: list[int], grace: float = 15.0) -> list[int]:
    """SIGTERM, then SIGKILL after ``grace`` seconds, to each process; those still there after both."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + wait
        while pids and time.monotonic() < deadline:
            pids = [pid for pid in pids if _alive(pid)]
            time.sleep(0.1)
        if not pids:
            return []
    return pids


def _alive(pid: int) -> bool:
    """Running or stopped (a zombie waiting for its parent counts as ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def scheduler_chose_gpus(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process runs in a scheduler's job that was granted GPUs (then its CUDA_VISIBLE_DEVICES stands)."""
    environ = os.environ if environ is None else environ
    return job_env(environ).job_id is not None and granted(environ) is not None


def placement_refusal(spec: RunSpec, scheduler_gpus: bool) -> str | None:
    """Why the run's placement cannot run on the GPUs the scheduler granted this node, in one line (None
    where it can, or where no scheduler chose the GPUs)."""
    if not scheduler_gpus or spec.devices is None:
        return None
    return placement_problem(spec.devices, granted(os.environ), socket.gethostname())


def launch_environment(launcher: Launcher, spec: RunSpec, python: str, scheduler_gpus: bool = False) -> dict[str, str]:
    """This process's environment with the spec's knobs and GPUs, the ranks' interpreter first on PATH,
    and Open MPI allowed to run as root (containers and CI run as root)."""
    env = {**os.environ, **launcher.environment(spec, scheduler_gpus)}
    if os.geteuid() == 0:
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env["PATH"] = f"{Path(python).parent}{os.pathsep}{env.get('PATH', '')}"
    return env
