"""Runs recorded into the history store: ``history import`` from results roots, and every run, sweep, submitted
job's sweep and import as it ends. A store that cannot take them (down, full, read-only, a later schema) never
costs a run: the runs stay in their folders, one line says they were not recorded and how to catch up."""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path
from dataclasses import dataclass
from typing import Mapping, Sequence

from hvdbench.core.tags import read_tags
from hvdbench.core.validate import inert
from ..collect import Collection, collect
from .rows import store_rows
from .store import Recorded, StoreError, location, open_store, redacted


def record_roots(roots: Sequence[Path], url: str, tags: Mapping[str, str] | None = None) -> Recorded:
    """Every run under the roots into the store at ``url`` (each once; ``tags`` on each run recorded now)."""
    return record_collection(collect(roots), url, tags)


def record_collection(collection: Collection, url: str, tags: Mapping[str, str] | None = None) -> Recorded:
    """Every run of a collection already read (the report's own) into the store at ``url``, each once."""
    rows = store_rows(collection)
    held = _root_tags({str(row["root"]) for row in rows if row.get("root") is not None})
    every = {row["run_id"]: {**held.get(str(row["root"]), {}).get(row["run_id"], {}), **(tags or {})} for row in rows}
    with open_store(url) as store:
        return store.record(rows, every, now=time.time())


def _root_tags(roots: set[str]) -> dict[str, dict[str, dict[str, str]]]:
    """Each results root's tags (core/tags.py); a tags file that cannot be read is one line, its tags left out."""
    out = {}
    for root in sorted(roots):
        try:
            out[root] = read_tags(Path(root))
        except (ValueError, OSError) as exc:
            print(f"hvdbench: {inert(exc)}: the tags it holds are not recorded", file=sys.stderr)
    return out


REQUIRED = "HVDBENCH_STORE_REQUIRED"  # =1: a store that cannot take the runs fails the command (exit 2)


@dataclass(frozen=True)
class Said:
    """What recording has to say as a command ends: a line for stdout (what was recorded) or for stderr (why
    nothing was); either may be empty."""

    line: str = ""
    note: str = ""

    def show(self, line_to_stderr: bool = False) -> None:
        """Print the line (on stderr where stdout holds what a script reads: JSON, a table) and the note."""
        if self.line:
            print(self.line, file=sys.stderr if line_to_stderr else sys.stdout)
        if self.note:
            print(f"hvdbench: {self.note}", file=sys.stderr)


def record_and_say(roots: Sequence[Path], store: str | None = None, tags: Mapping[str, str] | None = None,
                   quiet: bool = False, collection: Collection | None = None) -> Said:
    """Record the runs under the roots (or of ``collection``, read already) as a command ends and say what was
    recorded (``quiet``: only when something was added or replaced, as a polled ``status`` wants) or why nothing
    was; never an exception but under HVDBENCH_STORE_REQUIRED=1 (the runs are in their folders whatever happens)."""
    try:
        url = location(store)
        if url is None:
            return Said()
        done = record_collection(collection, url, tags) if collection is not None else record_roots(roots, url, tags)
    except Exception as exc:  # noqa: BLE001 - whatever fails here, the runs are kept and the command goes on
        what = inert(exc) if isinstance(exc, (StoreError, OSError)) else f"internal error: {type(exc).__name__}: " \
            f"{inert(str(exc))[:200]}"
        where = " ".join(shlex.quote(str(r)) for r in roots)
        said = (f"runs not recorded in the history store ({what}); they are in their folders: "
                f"hvdbench history import {where} catches up")
        if os.environ.get(REQUIRED) == "1":  # a nightly job that must not lose its record silently
            raise StoreError(f"{said} ({REQUIRED}=1: the command fails)")
        return Said(note=said)
    if quiet and not (done.added or done.replaced):
        return Said()
    return Said(line=f"history: {done.text()} in {inert(redacted(url))}")
