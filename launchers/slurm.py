"""SLURM through submitit: one job (or one array task) per run, results in the same layout as local runs.

Job state comes from two places, never from ``sacct`` (which needs slurmdbd and a database that many
clusters, and the test cluster, do not run): the results directory, where every job records how it
ended (``status.json``; its ranks' logs show whether it completed), and ``squeue --states=all``, which
knows a job while it is queued or running and for ``MinJobAge`` seconds after it ends. A job that
ended unseen (cancelled before it started, killed with its node) is found by ``refresh`` as ``lost``,
and ``submit --resume`` submits it again like any run that did not complete.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from hvdbench.suite.core.errors import HvdbenchError, LaunchError
from hvdbench.suite.core.metrics import Outcome, logged_outcome
from hvdbench.suite.core.spec import RUN_FILE, RunSpec, RunStatus, keep_earlier_attempt

from .base import LaunchContext, get_launcher, launcher_class, rank_command
from .local import (LAUNCHER_LOG, completed, failure_reason, launch_environment, placement_refusal,
                    scheduler_chose_gpus, tail)
from .sweep import SlurmOptions

JOBS_DIR = "slurm-jobs"
ACTIVE = ("submitted", "pending", "running", "requeued")
FINAL_OK = ("ok",)
# squeue's job states -> how the run ended (or that it is still under way).
SQUEUE_STATES = {
    "PENDING": "pending", "CONFIGURING": "pending", "REQUEUED": "pending", "RESIZING": "pending",
    "RUNNING": "running", "COMPLETING": "running", "SUSPENDED": "running", "STAGE_OUT": "running",
    "CANCELLED": "cancelled", "TIMEOUT": "timeout", "DEADLINE": "timeout", "PREEMPTED": "preempted",
    "FAILED": "failed", "NODE_FAIL": "failed", "OUT_OF_MEMORY": "failed", "BOOT_FAIL": "failed",
    "COMPLETED": "completed",
}


def gpus_needed(spec: RunSpec) -> int:
    """GPUs a run needs on each node: one per rank, or (a placement names node-physical ids) GPUs 0 up to
    the highest id it names, since SLURM grants the lowest free ids."""
    return spec.ranks_per_node if spec.devices is None else max(spec.devices, default=-1) + 1


def job_parameters(options: SlurmOptions, spec: RunSpec, name: str, retries: int = 0) -> dict[str, Any]:
    """submitit's parameters for one run: nodes, one task per GPU (one task per node where the launcher
    starts every rank from the first task), GPUs per node, partition, account and the rest."""
    per_task = launcher_class(spec.launcher).task_per_rank
    extra: dict[str, Any] = {}
    for directive in options.directives:
        key, sep, value = directive.lstrip("-").partition("=")
        extra[key.replace("-", "_")] = value if sep else True
    if spec.host is not None:  # a run pinned to one node (screening every node)
        extra["nodelist"] = spec.host
    params: dict[str, Any] = {
        "name": f"hvdbench-{name}", "timeout_min": options.time_min, "nodes": spec.nodes,
        "tasks_per_node": spec.ranks_per_node if per_task else 1,
        "slurm_srun_args": [f"--mpi={options.mpi}", "--kill-on-bad-exit=1"] if per_task else [],
        "slurm_setup": list(options.setup),
        "slurm_additional_parameters": extra,
    }
    if options.gpus and options.gpus_per_task:  # each task (rank) gets one GPU, whichever SLURM picks
        params["gpus_per_task"] = f"{options.gpu_type}:1" if options.gpu_type else 1
    elif options.gpus:
        # a placement's job has the node to itself (each run checks what it was granted before its ranks start)
        count = gpus_needed(spec)
        params["gpus_per_node"] = f"{options.gpu_type}:{count}" if options.gpu_type else count
        if spec.devices is not None:
            params["slurm_exclusive"] = True
    if not per_task and options.cpus_per_task is None:  # one task per node holds every rank of the node
        params["cpus_per_task"] = spec.ranks_per_node
    for key, value in (("slurm_partition", options.partition), ("slurm_account", options.account),
                       ("slurm_qos", options.qos), ("slurm_constraint", options.constraint),
                       ("cpus_per_task", options.cpus_per_task), ("mem_gb", options.mem_gb)):
        if value is not None:
            params[key] = value
    if options.exclusive:
        params["slurm_exclusive"] = True
    if retries:  # SLURM may start the job again: after a node failure or preemption, or when a run asks (run_task)
        extra["requeue"] = True
    if options.array_parallelism:
        params["slurm_array_parallelism"] = options.array_parallelism
    return params


def _job_id() -> str | None:
    array, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{array}_{task}" if array and task else os.environ.get("SLURM_JOB_ID")


def _scheduler_says(job: str | None) -> str | None:
    """The job's own state as squeue reports it now (for telling a preemption from a cancel)."""
    if not job:
        return None
    try:
        out = subprocess.run(["squeue", "-h", "--states=all", "-j", job, "-o", "%T"], capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return SQUEUE_STATES.get(out.stdout.strip().split("\n")[0]) if out.returncode == 0 else None


def run_task(spec_data: dict[str, Any], run_dir: str, python: str, hosts: Sequence[str] = (), retries: int = 0) -> int:
    """What a SLURM task runs: its rank (launcher srun: one task per GPU, MPI wired by PMIx) or, on the
    first task only, horovodrun/mpirun over the allocation's hosts. The first task records how the run
    ended in status.json; SIGTERM (scancel, preemption) and SIGUSR2 (the time limit ahead) are recorded.
    A failed attempt with retries left requeues the job (SLURM_RESTART_COUNT counts the attempts)."""
    folder, first, job = Path(run_dir), os.environ.get("SLURM_PROCID", "0") == "0", _job_id()
    try:
        return _run_task(RunSpec.from_dict(spec_data), folder, python, tuple(hosts), first, job, retries)
    except HvdbenchError as exc:  # a run that cannot start says why in its status, in one line
        RunStatus("failed", None, 0.0, str(exc), job_id=job).write(folder)
        print(f"hvdbench: error: {exc}", file=sys.stderr)
        return _end_task(2)


def attempt_number() -> int:
    """This job's attempt of its run, from 1 (SLURM counts restarts: requeues, node failures, preemptions)."""
    restarts = os.environ.get("SLURM_RESTART_COUNT", "0")
    return int(restarts) + 1 if restarts.isdigit() else 1


def _record_failure(folder: Path, job: str | None, retries: int, status: RunStatus) -> None:
    """Write a failed attempt's status, then, where retries are left, requeue the job and say so. The
    failure is written first: the requeue stops the other tasks, and the first task's handler keeps it."""
    status.write(folder)
    attempt = attempt_number()
    if not job or attempt > retries:
        return
    try:
        out = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True, timeout=30)
        why = out.stderr.strip()[:200] if out.returncode != 0 else None
    except (OSError, subprocess.SubprocessError) as exc:
        why = str(exc)
    if why is not None:
        replace(status, message=f"{status.message}; requeue failed ({why})").write(folder)
    else:
        replace(status, status="requeued",
                message=f"attempt {attempt} of {retries + 1} failed: {status.message}; job {job} requeued").write(folder)


