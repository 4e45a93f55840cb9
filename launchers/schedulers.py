"""The schedulers runs are submitted to, each a registered class in its own module (ReFrame's
``@register_scheduler`` in spirit): the name its sweep-file block goes by, that block's typed options, the checks
on them, the submit flags it has keys for, its queue (the form of its job ids, the states its status tool says)
and the executor that submits. A sweep file names one by its block (``slurm:``, ``pbs:``); one naming none goes
to the default. The sweep reader, the submit command and the queue refresh ask here and name none of them."""

from __future__ import annotations

import importlib
import math
import re
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Sequence, TypeVar

from hvdbench.core.errors import LaunchError, UsageError
from hvdbench.core.job_env import job_env
from hvdbench.core.options import Kind, OptionError
from hvdbench.core.spec import RUN_FILE, UNDER_WAY

from .executor import Executor

BUILTIN = ("slurm", "pbs")  # the modules of launchers/ whose classes register themselves
ACTIVE = UNDER_WAY  # a run's states while its job is under way (core/spec.py)
UNKNOWN = "unknown"  # a queue's state hvdbench has no word for: never taken for an end
FINAL_OK = ("ok",)


def run_dirs(root: Path) -> list[Path]:
    """Every run directory (one holding run.json) under a results root, or root itself if it is one."""
    if (root / RUN_FILE).exists():
        return [root]
    return sorted(p.parent for p in root.glob(f"*/{RUN_FILE}"))


_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def time_minutes(text: str) -> int | None:
    """Minutes (seconds rounded up) of a time in sbatch's formats; None if it is not one or is zero."""
    match = _TIME.match(text.strip())
    if not match:
        return None
    days, first, second, third = match.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = int(first), int(second or 0), int(third or 0)
    elif third is not None:  # HH:MM:SS
        hours, minutes, seconds = int(first), int(second), int(third)
    else:  # MM or MM:SS
        hours, minutes, seconds = 0, int(first), int(second or 0)
    total = int(days or 0) * 1440 + hours * 60 + minutes + (1 if seconds else 0)
    return total or None


MOST_MINUTES = 366 * 24 * 60  # a job's time beyond a year is a typo (190 years was written once), not a plan


class Minutes(Kind):
    """A job's time as minutes: a number of minutes, or sbatch's MM:SS, HH:MM:SS, D-HH, D-HH:MM[:SS] (PBS's walltime
    HH:MM:SS among them); at most a year."""

    metavar = "MINUTES"

    def read(self, value: Any, base: Path) -> int:
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            total: int | None = value
        else:
            total = time_minutes(value) if isinstance(value, str) else None
        if total is None:
            raise OptionError(f"expected minutes or sbatch's time format (MM:SS, HH:MM:SS, D-HH:MM:SS), got {value!r}")
        if total > MOST_MINUTES:
            raise OptionError(f"{value!r} is {total / MOST_MINUTES * 366:,.0f} days: at most 366 days (a longer job "
                              "is a typo, and no scheduler grants it)")
        return total


def job_minutes(timeout_s: float) -> int:
    """A job's SLURM time where the file gives none: the run's timeout, a quarter more, and 5 minutes to start (its
    environment, its ranks' imports) and record how it ended."""
    return max(5, math.ceil(timeout_s * 1.25 / 60) + 5)


def setup_problem(setup: tuple[str, ...], mark: str, key: str) -> str | None:
    """Why a job's setup line may not stand, or None: a line the scheduler would read as a directive (``mark``, as
    ``#SBATCH``, before the job's first command: it would override the GPUs, queue or size the checked keys set);
    ``key`` the block's."""
    for i, line in enumerate(setup):
        if line.lstrip().upper().startswith(mark):
            return (f"{key}.setup[{i}]: {line.strip()[:60]!r} would be read as a {mark} directive, unchecked; give it "
                    f"in {key}.directives (checked against what hvdbench sets), or write it without the leading "
                    f"{mark}")
    return None


def allocation_hosts() -> tuple[str, ...]:
    """The hosts of the job this process runs in, as its scheduler lists them (SLURM's node list expanded, PBS's
    node file read: core/job_env.py)."""
    try:
        return job_env().hosts()
    except UsageError as exc:
        raise LaunchError(str(exc)) from None


class Queue:
    """One scheduler's queue as a submitter asks it: ``states`` (job id -> its state as a run's status names it,
    and the scheduler's reason), for the jobs whose ids have its form (``job_id``)."""

    name: ClassVar[str]
    job_id: ClassVar[re.Pattern[str]]

    def states(self, job_ids: Sequence[str], run: Callable[..., Any]) -> dict[str, tuple[str, str]]:
        raise NotImplementedError


