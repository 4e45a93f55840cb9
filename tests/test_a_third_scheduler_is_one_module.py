"""A scheduler is one module and one row, as CONTRIBUTING's table says: a stand-in LSF written here alone (its
sweep-file block's options, its queue read through ``bjobs``, its executor the one submit loop's three hooks (its
script, ``bsub``, the id bsub prints), its in-job
row: variables, hosts, requeue) is read from a sweep file's ``lsf:`` block, submitted by ``hvdbench submit`` (whose
code names no scheduler), refused where a flag is not its own, and its runs' states come from its own queue, not
from the scheduler whose job ids look alike (SLURM's are numbers too)."""

from __future__ import annotations

import json
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import pytest

from hvdbench.cli import main
from hvdbench.core import job_env as job_env_module
from hvdbench.core.errors import UsageError
from hvdbench.core.options import Grammar, Switch, option
from hvdbench.core.spec import RunSpec, RunStatus
from hvdbench.core.validate import QUEUE_WORD
from hvdbench.launchers.queues import ScriptSubmitter, refresh
from hvdbench.launchers.schedulers import (SCHEDULERS, Queue, Scheduler, register_scheduler, scheduler_of,
                                           with_job_flags)
from hvdbench.launchers.schedulers import Minutes
from hvdbench.launchers.sweep import SweepError, load_sweep

# ---- the stand-in scheduler: what launchers/lsf.py would hold ------------------------------------------------------
BJOBS_STATES = {"PEND": "pending", "PSUSP": "pending", "RUN": "running", "USUSP": "running", "DONE": "completed",
                "EXIT": "failed"}


@dataclass(frozen=True)
class LsfOptions:
    """A sweep file's lsf: block."""

    queue: str | None = option(None, Grammar(QUEUE_WORD, "an LSF queue name"), "LSF queue (bsub -q)")
    time_min: int = option(60, Minutes(), "each job's run limit, minutes", key="time")
    gpus: bool = option(True, Switch(), "ask for the node's GPUs")
    exclusive: bool = option(False, Switch(), "each job has its nodes to itself (bsub -x)")


class LsfQueue(Queue):
    name = "lsf"
    job_id = re.compile(r"^\d+$")  # the same form as SLURM's: the status's scheduler decides

    def states(self, job_ids: Sequence[str], run: Callable[..., Any]) -> dict[str, tuple[str, str]]:
        out = run(["bjobs", "-noheader", "-o", "jobid stat", *job_ids], capture_output=True, text=True, timeout=60)
        found = dict(line.split() for line in out.stdout.splitlines() if len(line.split()) == 2)
        return {job: (BJOBS_STATES.get(state, "unknown"), f"bjobs: {state}") for job, state in found.items()}


def bsub_script(spec: RunSpec, options: LsfOptions, run_dir: Path, python: str) -> str:
    lines = ["#!/bin/bash", f"#BSUB -n {spec.np}", f"#BSUB -W {options.time_min}",
             f"#BSUB -R span[ptile={spec.ranks_per_node}]", f"#BSUB -o {run_dir.parent / 'lsf-jobs' / spec.id}.out"]
    lines += [f"#BSUB -q {options.queue}"] if options.queue else []
    lines += ["#BSUB -x"] if options.exclusive else []
    task = [python, "-m", "hvdbench.launchers.job_task", str(run_dir), python, "0"]
    return "\n".join([*lines, f"exec {shlex.join(task)}", ""])


class LsfExecutor(ScriptSubmitter):
    """Its three hooks on the one submit loop: the script, bsub (the script on its stdin), the id bsub prints."""

    scheduler, tool, jobs, on_stdin = "lsf", "bsub", "lsf-jobs", True

    def __init__(self, root: Path, options: LsfOptions, *, name: str, resume: bool, retries: int) -> None:
        super().__init__(root, resume=resume, retries=retries)
        self.options = options

    def describe(self, spec: RunSpec) -> str:
        return bsub_script(spec, self.options, (self.root / spec.id).resolve(), self.python)

    def job_script(self, spec: RunSpec, run_dir: Path) -> str:
        return bsub_script(spec, self.options, run_dir, self.python)

    def job_id(self, printed: str) -> str | None:
        found = re.match(r"Job <(\d+)> is submitted", printed)
        return found.group(1) if found else None


class Lsf(Scheduler):
    name = "lsf"
    options_class = LsfOptions
    queue = LsfQueue()
    job_flags = ("time_min",)

    def executor(self, root: Path, *, name: str, resume: bool, retries: int) -> LsfExecutor:
        return LsfExecutor(root, self.options, name=name, resume=resume, retries=retries)


class LsfInJob(job_env_module.Scheduler):
    """The in-job row: LSB_HOSTS names a host once a slot."""

    def hosts(self, env: job_env_module.JobEnv) -> tuple[str, ...]:
        return tuple(dict.fromkeys((env.get("hosts") or "").split()))

    def requeue(self, job: str) -> list[str]:
        return ["brequeue", job]


IN_JOB = LsfInJob("lsf", {"job_id": ("LSB_JOBID",), "hosts": ("LSB_HOSTS",), "array_task_id": ("LSB_JOBINDEX",)})
# ---- end of the stand-in -------------------------------------------------------------------------------------------


