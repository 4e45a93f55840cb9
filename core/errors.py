"""The one exception hierarchy of hvdbench: every expected failure is a HvdbenchError with a one-line message."""

from __future__ import annotations


class HvdbenchError(Exception):
    """Base of every error hvdbench raises on purpose; its message is one line meant for the user."""


class UsageError(HvdbenchError):
    """A wrong flag, an unknown benchmark or launcher, a value out of range."""


class SpecError(UsageError):
    """A run description (run.json or a sweep entry) that does not fit the RunSpec schema."""


class LaunchError(HvdbenchError):
    """A launcher or executor that could not start, or lost, a run."""


class WriteError(HvdbenchError):
    """A result that could not be written (a full disk, a read-only folder); nothing half-written is left."""


class ReportError(HvdbenchError):
    """Nothing to report on: an empty, unreadable or incomplete results directory."""
