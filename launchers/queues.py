"""What every scheduler's submission shares: the executor base of their submitters (what resume leaves out:
complete, or still queued or running) and ``refresh``: each run's state from its own record and, while under way,
its scheduler's queue's word (launchers/schedulers.queue_of: the scheduler its status names, else the one whose
job ids have its id's form)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

from hvdbench.core.errors import HvdbenchError, LaunchError
from hvdbench.core.spec import RUN_FILE, RunSpec, RunStatus

from .executor import Executor
from .policy import completed
from .schedulers import ACTIVE, FINAL_OK, UNKNOWN, queue_of, run_dirs, schedulers


class Submitter(Executor):
    """An executor that submits jobs: resume leaves out runs complete, queued or running, as their queue says."""

    _states: dict[str, str] | None = None

    def finished(self, spec: RunSpec) -> bool:
        if self._states is None:  # the queue asked once per submission
            self._states = {f.name: st.status for f, st in (refresh(self.root) if self.root.exists() else {}).items()}
        return self._states.get(spec.id) in (*FINAL_OK, *ACTIVE)

    def pending(self, specs: Sequence[RunSpec]) -> list[RunSpec]:
        """The specs to submit: all, or with resume those neither complete nor queued/running."""
        self._states = None
        return self.todo(specs)


class ScriptSubmitter(Submitter):
    """The submit loop written once (as submitit writes it for SLURM) behind three hooks: a run's job script, the
    command that submits a script file (run in the results root), and the job id in what that command printed. Each
    run's spec is written, then its script under ``jobs``, then submitted; its status names the job and the
    scheduler."""

    scheduler: ClassVar[str]  # the name a run's status gives its scheduler (its queue is asked by it)
    tool: ClassVar[str]  # its submit command (qsub, bsub), which must be on PATH
    jobs: ClassVar[str] = "jobs"  # the folder of job scripts under the results root
    suffix: ClassVar[str] = ".sh"
    on_stdin: ClassVar[bool] = False  # the script also given on the command's stdin (LSF's ``bsub < script``)

    def job_script(self, spec: RunSpec, run_dir: Path) -> str:
        """The job script of one run (its run folder absolute)."""
        raise NotImplementedError

    def submit_command(self, script: Path) -> list[str]:
        """The command that submits a script file: the tool with the script's path (on_stdin: the script read
        from stdin instead, where the tool takes it so)."""
        return [self.tool] if self.on_stdin else [self.tool, str(script)]

    def job_id(self, printed: str) -> str | None:
        """The job id in what the submit command printed on stdout (None: it printed none)."""
        raise NotImplementedError

    def refuse(self, specs: Sequence[RunSpec]) -> None:
        """A UsageError for the first run this scheduler cannot take, before any job is submitted."""

    def execute(self, specs: Sequence[RunSpec]) -> list[RunStatus]:
        """Submit every spec that is not finished; each submitted run's status (``submitted``, its job id)."""
        if shutil.which(self.tool) is None:
            raise LaunchError(f"{self.scheduler.upper()} submission needs {self.tool} on PATH: this machine has no "
                              f"{self.scheduler.upper()} client")
        todo = self.pending(specs)
        self.refuse(todo)
        (self.root / self.jobs).mkdir(parents=True, exist_ok=True)
        self.plan_order(todo)
        out = []
        for spec in todo:
            run_dir = (self.root / spec.id).resolve()
            spec.write(run_dir, self.order.get(spec.id))
            script = (self.root / self.jobs / f"{spec.id}{self.suffix}").resolve()  # the submit runs in the root
            script.write_text(self.job_script(spec, run_dir), encoding="utf-8")
            job = self._submit(script)
            status = RunStatus("submitted", None, 0.0, f"job {job} submitted", job_id=job, scheduler=self.scheduler)
            status.write(run_dir)
            out.append(status)
            self.report(f"{spec.id}: job {job}")
        return out

    def _submit(self, script: Path) -> str:
        argv = self.submit_command(script)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=self.root,
                                  input=script.read_text(encoding="utf-8") if self.on_stdin else None)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise LaunchError(f"{argv[0]} could not be run: {exc}") from None
        said = (done.stdout.strip().splitlines() or [""])[-1].strip()
        job = self.job_id(done.stdout) if done.returncode == 0 else None
        if job is None:
            first = next((line.strip() for line in done.stderr.splitlines() if line.strip()), said or "no output")
            raise LaunchError(f"{argv[0]} refused {script.name}: {first[:300]!r}")
        return job


def refresh(root: Path, run: Callable[..., Any] = subprocess.run) -> dict[Path, RunStatus]:
    """Each run's state from its status.json and, for runs under way, their scheduler's queue; states the
    queue knows and the run could not record (cancelled while pending, failed node) are written."""
    statuses = {d: RunStatus.read(d) for d in run_dirs(root)}
    active = {d: s for d, s in statuses.items() if s is not None and s.status in ACTIVE and s.job_id}
    by_queue: dict[str, list[str]] = {}
    for under_way in active.values():
        by_queue.setdefault(queue_of(under_way.job_id or "", under_way.scheduler).name, []).append(
            under_way.job_id or "")
    queues = {cls.queue.name: cls.queue for cls in schedulers().values()}
    queue = {job: state for name, ids in by_queue.items() for job, state in queues[name].states(ids, run).items()}
    out: dict[Path, RunStatus] = {}
    for folder, status in statuses.items():
        if status is None:
            try:
                finished = completed(folder, RunSpec.read(folder / RUN_FILE))
            except HvdbenchError:
                finished = None
            out[folder] = finished or RunStatus("not run", None, 0.0)
        elif folder in active:
            out[folder] = _as_queued(folder, status, queue.get(status.job_id or ""))
        else:
            out[folder] = status
    return out


def _as_queued(folder: Path, status: RunStatus, known: tuple[str, str] | None) -> RunStatus:
    """A run under way as its queue says: still under way, ended (written where the run recorded no end), or gone."""
    if known is None:
        return _unless_recorded(folder, status, replace(
            status, status="lost", message=f"job {status.job_id} left the queue without "
            "recording an end (cancelled before it started, or killed)"))
    if known[0] == UNKNOWN:  # a state without a word here: the run stays as it was, said, nothing written
        return replace(status, message=f"job {status.job_id} in {known[1]}: left as it was (no end is taken from it)")
    if known[0] in ACTIVE:
        return replace(status, status=known[0], message=f"job {status.job_id} {known[0]}"
                       + (f" ({known[1]})" if known[1] and known[1] != "None" else ""))
    final = "failed" if known[0] == "completed" else known[0]
    return _unless_recorded(folder, status, replace(
        status, status=final, message=f"job {status.job_id} ended {known[0].upper()}"
        + (f" ({known[1]})" if known[1] and known[1] != "None" else "")  # the scheduler's own reason
        + ("" if final != "failed" else "; the run did not record an end")))


def _unless_recorded(folder: Path, seen: RunStatus, inferred: RunStatus) -> RunStatus:
    """What the scheduler says of a run that ended without a record, written, unless the job recorded its
    own end after ``seen`` was read (it wrote status.json, then left the queue): that record stands."""
    now = RunStatus.read(folder)
    if now is not None and now != seen and now.status not in ACTIVE:
        return now
    inferred.write(folder)
    return inferred
