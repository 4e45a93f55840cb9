"""A plan run on this machine (or inside an allocation): the checks before it, the executor made once, the command's
tags, rounds until decided where the sweep asks for them, and what follows (the runs recorded in the history store and
reported, both from one reading of the results root)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

from hvdbench.analysis.collect import collect
from hvdbench.analysis.history.recording import record_and_say
from hvdbench.core.errors import HvdbenchError
from hvdbench.core.spec import RunSpec, RunStatus
from hvdbench.core.tags import write_tags
from hvdbench.core.validate import inert
from hvdbench.launchers.executor import Executor
from hvdbench.launchers.plan import Plan
from hvdbench.launchers.runs import Prepared, fits_allocation, local_executor, prepare_here
from hvdbench.launchers.sweep import NOT_DECIDED, Sweep

from .judge import report
from .outcome import Outcome


@dataclass(frozen=True)
class Here:
    """How a plan is run here: resume complete runs, the timeout and retries (None: the sweep's), report at the end,
    the history store, the command's tags, inside an allocation (its hosts, what fits it)."""

    resume: bool = True
    timeout: float | None = None
    retries: int | None = None
    report: bool = True
    store: str | None = None
    tags: Mapping[str, str] = field(default_factory=dict)
    in_allocation: bool = False


def checked(sweep: Sweep, specs: Sequence[RunSpec], root: Path, outcome: Outcome) -> Prepared:
    """The checks before running here (launchers/runs.py prepare_here), their warnings said."""
    prepared = prepare_here(sweep, specs, root)
    for line in prepared.warnings:
        outcome.note(f"warning: {inert(line)}")
    return prepared


def tag(executor: Executor, root: Path, specs: Sequence[RunSpec], tags: Mapping[str, str]) -> None:
    """The command's tags on the runs it will make (not those resume leaves as they are), in the root."""
    if tags:
        write_tags(root, [spec.id for spec in executor.todo(specs)], tags)


@dataclass(frozen=True)
class Ready:
    """A plan checked and ready to run here: the runs it will make, its executor (made once), its hosts and the
    environment its checks chose."""

    sweep: Sweep
    specs: tuple[RunSpec, ...]
    root: Path
    how: Here
    hosts: tuple[str, ...]
    environment: Mapping[str, str]
    executor: Executor


def ready(sweep: Sweep, planned: Plan, root: Path, how: Here) -> tuple[Ready, Outcome]:
    """The plan checked (inside an allocation: what fits it), its executor made and the command's tags written;
    what is to be said before the runs start."""
    outcome, specs, hosts = Outcome(), list(planned.specs), sweep.hosts
    for note in planned.skipped:
        outcome.note(f"left out: {note}")
    if how.in_allocation:
        from hvdbench.launchers.schedulers import allocation_hosts

        hosts = allocation_hosts()
        fit = [s for s in specs if fits_allocation(s)]
        if len(fit) < len(specs):
            outcome.note(f"{len(specs) - len(fit)} run(s) need a larger allocation and are left for one")
        specs = fit
    prepared = checked(sweep, specs, root, outcome)
    executor = local_executor(sweep, root, resume=how.resume, timeout=how.timeout, hosts=hosts,
                              retries=how.retries, environment=prepared.environment)
    tag(executor, root, specs, how.tags)
    return Ready(sweep, tuple(specs), root, how, tuple(hosts), dict(prepared.environment), executor), outcome


def run_ready(plan: Ready) -> Outcome:
    """Run the plan, in rounds until decided where its sweep asks, then record and report it; exit status 0 all
    ok, 1 any run did not complete, NOT_DECIDED where a configuration was left undecided."""
    if not plan.sweep.until_decided:
        return finish(plan.executor.execute(list(plan.specs)), plan.root, plan.how)
    from .until_decided import run_until_decided

    statuses, undecided = run_until_decided(plan.sweep, plan.specs, plan.root, plan.executor, lambda other: (
        local_executor(plan.sweep, other, resume=True, timeout=plan.how.timeout, hosts=plan.hosts,
                       environment=plan.environment)))
    ended = finish(statuses, plan.root, plan.how)
    ended.status = ended.status or (NOT_DECIDED if undecided else 0)
    return ended


def finish(statuses: list[RunStatus], root: Path, how: Here) -> Outcome:
    """The runs' counts, the runs recorded in the history store and the report of what completed, both from one
    reading of the root; exit status 0 when all are ok, 1 when any is not, 2 where the report could not be made."""
    counts = Counter(s.status for s in statuses)
    outcome = Outcome().say("sweep: " + ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
                            + f"; results in {root}")
    collection = collect([root]) if statuses else None
    if collection is not None:
        outcome.heard(record_and_say([root], how.store, collection=collection))
    if how.report and counts["ok"]:
        try:
            outcome.lines += report([root], collection=collection).lines
        except HvdbenchError as exc:  # the counts and the record stand; the report's problem is one line
            outcome.note(f"error: {inert(exc)}")
            outcome.status = 2
    if counts["ok"] < len(statuses):
        outcome.note(f"{len(statuses) - counts['ok']} of {len(statuses)} run(s) did not complete; finished runs are "
                     f"kept in {root}")
        outcome.status = outcome.status or 1
    return outcome
