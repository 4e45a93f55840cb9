"""Flags several commands share (their parsers in their own modules and in cli/parser.py): a label, rank counts,
the history store, run tags."""

from __future__ import annotations

from typing import Any

from hvdbench.core.flags import int_list
from hvdbench.core.options import flag_type
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
