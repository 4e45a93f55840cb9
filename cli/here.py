"""The shared recipe of the commands that run or submit a plan (run, screen, sweep, submit): the dry run's
printer, the container flags, the tags, running a plan here and what follows it (the history store, the report)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from hvdbench.analysis.history.recording import record_after
from hvdbench.core.containers import RUNTIMES, from_flags
from hvdbench.core.errors import ReportError, UsageError
from hvdbench.core.spec import RunSpec, RunStatus
from hvdbench.core.tags import tags_of, write_tags
from hvdbench.core.validate import inert
from hvdbench.launchers.executor import Executor as BaseExecutor
from hvdbench.launchers.plan import Plan
from hvdbench.launchers.runs import Executor, Prepared, describe_plan, fits_allocation, local_executor, prepare_here
from hvdbench.launchers.sweep import NOT_DECIDED, Sweep
from .judging import report


def print_plan(planned: Plan, executor: Executor, root: Path, args: argparse.Namespace) -> int:
    """The one dry-run printer of run, screen, sweep and submit: every run, then the node-hours the plan
    holds at most and the estimate from step times (``--estimate-from``, the root's own runs, ``--step-time``)."""
    from hvdbench.analysis.projection.hours import plan_hours

    for line in describe_plan(planned, executor, root):
        print(line)
    check = getattr(executor, "preflight", None)  # a scheduler's own refusals, run as the submit runs them
    problem = check(planned.specs) if check is not None else None
    if problem:
        raise UsageError(f"the submit would refuse this plan: {problem}")
    roots = [*args.estimate_from, *([root] if root.is_dir() else [])]
    try:
        estimate = plan_hours(planned.specs, roots, args.step_time)
    except ReportError as exc:
        raise UsageError(f"--estimate-from: {exc}") from None
    print(estimate.text(args.step_time))
    return 0

def finish(statuses: list[RunStatus], root: Path, with_report: bool, store: str | None = None) -> int:
    """The sweep's counts, its runs recorded in the history store, the report of what completed, and the exit
    status (0 when all are ok)."""
    counts = Counter(s.status for s in statuses)
    print("sweep: " + ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) + f"; results in {root}")
    if statuses:
        record_after([root], store)
    if with_report and counts["ok"]:
        report([root])
    if counts["ok"] < len(statuses):
        print(f"hvdbench: {len(statuses) - counts['ok']} of {len(statuses)} run(s) did not complete; "
              f"finished runs are kept in {root}", file=sys.stderr)
        return 1
    return 0

def with_container(sweep: Sweep, args: argparse.Namespace) -> Sweep:
    """The sweep with the command line's ``--container-*`` flags in place of its container: block."""
    container = from_flags(args)
    if container is None:
        return sweep
    problem = RUNTIMES[container.runtime].launcher_problem([name for name, _ in sweep.launchers])
    if problem:
        raise UsageError(f"--container-runtime {container.runtime}: {problem}")
    return replace(sweep, container=container)

def tag(executor: BaseExecutor, root: Path, specs: Sequence[RunSpec], args: argparse.Namespace) -> None:
    """The command's ``--tag``s on the runs it will make (not those resume leaves as they are), in the root."""
    tags = tags_of(getattr(args, "tag", []))
    if tags:
        write_tags(root, [spec.id for spec in executor.todo(specs)], tags)

def run_here(sweep: Sweep, planned: Plan, root: Path, args: argparse.Namespace, in_allocation: bool = False) -> int:
    specs, hosts = list(planned.specs), sweep.hosts
    if args.dry_run:
        print_plan(planned, local_executor(sweep, root, resume=args.resume, timeout=args.timeout), root, args)
        if sweep.until_decided:
            print(f"until decided: the runs above are the first look's; then a round at a time, each configuration "
                  f"until decided or {sweep.budget} runs")
        return 0
    for note in planned.skipped:
        print(f"hvdbench: left out: {note}", file=sys.stderr)
    if in_allocation:
        from hvdbench.launchers.schedulers import allocation_hosts

        hosts = allocation_hosts()
        fit = [s for s in specs if fits_allocation(s)]
        if len(fit) < len(specs):
            print(f"hvdbench: {len(specs) - len(fit)} run(s) need a larger allocation and are left for one",
                  file=sys.stderr)
        specs = fit
    prepared = checked_here(sweep, specs, root)
    executor = local_executor(sweep, root, resume=args.resume, timeout=args.timeout, hosts=hosts,
                              retries=getattr(args, "retries", None), environment=prepared.environment)
    tag(executor, root, specs, args)
    if sweep.until_decided:  # rounds of repeats until each configuration is decided (cli/until_decided.py)
        from hvdbench.cli.until_decided import run_until_decided

        statuses, undecided = run_until_decided(sweep, specs, root, executor, lambda other: local_executor(
            sweep, other, resume=True, timeout=args.timeout, hosts=hosts, environment=prepared.environment))
        return finish(statuses, root, args.report, getattr(args, "store", None)) or (NOT_DECIDED if undecided else 0)
    return finish(executor.execute(specs), root, args.report, getattr(args, "store", None))

def checked_here(sweep: Sweep, specs: Sequence[RunSpec], root: Path) -> Prepared:
    """The checks before running here (launchers/runs.py prepare_here), their warnings said."""
    prepared = prepare_here(sweep, specs, root)
    for line in prepared.warnings:
        print(f"hvdbench: warning: {inert(line)}", file=sys.stderr)
    return prepared

def given(args: argparse.Namespace, names: Sequence[str]) -> dict[str, Any]:
    """The options among ``names`` the command line gave (a flag left out is None: the file's stands)."""
    return {name: value for name in names if (value := getattr(args, name)) is not None}
