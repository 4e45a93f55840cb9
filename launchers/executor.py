"""The executor interface both ways of running share (submitit's shape: one base, what differs per
scheduler a named hook): a results root, what is left to do on resume, each run's folder prepared alike
(its run.json written, an earlier attempt moved aside, never deleted), a placement the scheduler's grant
cannot hold refused alike, the retry policy (launchers/policy.py), and a dry-run description. The local
executor runs here, one run at a time (launchers/local.py); the SLURM one submits jobs (launchers/slurm.py)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Callable, Iterable, Mapping

from hvdbench.suite.core.errors import LaunchError
from hvdbench.suite.core.gpu_choice import granted, placement_problem
from hvdbench.suite.core.spec import RunSpec, keep_earlier_attempt

from .base import Launcher


class Executor:
    """Runs or submits RunSpecs under one results root. Hooks: ``describe`` (what running one would do),
    ``finished`` (whether resume leaves a run out)."""

    def __init__(self, root: Path, *, python: str = sys.executable, resume: bool = True, retries: int = 0,
                 report: Callable[[str], None] = lambda line: print(line, flush=True)) -> None:
        self.root, self.python, self.resume, self.retries, self.report = root, python, resume, retries, report

    def describe(self, spec: RunSpec) -> str:
        """What running ``spec`` would do, as the dry run prints it."""
        raise NotImplementedError

    def finished(self, spec: RunSpec) -> bool:
        """Whether resume leaves ``spec`` out (complete; under a scheduler also queued or running)."""
        raise NotImplementedError

    def todo(self, specs: Iterable[RunSpec]) -> list[RunSpec]:
        """The specs to run: all, or with resume those not finished."""
        return [s for s in specs if not (self.resume and self.finished(s))]

    @staticmethod
    def prepare(spec: RunSpec, run_dir: Path) -> None:
        """A run's folder before an attempt: its run.json, and what an earlier attempt left moved aside."""
        try:
            spec.write(run_dir)
            keep_earlier_attempt(run_dir)
        except OSError as exc:
            raise LaunchError(f"cannot write the run directory {run_dir}: {exc.strerror}") from None


def scheduler_chose_gpus(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this process runs in a SLURM job that was granted GPUs (then SLURM's CUDA_VISIBLE_DEVICES stands)."""
    environ = os.environ if environ is None else environ
    return bool(environ.get("SLURM_JOB_ID")) and granted(environ) is not None


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
