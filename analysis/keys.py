"""What "the same" means across the report, in one place: the columns the analysis groups and matches runs
by. They are RunSpec's fields (core/spec.py) as the run table names them, and the knobs a sweep
varies (core/axes.py); a module that needs "the same workload" or "the same configuration" takes it
from here instead of spelling the columns again."""

from __future__ import annotations

import shlex

from hvdbench.core.axes import AXES

WORKLOAD = ["system", "framework", "benchmark", "model"]  # the same work on one system, any arguments
ARGS = [*WORKLOAD, "args", "inputs"]  # ... with the same arguments and the same files they name (a model file)
LAUNCH = ["launcher", "controller", "placement", "knobs"]  # how its ranks were started and tuned
CONFIG = [*ARGS, *LAUNCH]  # one configuration: a row of the scaling table per size
SIZE = ["nodes", "np"]
KNOBS = list(AXES)  # the swept knobs (batch size, precision, layout, compiler, data, fp16 exchange, exchange, threads)
SHARED = [*KNOBS, "independent", "base_args"]  # what every run of one configuration shares besides CONFIG
BASELINE = ["system", "framework", "benchmark", "base_args", "inputs"]  # an --independent twin shares its baseline
TWIN = [*WORKLOAD, "base_args", "inputs", *LAUNCH, *SIZE]  # an exchanging row and its --independent twin
ONE_KNOB = [*WORKLOAD, *LAUNCH, *SIZE, "independent"]  # configurations that may differ in one knob only
ACROSS_SYSTEMS = [*ARGS[1:], "np"]  # the same workload and size on different systems
PLACEMENTS = [*ARGS, "np"]  # the same workload and size on differently linked GPUs
PROJECTED = [*WORKLOAD, "base_args", "launcher", "controller", "knobs", *KNOBS]  # a workload the projection fits
COLLECTIVE_RUN = ["system", "placement", "np", "nodes", "launcher", "controller"]  # what a collectives row keeps
SERIES = [*CONFIG, "layout"]  # a plotted line: one configuration in one image layout
AXIS_VIEW = [*WORKLOAD, "np", "launcher", "controller", "placement"]  # held equal in a by-batch/precision table
BATCH_LINES = [*WORKLOAD, "precision", "launcher", "controller", "placement", "np"]  # a line of the batch plot

# Flags that set how long a run measures, not what it measures: runs differing only in these are paired.
RUN_LENGTH_FLAGS = ("--steps", "--warmup-steps", "--target-ci", "--max-steps")


def measured_args(args: str) -> str:
    """A run's arguments without its run-length flags (``--steps 20 --model x`` -> ``--model x``)."""
    try:
        tokens = shlex.split(args)
    except ValueError:
        return args
    out: list[str] = []
    skip = False
    for token in tokens:
        if skip:
            skip = False
            continue
        name = token.split("=", 1)[0]
        if name in RUN_LENGTH_FLAGS:
            skip = "=" not in token
            continue
        out.append(token)
    return " ".join(out)
