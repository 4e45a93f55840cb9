"""The submitters by scheduler, chosen by a sweep file's block (``pbs:`` names PBS, else SLURM), each built from
that block with submit's job flags in place of its keys."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from hvdbench.core.errors import UsageError

from .pbs import PbsExecutor
from .queues import Submitter
from .slurm import SlurmExecutor
from .sweep import Sweep

PBS_FLAGS = ("account", "time_min")  # submit's job flags a pbs: block has keys for


def with_job_flags(sweep: Sweep, given: dict[str, Any]) -> Sweep:
    """The sweep with submit's --partition/--account/--qos/--time in place of its scheduler block's keys; a flag
    its scheduler has no key for is refused."""
    if not given:
        return sweep
    if sweep.pbs is None:
        return replace(sweep, slurm=replace(sweep.slurm, **given))
    unheld = sorted(set(given) - set(PBS_FLAGS))
    if unheld:
        raise UsageError(f"--{unheld[0]} is SLURM's; {sweep.path} names PBS (its pbs: block: queue, account, time)")
    return replace(sweep, pbs=replace(sweep.pbs, **given))


def submitter(sweep: Sweep, root: Path, *, resume: bool, retries: int) -> Submitter:
    """The executor of the scheduler the sweep file's block names, built from that block."""
    if sweep.pbs is not None:
        return PbsExecutor(root, sweep.pbs, name=sweep.name, resume=resume, retries=retries)
    return SlurmExecutor(root, sweep.slurm, name=sweep.name, resume=resume, retries=retries)
