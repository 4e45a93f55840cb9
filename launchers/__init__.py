"""Sweeps into runs, runs into launcher commands, commands run here or as SLURM jobs."""

from . import builtin  # noqa: F401 - registers the launchers that ship with hvdbench