def _run_task(spec: RunSpec, folder: Path, python: str, hosts: tuple[str, ...], first: bool, job: str | None,
              retries: int) -> int:
    start = time.monotonic()
    launcher = get_launcher(spec.launcher)
    scheduler_gpus = scheduler_chose_gpus()
    if first:
        spec.write(folder)
        keep_earlier_attempt(folder)  # a resubmitted or requeued run keeps its earlier attempt's files
    refused = placement_refusal(spec, scheduler_gpus) if first or launcher.task_per_rank else None
    if refused:  # before any rank starts, and no requeue: another attempt gets the same GPUs
        raise LaunchError(refused)
    if not first and launcher.task_per_rank:
        _await_first_task(folder, job)
    ctx = LaunchContext(python=python, run_dir=folder, scheduler_gpus=scheduler_gpus)
    if launcher.task_per_rank:
        argv = rank_command(spec, ctx)
    elif first:
        argv = launcher.command(spec, replace(ctx, hosts=hosts or allocation_hosts()))
    else:
        return 0  # the launcher on the first node starts every rank
    env = launch_environment(launcher, spec, python, scheduler_gpus)
    if first:
        (folder / "command.sh").write_text(shlex.join(argv) + "\n", encoding="utf-8")
        RunStatus("running", None, 0.0, _started(job), job_id=job).write(folder)
    task_log = f"task-{os.environ.get('SLURM_PROCID', '0')}.log" if launcher.task_per_rank else LAUNCHER_LOG
    log = open(folder / task_log, "w")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=folder)
    ending: list[tuple[str, str]] = []

    def stop(signum: int, _frame: object) -> None:
        if signum == signal.SIGUSR2:
            ending.append(("timeout", f"job {job} reached its time limit"))
        elif not ending:
            state = _scheduler_says(job)
            ending.append(("preempted", f"job {job} was preempted") if state == "preempted"
                          else ("cancelled", f"job {job} was cancelled"))
        recorded = RunStatus.read(folder)
        if first and (recorded is None or recorded.status not in ("failed", "requeued")):  # a task's failure stands
            RunStatus(ending[0][0], None, time.monotonic() - start, ending[0][1], job_id=job).write(folder)
        proc.terminate()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGUSR2, stop)
    returncode = proc.wait()
    log.close()
    seconds, log_path = time.monotonic() - start, Path(log.name)
    if ending or (returncode == 0 and not first):
        return _end_task(returncode)
    if returncode != 0:  # any task: the first one may be killed by srun before it can say why
        _record_failure(folder, job, retries,
                        RunStatus("failed", returncode, seconds, failure_reason(log_path), tail(log_path), job))
        return _end_task(returncode)
    outcome = _await_outcome(folder, spec.np)
    if outcome.ok:
        RunStatus("ok", returncode, seconds, job_id=job).write(folder)
    else:
        _record_failure(folder, job, retries, RunStatus("failed", returncode, seconds, outcome.reason, job_id=job))
    return returncode