class Scheduler:
    """A scheduler as submission sees it, holding a sweep's block of its options (``options``: a frozen dataclass
    of core/options.py fields, ``time_min`` among them). Subclasses set the class attributes and ``executor``."""

    name: ClassVar[str]  # its sweep-file block's key
    options_class: ClassVar[type]  # that block's options
    queue: ClassVar[Queue]
    job_flags: ClassVar[tuple[str, ...]] = ("time_min",)  # submit's job flags its block has keys for
    default: ClassVar[bool] = False  # the scheduler of a sweep file that names none

    def __init__(self, options: Any = None) -> None:
        self.options = self.options_class() if options is None else options

    def pmi(self) -> str | None:
        """How srun-like launchers inside its jobs wire ranks through it (a PMI plugin), where it says."""
        return None

    def problem(self, sweep: Any) -> tuple[str, str] | None:
        """(key, why) where the block may not stand with the rest of the sweep; None where it may."""
        return None

    def warnings(self) -> list[str]:
        """What the block will cost the measurements, one line each."""
        return []

    def whole_sweep(self, sweep: Any) -> bool:
        """Whether the sweep goes as jobs of whole shapes (an allocation each) rather than one job a run."""
        return False

    def submit_whole(self, sweep: Any, specs: Sequence[Any], root: Path, *, sweep_file: Path, container: Any,
                     dry_run: bool, tags: Mapping[str, str] | None = None, say: Callable[[str], None] = print) -> None:
        """Submit (or with ``dry_run`` show) the sweep as jobs of whole shapes, where ``whole_sweep`` says so."""
        raise UsageError(f"{self.name} submits one job a run")

    def executor(self, root: Path, *, name: str, resume: bool, retries: int, per_node: bool = False) -> Executor:
        """What submits the runs, one job a run (a launchers/queues.py Submitter); ``per_node``: the runs pinned to
        one node as one job a node, where the scheduler's executor can (SLURM's)."""
        raise NotImplementedError

    def with_options(self, **given: Any) -> "Scheduler":
        """This scheduler with options replaced (submit's job flags; a screen's), those its block has no key for
        refused in one line."""
        mine = {f.name for f in fields(self.options_class)}
        unheld = sorted(set(given) - mine)
        if unheld:
            flag = "--time" if unheld[0] == "time_min" else f"--{unheld[0].replace('_', '-')}"
            raise UsageError(f"{flag} is not {self.name}'s: the sweep's {self.name}: block takes "
                             f"{', '.join(sorted(f.replace('time_min', 'time') for f in mine))}")
        return type(self)(replace(self.options, **given))


S = TypeVar("S", bound=type[Scheduler])
SCHEDULERS: dict[str, type[Scheduler]] = {}


def register_scheduler(cls: S) -> S:
    """Class decorator: the scheduler known by its name (its sweep-file block)."""
    SCHEDULERS[cls.name] = cls
    return cls


def schedulers() -> dict[str, type[Scheduler]]:
    """Every registered scheduler, the built-in ones loaded."""
    for module in BUILTIN:
        importlib.import_module(f"{__package__}.{module}")
    return SCHEDULERS


def default_scheduler() -> type[Scheduler]:
    """The scheduler of a sweep file that names none."""
    return next(cls for cls in schedulers().values() if cls.default)


def scheduler_of(sweep: Any) -> Scheduler:
    """The scheduler a sweep's file named, with its block's options (the default's defaults for a sweep built in
    memory)."""
    chosen = getattr(sweep, "scheduler", None)
    return chosen if isinstance(chosen, Scheduler) else default_scheduler()()


def queue_of(job_id: str, scheduler: str | None = None) -> Queue:
    """The queue of a job: its scheduler's where the run's status names one known here, else the one whose ids
    have the job id's form (the default scheduler's where none claims it: what older results hold)."""
    known = schedulers()
    if scheduler in known:
        return known[scheduler].queue
    return next((cls.queue for cls in known.values() if cls.queue.job_id.match(job_id)), default_scheduler().queue)


def with_job_flags(sweep: Any, given: dict[str, Any]) -> Any:
    """The sweep with submit's --partition/--account/--qos/--time in place of its scheduler block's keys."""
    return replace(sweep, scheduler=scheduler_of(sweep).with_options(**given)) if given else sweep


def submitter(sweep: Any, root: Path, *, resume: bool, retries: int) -> Executor:
    """The executor of the scheduler the sweep file's block names, built from that block."""
    return scheduler_of(sweep).executor(root, name=sweep.name, resume=resume, retries=retries)
