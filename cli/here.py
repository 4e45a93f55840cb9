"""What the commands that run or submit a plan (run, screen, sweep, submit) share on the command line: the dry run's
printer, the container flags, the tags and how a plan is asked to run here (the running, recording and reporting are
workflows/here.py's)."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from hvdbench.core.containers import RUNTIMES, from_flags
from hvdbench.core.errors import ReportError, UsageError
from hvdbench.core.spec import RunSpec
from hvdbench.core.tags import tags_of
from hvdbench.launchers.executor import Executor as BaseExecutor
from hvdbench.launchers.plan import Plan
from hvdbench.launchers.runs import Executor, describe_plan, local_executor
from hvdbench.launchers.sweep import Sweep
from hvdbench.workflows import here


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
    here.tag(executor, root, specs, tags_of(getattr(args, "tag", [])))


def how_here(args: argparse.Namespace, in_allocation: bool = False) -> here.Here:
    """How the command line asks a plan to be run here."""
    return here.Here(resume=args.resume, timeout=args.timeout, retries=getattr(args, "retries", None),
                     report=args.report, store=getattr(args, "store", None),
                     tags=tags_of(getattr(args, "tag", [])), in_allocation=in_allocation)


def run_here(sweep: Sweep, planned: Plan, root: Path, args: argparse.Namespace, in_allocation: bool = False) -> int:
    """Print the plan (--dry-run), or run it here (workflows/here.py), saying what it says as it goes."""
    if args.dry_run:
        print_plan(planned, local_executor(sweep, root, resume=args.resume, timeout=args.timeout), root, args)
        if sweep.until_decided:
            print(f"until decided: the runs above are the first look's; then a round at a time, each configuration "
                  f"until decided or {sweep.budget} runs")
        return 0
    ready, said = here.ready(sweep, planned, root, how_here(args, in_allocation))
    said.show()
    return here.run_ready(ready).show()


def given(args: argparse.Namespace, names: Sequence[str]) -> dict[str, Any]:
    """The options among ``names`` the command line gave (a flag left out is None: the file's stands)."""
    return {name: value for name in names if (value := getattr(args, name)) is not None}
