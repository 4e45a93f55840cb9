"""The history workflows that write: results roots recorded into the store, and each configuration checked for
change against its own history with the findings kept as a verdict beside accept's and compare's."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from hvdbench.analysis.history.check import check_table, exit_status
from hvdbench.analysis.history.query import Selection, select
from hvdbench.analysis.history.recording import Said, record_roots
from hvdbench.analysis.history.store import open_store, redacted
from hvdbench.analysis.history.verdicts import accepted_keys, keep_verdict, verdict_of
from hvdbench.core.errors import UsageError
from hvdbench.core.validate import inert

from .outcome import Outcome

CHECK_OUTCOMES = {0: "no regression", 1: "regression", 4: "not judged"}


def import_roots(roots: Sequence[Path], url: str, tags: Mapping[str, str]) -> Outcome:
    """Every run under the results roots into the store (each once), each tagged with ``tags``."""
    missing = [str(root) for root in roots if not root.is_dir()]
    if missing:
        raise UsageError(f"history import: {inert(missing[0])}: no such results root")
    done = record_roots(roots, url, tags)
    return Outcome().say(f"history: {done.text()} in {inert(redacted(url))}")


@dataclass(frozen=True)
class Checked:
    """history check's findings: one row a configuration (empty where no run matched), the runs judged, the exit
    status (0 no regression, 1 a regression, 4 not judged) and what keeping the verdict said."""

    table: Any
    runs: Any
    status: int
    said: Said


def check(url: str, selection: Selection, margin: float) -> Checked:
    """Each selected configuration's change points and its latest change judged; the findings kept as a verdict
    with the runs behind them."""
    with open_store(url, create=False) as store:
        runs = select(store, selection)
        accepted = accepted_keys(store)
    table = check_table(runs, margin, accepted)
    if not len(table):
        return Checked(table, runs, 4, Said())
    status = exit_status(table)
    kept = table.drop(columns=[c for c in ("change_started",) if c in table], errors="ignore")
    behind = [("history", str(k)) for k in runs["run_key"]] if "run_key" in runs else []
    verdict = verdict_of("check", CHECK_OUTCOMES.get(status, str(status)), [redacted(url)], kept, behind)
    return Checked(table, runs, status, keep_verdict(verdict, url))