@pytest.fixture
def lsf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The stand-in registered as launchers/lsf.py would register it, with bsub and bjobs on PATH (bsub records
    the job; bjobs answers from the state file the test writes); unregistered after."""
    register_scheduler(Lsf)
    monkeypatch.setitem(job_env_module.SCHEDULERS, "lsf", IN_JOB)
    bin_dir, state = tmp_path / "bin", tmp_path / "lsf-state.json"
    bin_dir.mkdir()
    state.write_text("{}")
    (bin_dir / "bsub").write_text(
        f"#!{sys.executable}\nimport json, sys\nstate = json.load(open({str(state)!r}))\njob = str(41 + len(state))\n"
        f"state[job] = 'PEND'\njson.dump(state, open({str(state)!r}, 'w'))\nsys.stdin.read()\n"
        "print(f'Job <{job}> is submitted to queue <normal>.')\n")
    (bin_dir / "bjobs").write_text(
        f"#!{sys.executable}\nimport json, sys\nstate = json.load(open({str(state)!r}))\n"
        "for job in sys.argv[1:]:\n    if job in state:\n        print(job, state[job])\n")
    for tool in ("bsub", "bjobs"):
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{sys.executable.rsplit('/', 1)[0]}:/usr/bin:/bin")
    yield state
    SCHEDULERS.pop("lsf", None)


def _sweep(tmp_path: Path, block: str) -> Path:
    path = tmp_path / "lsf-sweep.yaml"
    path.write_text("name: lsf-sweep\nlauncher: mpirun\ntimeout: 300\nbaseline: false\n"
                    "workloads: [{benchmark: mlp, args: [--steps, '6']}]\naxes: {nodes: [1], gpus_per_node: [2]}\n"
                    f"{block}\n")
    return path


def test_a_sweep_files_lsf_block_is_read_into_its_options(lsf: Path, tmp_path: Path) -> None:
    sweep = load_sweep(_sweep(tmp_path, "lsf: {queue: gpu, time: '01:30:00', exclusive: true}"))
    assert isinstance(sweep.scheduler, Lsf)
    assert sweep.scheduler.options == LsfOptions(queue="gpu", time_min=90, exclusive=True)
    with pytest.raises(SweepError, match=r"lsf\.queue|queue"):
        load_sweep(_sweep(tmp_path, "lsf: {queue: 'g p u'}"))
    with pytest.raises(SweepError, match="names one scheduler"):
        load_sweep(_sweep(tmp_path, "lsf: {queue: gpu}\nslurm: {partition: gpu}"))
    with pytest.raises(UsageError, match="--partition is not lsf's"):
        with_job_flags(sweep, {"partition": "big"})
    assert scheduler_of(with_job_flags(sweep, {"time_min": 15})).options.time_min == 15


def test_submit_sends_an_lsf_sweep_through_bsub_and_bjobs_says_its_state(lsf: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "results"
    file = _sweep(tmp_path, "lsf: {queue: gpu, time: 20}")
    assert main(["submit", str(file), "-o", str(root), "--dry-run"]) == 0
    assert "#BSUB -q gpu\n" in capsys.readouterr().out.replace("\n    ", "\n")
    assert main(["submit", str(file), "-o", str(root)]) == 0
    assert "submitted 1 job(s)" in capsys.readouterr().out
    (run_dir,) = [p.parent for p in root.glob("*/run.json")]
    status = RunStatus.read(run_dir)
    assert status is not None and (status.job_id, status.scheduler) == ("41", "lsf")
    assert {d.name: s.status for d, s in refresh(root).items()} == {run_dir.name: "pending"}
    lsf.write_text(json.dumps({"41": "RUN"}))
    assert refresh(root)[run_dir].status == "running"
    lsf.write_text(json.dumps({"41": "EXIT"}))  # ended without recording its end: bjobs says so, written
    ended = refresh(root)[run_dir]
    assert ended.status == "failed" and "job 41 ended FAILED" in ended.message


def test_the_in_job_row_gives_the_jobs_hosts_and_requeue(lsf: Path) -> None:
    inside = job_env_module.job_env({"LSB_JOBID": "41", "LSB_HOSTS": "n1 n1 n2 n2"})
    assert inside.scheduler == "lsf" and inside.job_id == "41"
    assert inside.hosts() == ("n1", "n2") and inside.requeue_command() == ["brequeue", "41"]


def test_every_built_in_scheduler_submits_and_runs_its_jobs_under_one_name() -> None:
    """A scheduler's two sides, the submission (launchers/) and the in-job row (core/job_env.py), keyed by one name:
    every built-in submitter has its in-job row, so its jobs' hosts, requeue and variables are read."""
    from hvdbench.launchers.schedulers import BUILTIN, schedulers

    built_in = {name: cls for name, cls in schedulers().items() if cls.__module__.rsplit(".", 1)[-1] in BUILTIN}
    assert set(built_in) == set(BUILTIN)
    assert set(built_in) <= set(job_env_module.SCHEDULERS), set(built_in) - set(job_env_module.SCHEDULERS)
    for name in built_in:
        assert job_env_module.SCHEDULERS[name].name == name and job_env_module.SCHEDULERS[name].requeue("7")
