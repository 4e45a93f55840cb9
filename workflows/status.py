"""Each run's state in a results root, the runs under way asked of their scheduler, and, once every job has ended,
the runs recorded in the history store (submitted runs are recorded here: nothing else sees them end)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hvdbench.analysis.history.recording import Said, record_and_say
from hvdbench.core.errors import UsageError
from hvdbench.core.spec import RunStatus

UNDER_WAY_EXIT = 5  # exit status while runs are under way and none has ended badly


def natural(name: str) -> list[Any]:
    """A run's name in natural order: np8 before np16."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


@dataclass(frozen=True)
class States:
    """Every run's folder and state, in natural order; what the history store said; the exit status (0 every run
    ok, 1 any ended otherwise, UNDER_WAY_EXIT while runs are under way and none ended badly)."""

    runs: tuple[tuple[Path, RunStatus], ...]
    said: Said
    status: int


def states(root: Path, store: str | None = None) -> States:
    """Each run's state under the root (launchers/queues.py refresh); its runs recorded once every job has ended
    (a poll that finds nothing new says nothing)."""
    from hvdbench.launchers.queues import refresh
    from hvdbench.launchers.schedulers import ACTIVE

    if not root.exists():
        raise UsageError(f"{root}: no such results directory")
    found = refresh(root)
    if not found:
        raise UsageError(f"{root}: no run directories (run.json) here")
    ordered = tuple(sorted(found.items(), key=lambda item: natural(item[0].name)))
    ok = sum(status.status == "ok" for _, status in ordered)
    under_way = sum(status.status in ACTIVE for _, status in ordered)
    said = Said() if under_way else record_and_say([root], store, quiet=True)
    status = 0 if ok == len(ordered) else UNDER_WAY_EXIT if ok + under_way == len(ordered) else 1
    return States(ordered, said, status)
