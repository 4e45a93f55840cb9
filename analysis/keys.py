"""What "the same" means across the report, in one place: the columns the analysis groups and matches runs
by. They are RunSpec's fields (core/spec.py) as the run table names them, and the knobs a sweep
varies (core/axes.py); a module that needs "the same workload" or "the same configuration" takes it
from here instead of spelling the columns again."""

from __future__ import annotations

import shlex

from hvdbench.core.axes import AXES
from hvdbench.core.run_flags import RUN_LENGTH, without
from hvdbench.core.run_table import RUNS_SCHEMA

PLOT_LAYOUT = "layout"  # the column plots.py adds: the image layout a plotted line was measured in


def columns(*names: str) -> list[str]:
    """Run table columns (core/run_table.py RUN_COLUMNS), each checked: a name the run table does not have stops the
    import (KeyError) instead of grouping by a column that is not there."""
    unknown = [name for name in names if name not in RUNS_SCHEMA]
    if unknown:
        raise KeyError(f"not columns of the run table: {', '.join(unknown)}")
    return list(names)


WORKLOAD = columns("system", "framework", "benchmark", "model")  # the same work on one system, any arguments
ARGS = [*WORKLOAD, *columns("args", "inputs")]  # ... with the same arguments and files they name (a model file)
LAUNCH = columns("launcher", "controller", "placement", "knobs")  # how its ranks were started and tuned
CONFIG = [*ARGS, *LAUNCH]  # one configuration: a row of the scaling table per size
SIZE = columns("nodes", "np")
KNOBS = columns(*AXES)  # the swept knobs (batch size, precision, layout, compiler, data, fp16 exchange, exchange, ...)
INDEPENDENT, BASE_ARGS = columns("independent", "base_args")
SHARED = [*KNOBS, INDEPENDENT, BASE_ARGS]  # what every run of one configuration shares besides CONFIG
BASELINE = [*columns("system", "framework", "benchmark"), BASE_ARGS, *columns("inputs")]  # an --independent twin's
TWIN = [*WORKLOAD, BASE_ARGS, *columns("inputs"), *LAUNCH, *SIZE]  # an exchanging row and its --independent twin
ONE_KNOB = [*WORKLOAD, *LAUNCH, *SIZE, INDEPENDENT]  # configurations that may differ in one knob only
ACROSS_SYSTEMS = [*ARGS[1:], *columns("np")]  # the same workload and size on different systems
PLACEMENTS = [*ARGS, *columns("np")]  # the same workload and size on differently linked GPUs
PROJECTED = [*WORKLOAD, BASE_ARGS, *columns("launcher", "controller", "knobs"), *KNOBS]  # what the projection fits
COLLECTIVE_RUN = columns("system", "placement", "np", "nodes", "launcher", "controller")  # a collectives row keeps
SERIES = [*CONFIG, PLOT_LAYOUT]  # a plotted line: one configuration in one image layout
AXIS_VIEW = [*WORKLOAD, *columns("np", "launcher", "controller", "placement")]  # equal in a by-batch/precision table
BATCH_LINES = [*WORKLOAD, *columns("precision", "launcher", "controller", "placement", "np")]  # a batch plot's line

# Flags that set how long a run measures, not what it measures: runs differing only in these are paired.
RUN_LENGTH_FLAGS = tuple(RUN_LENGTH)


def identity(names: list[str], measured_only: bool = False) -> list[str]:
    """The columns a grouping keys on for the columns it shows: the arguments by their configuration key (its typed
    values in one order; ``measured_only``: without the run-length flags), every other column as itself."""
    key = "work_key" if measured_only else "args_key"
    return [key if name == "args" else name for name in names]


def measured_args(args: str) -> str:
    """A run's arguments without its run-length flags (``--steps 20 --model x`` -> ``--model x``; core/run_flags.py's
    one tokenizer of arguments no parser reads)."""
    try:
        return " ".join(without(shlex.split(args), RUN_LENGTH))
    except ValueError:
        return args
