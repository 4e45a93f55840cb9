"""The largest model that trains, searched here (``hvdbench run --fit``, a sweep file's ``fit:``): each planned
configuration's trials one after another (launchers/fit.py: the search and its judgement), then every search side by
side."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from hvdbench.launchers import fit
from hvdbench.launchers.plan import Plan
from hvdbench.launchers.runs import here_gpus, local_executor
from hvdbench.launchers.sweep import Sweep

from .here import checked
from .outcome import Outcome


def first_trials(sweep: Sweep, planned: Plan, root: Path, options: Any) -> Outcome:
    """The dry run: each search's first trial and how it goes on."""
    outcome = Outcome()
    for seed in fit.seeds(planned.specs, planned.baselines, root, options, here_gpus(), need_cap=False):
        first = replace(seed.spec, args=fit.trial_args(seed.spec.args, seed.flag, seed.start))
        outcome.say(f"fit: {first.id}: trials from {seed.flag} {seed.start}, doubling while a trial fits (up to "
                    f"{options.limit}), then halving the gap to the smallest that did not; the first trial: "
                    + local_executor(sweep, root, resume=True).describe(first))
    return outcome


def search(sweep: Sweep, planned: Plan, root: Path, options: Any, *, resume: bool,
           timeout: float | None) -> Outcome:
    """Every search run to its end, here; its summary lines."""
    searches = fit.seeds(planned.specs, planned.baselines, root, options, here_gpus(), need_cap=True)
    warned = Outcome()
    prepared = checked(sweep, planned.specs, root, warned)
    warned.show()  # before the trials start
    # on CPUs, peak resident sets count live tensors, not what glibc kept
    allocator = fit.CPU_ALLOCATOR if any(seed.on_cpu for seed in searches) else {}
    executor = local_executor(sweep, root, resume=resume, timeout=timeout,
                              environment={**prepared.environment, **allocator})
    for seed in searches:
        fit.run_seed(seed, options, lambda spec: executor.execute([spec])[0], root)
    outcome = Outcome()
    for line in fit.summary_lines(root):
        outcome.say(f"fit: {line}")
    return outcome