def _started(job: str | None) -> str:
    return f"job {job} started (attempt {attempt_number()})"


def _await_first_task(folder: Path, job: str | None, limit: float = 120.0) -> None:
    """The other tasks start their ranks once the first has moved an earlier attempt's files aside (else
    a fast task's new log would be moved with them)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        status = RunStatus.read(folder)
        if status is not None and status.job_id == job and status.message == _started(job):
            return
        time.sleep(0.2)


def _end_task(returncode: int) -> int:
    """A failed rank ends its task with a failing status, so srun (--kill-on-bad-exit) stops the others
    rather than leaving them blocked in a collective; submitit would report a returned value as success."""
    if returncode != 0:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(returncode if 0 < returncode < 256 else 1)
    return returncode


def _await_outcome(folder: Path, np: int, grace: float = 60.0) -> Outcome:
    """The first task may end before the others have written their last record: wait a little."""
    deadline = time.monotonic() + grace
    outcome = logged_outcome(folder, np)
    while outcome.status == "incomplete" and time.monotonic() < deadline:
        time.sleep(1.0)
        outcome = logged_outcome(folder, np)
    return outcome


def allocation_hosts() -> tuple[str, ...]:
    """The allocation's node names, expanded from SLURM_JOB_NODELIST by scontrol."""
    nodelist = os.environ.get("SLURM_JOB_NODELIST")
    if not nodelist:
        raise LaunchError("not inside a SLURM allocation: SLURM_JOB_NODELIST is not set")
    out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True)
    if out.returncode != 0:
        raise LaunchError(f"scontrol show hostnames {nodelist}: {out.stderr.strip() or 'failed'}")
    return tuple(out.stdout.split())


