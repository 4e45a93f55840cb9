"""Flags several commands share (their parsers in their own modules and in cli/parser.py): a label, rank counts,
the history store, run tags."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from hvdbench.core.containers import container_flags as generated_container_flags
from hvdbench.core.flags import int_list, positive_float, positive_int
from hvdbench.core.metrics import MIN_RUNS
from hvdbench.core.options import add_flags, flag_type
from hvdbench.launchers.schedulers import default_scheduler
from hvdbench.launchers.sweep import LABEL

label = flag_type(LABEL)  # argparse type: a label (a system) without control characters, not empty


def rank_counts(text: str) -> list[int]:
    """``1,2,4`` as a sorted list of distinct positive integers."""
    return sorted(set(int_list("rank counts")(text)))


def store_flag(parser: Any, what: str = "the runs are") -> None:
    """Where a command records its runs (run, sweep, screen, import; status once every job has ended) or its
    verdict with the runs behind it (accept, compare)."""
    parser.add_argument("--store", default=None, metavar="URL",
                        help=f"the history store {what} recorded in: a file path, "
                             "sqlite:///path or postgresql://user@host/db (default: HVDBENCH_STORE, else "
                             "~/.local/share/hvdbench/history.sqlite); off records nothing")


def tag_flag(parser: Any) -> None:
    """Tags on the runs a command plans (run, sweep, screen, submit)."""
    parser.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE",
                        help="a tag on every run (repeatable): kept in the results root's tags.json and the history "
                             "store, selected by hvdbench history --tag")


FIT_PREFIX = "fit_"  # where --fit's own flags land (args.fit_grow, ...): nothing without --fit
JOB_FLAGS = ("partition", "account", "qos", "time_min")
device_ids = int_list("GPU ids", minimum=0)


def estimate_flags(parser: Any) -> None:
    """What a dry run's node-hours estimate is made from (run, screen, sweep and submit)."""
    hours = parser.add_argument_group("the dry run's node-hours estimate")
    hours.add_argument("--estimate-from", action="append", type=Path, default=[], metavar="DIR",
                       help="results of earlier runs whose step and start-up times time the plan's runs of the same "
                            "work (repeatable; the results root itself is always read)")
    hours.add_argument("--step-time", type=step_seconds, default=None, metavar="SECONDS",
                       help="seconds per step for runs no earlier run times (at most a day)")


def container_flags(parser: Any) -> None:
    """The ``--container-*`` flags of run, screen, sweep and submit (a sweep file's container: block, replaced)."""
    generated_container_flags(parser.add_argument_group("ranks in a container image"))


def step_seconds(text: str) -> float:
    """Seconds a training step takes: positive and at most a day (1e300 is a typo, and 300-digit node-hours)."""
    value = positive_float(text)
    if value > 86400:
        raise argparse.ArgumentTypeError(f"{text}: more than a day (86400 s) a step")
    return value


def judging_flags(parser: Any) -> None:
    """The options every verdict between runs takes: the runs a side needs, and borrowing the spread between runs."""
    parser.add_argument("--min-runs", type=positive_int, default=MIN_RUNS, metavar="N",
                        help=f"complete runs of a configuration a verdict needs on each side (default {MIN_RUNS}): "
                             "with fewer, "
                             "the spread between runs is unknown and the verdict is 'not judged' (exit status 4 for "
                             "accept and compare --regressions); 1 judges on within-run intervals alone")
    parser.add_argument("--borrow-spread", action="store_true",
                        help="judge a configuration of fewer than --min-runs runs with the spread between runs pooled "
                             "from the same system's configurations that have that many; every line that used it "
                             "says so")
    for side, words in (("since", "before"), ("until", "at or after")):
        parser.add_argument(f"--runs-{side}", default=None, metavar="WHEN",
                            help=f"leave out the runs that started {words} WHEN (an age: 12h, 2d; or a date: "
                                 "2026-11-01T08:00, UTC unless it says): a noisy hour left out without deleting a "
                                 "folder, each run listed under Runs left out with when it started")


def job_flags(parser: Any) -> None:
    """A job's place and time, as submit and screen --submit take them (the sweep file's scheduler block's keys,
    replaced), declared by the default scheduler's options (launchers/schedulers.py)."""
    default = default_scheduler()
    jobs = parser.add_argument_group(f"jobs (replace the keys of the sweep file's scheduler block; {default.name}'s "
                                     "flags, those another scheduler's block has keys for taken there)")
    add_flags(jobs, default.options_class, JOB_FLAGS, defaults={name: None for name in JOB_FLAGS},
              note="default: the sweep file's")