def squeue_states(job_ids: Iterable[str], run: Callable[..., Any] = subprocess.run) -> dict[str, tuple[str, str]]:
    """job id -> (state, reason) for every job squeue still knows (queued, running, or ended lately)."""
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    try:
        out = run(["squeue", "-h", "--states=all", "-j", ",".join(ids), "-o", "%i|%T|%r"],
                  capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LaunchError(f"squeue could not be asked about jobs {', '.join(ids)}: {exc}") from None
    if out.returncode != 0 and "Invalid job id" not in out.stderr:
        first = next((line.strip() for line in out.stderr.splitlines() if line.strip()), str(out.returncode))
        raise LaunchError(f"squeue failed: {first[:300]}")
    found = {}
    for line in out.stdout.splitlines():
        job, _, rest = line.strip().partition("|")
        state, _, reason = rest.partition("|")
        for one in array_tasks(job):
            found[one] = (SQUEUE_STATES.get(state.split()[0] if state else "", state.lower()), reason)
    return found


def array_tasks(job: str) -> list[str]:
    """squeue's id of a job or of array tasks still pending together (``12_[1-3,5%2]``) as single ids."""
    match = re.fullmatch(r"(\d+)_\[([\d,\-]+)(?:%\d+)?\]", job)
    if not match:
        return [job] if job else []
    out = []
    for part in match.group(2).split(","):
        low, _, high = part.partition("-")
        out += [f"{match.group(1)}_{i}" for i in range(int(low), int(high or low) + 1)]
    return out


def run_dirs(root: Path) -> list[Path]:
    """Every run directory (one holding run.json) under a results root, or root itself if it is one."""
    if (root / RUN_FILE).exists():
        return [root]
    return sorted(p.parent for p in root.glob(f"*/{RUN_FILE}"))


def refresh(root: Path, run: Callable[..., Any] = subprocess.run) -> dict[Path, RunStatus]:
    """Each run's state from its status.json and, for runs under way, the scheduler; states the
    scheduler knows and the run could not record (cancelled while pending, failed node) are written."""
    dirs = run_dirs(root)
    statuses = {d: RunStatus.read(d) for d in dirs}
    active = {d: s for d, s in statuses.items() if s is not None and s.status in ACTIVE and s.job_id}
    queue = squeue_states([s.job_id for s in active.values() if s.job_id], run) if active else {}
    out: dict[Path, RunStatus] = {}
    for folder, status in statuses.items():
        if status is None:
            try:
                done = completed(folder, RunSpec.read(folder / RUN_FILE))
            except HvdbenchError:
                done = None
            out[folder] = done or RunStatus("not run", None, 0.0)
            continue
        if folder in active:
            known = queue.get(status.job_id or "")
            if known is None:
                status = replace(status, status="lost", message=f"job {status.job_id} left the queue without "
                                 "recording an end (cancelled before it started, or killed)")
                status.write(folder)
            elif known[0] in ACTIVE:
                status = replace(status, status=known[0], message=f"job {status.job_id} {known[0]}"
                                 + (f" ({known[1]})" if known[1] and known[1] != "None" else ""))
            else:
                final = "failed" if known[0] == "completed" else known[0]
                status = replace(status, status=final, message=f"job {status.job_id} ended {known[0].upper()}"
                                 + ("" if final != "failed" else "; the run did not record an end"))
                status.write(folder)
        out[folder] = status
    return out


def partition_nodes(partition: str | None, run: Callable[..., Any] = subprocess.run) -> list[tuple[str, int | None]]:
    """(node, GPUs it declares) for every node of the partition (the default one where None), from sinfo;
    empty where sinfo cannot say (then sbatch judges)."""
    argv = ["sinfo", "-h", "-N", "-o", "%N|%G|%P"] + (["-p", partition] if partition else [])
    try:
        out = run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return []
    nodes: dict[str, int | None] = {}
    for line in out.stdout.splitlines() if out.returncode == 0 else []:
        node, _, rest = line.strip().partition("|")
        gres, _, part = rest.partition("|")
        if partition is None and not part.endswith("*"):
            continue  # not the default partition
        counts = [int(m.group(1)) for m in re.finditer(r"gpu(?::[\w.-]+)?:(\d+)", gres)]
        nodes[node] = sum(counts) if counts else (0 if gres in ("(null)", "") else None)
    return list(nodes.items())


def partition_problem(specs: Sequence[RunSpec], options: SlurmOptions,
                      run: Callable[..., Any] = subprocess.run) -> str | None:
    """Why the partition cannot hold a run (more nodes than it has, more GPUs per node than its nodes
    declare), in one line, before anything is submitted; None where it can, or sinfo cannot say."""
    if not specs:
        return None
    nodes = partition_nodes(options.partition, run)
    if not nodes:
        return None
    where = f"partition {options.partition}" if options.partition else "the default partition"
    most = max(specs, key=lambda s: s.nodes)
    if most.nodes > len(nodes):
        return f"run {most.id} needs {most.nodes} nodes but {where} has {len(nodes)}"
    gpus = [g for _, g in nodes if g is not None]
    if options.gpus and len(gpus) == len(nodes):  # every node says what it has
        widest = max(specs, key=gpus_needed)
        if sum(g >= gpus_needed(widest) for g in gpus) < widest.nodes:
            return (f"run {widest.id} needs {gpus_needed(widest)} GPU(s) on each of {widest.nodes} node(s) "
                    f"but {where}'s nodes declare {', '.join(map(str, sorted(set(gpus))))}")
    return None


class SlurmExecutor:
    """Submits runs as SLURM jobs through submitit; ``resume`` leaves out what is complete or queued."""

    def __init__(self, root: Path, options: SlurmOptions, *, name: str, python: str = sys.executable,
                 resume: bool = True, retries: int = 0,
                 report: Callable[[str], None] = lambda line: print(line, flush=True)) -> None:
        self.root, self.options, self.name = root, options, name
        self.python, self.resume, self.retries, self.report = python, resume, retries, report

    def describe(self, spec: RunSpec) -> str:
        """What submitting spec would do: the job's resources and what its task(s) run."""
        params = job_parameters(self.options, spec, self.name, self.retries)
        resources = " ".join(f"{k}={v}" for k, v in params.items() if v not in ([], {}, None))
        ctx = LaunchContext(python=self.python, run_dir=(self.root / spec.id).resolve(), pmi=self.options.mpi)
        each = "each task" if launcher_class(spec.launcher).task_per_rank else \
            f"the first task ({spec.launcher} over the allocation)"
        return f"{resources}\n    {each} runs: {shlex.join(rank_command(spec, ctx))}"

    def pending(self, specs: Sequence[RunSpec]) -> list[RunSpec]:
        """The specs to submit: all, or with resume those neither complete nor queued/running."""
        if not self.resume:
            return list(specs)
        states = refresh(self.root) if self.root.exists() else {}
        by_id = {folder.name: status.status for folder, status in states.items()}
        return [s for s in specs if by_id.get(s.id) not in (*FINAL_OK, *ACTIVE)]

    def submit(self, specs: Sequence[RunSpec]) -> list[tuple[RunSpec, str]]:
        """Submit each spec (grouped by job shape; as job arrays when array_parallelism is set)."""
        try:
            import submitit
        except ImportError:
            raise LaunchError("SLURM submission needs submitit: pip install 'hvdbench[slurm]'") from None
        if shutil.which("sbatch") is None:
            raise LaunchError("SLURM submission needs sbatch on PATH: this machine has no SLURM client")
        todo = self.pending(specs)
        problem = partition_problem(todo, self.options)
        if problem:
            raise LaunchError(problem)
        self.root.mkdir(parents=True, exist_ok=True)
        submitted: list[tuple[RunSpec, str]] = []
        groups: dict[tuple[int, int, str], list[RunSpec]] = {}
        for spec in todo:
            groups.setdefault((spec.nodes, spec.ranks_per_node, spec.launcher), []).append(spec)
        for group in groups.values():
            executor = submitit.AutoExecutor(folder=self.root / JOBS_DIR / "%j", cluster="slurm")
            executor.update_parameters(**job_parameters(self.options, group[0], self.name, self.retries))
            for spec in group:
                spec.write(self.root / spec.id)
            try:
                if self.options.array_parallelism and len(group) > 1:
                    with executor.batch():
                        jobs = [executor.submit(run_task, s.to_dict(), str((self.root / s.id).resolve()), self.python,
                                                (), self.retries) for s in group]
                else:
                    jobs = [executor.submit(run_task, s.to_dict(), str((self.root / s.id).resolve()), self.python,
                                            (), self.retries) for s in group]
            except Exception as exc:  # submitit raises plain exceptions for sbatch errors
                raise LaunchError(f"sbatch refused the job(s): {str(exc).strip().splitlines()[-1]}") from None
            for spec, job in zip(group, jobs):
                RunStatus("submitted", None, 0.0, f"job {job.job_id} submitted", job_id=str(job.job_id)).write(
                    self.root / spec.id)
                submitted.append((spec, str(job.job_id)))
                self.report(f"{spec.id}: job {job.job_id}")
        return submitted
