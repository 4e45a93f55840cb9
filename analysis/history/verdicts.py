"""Verdicts kept in the history store beside the runs behind them. Each ``accept``, ``compare``, ``compare
--regressions`` and ``history check`` records, as it ends, what it judged: its kind, its outcome (the word its exit
status stands for), its table (each criterion's or configuration's finding, as its CSV holds it), the results roots
it read and the id of every run it read, by side. A verdict made again on the same runs with the same findings is
the same verdict (its id is a digest of them) and is kept once, as first made. Like the runs' recording, a store
that cannot take it costs nothing: one line says so."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from hvdbench.core.validate import inert
from .query import moment
from .recording import Said
from .rows import plain
from .store import Store, StoreError, location, open_store, redacted

KINDS = ("accept", "compare", "regressions", "check")  # check: history check's findings on the store's runs
OUTCOMES = {0: "pass", 1: "fail", 4: "not judged"}  # accept's and compare --regressions' exit statuses
REGRESSION_OUTCOMES = {0: "no regression", 1: "regression", 4: "not judged"}
LISTED: dict[str, str] = {"verdict_id": "string", "kind": "string", "made": "float64", "outcome": "string",
                          "runs": "Int64", "roots": "object", "detail": "object", "run_ids": "object"}


@dataclass(frozen=True)
class Verdict:
    """One verdict as the store keeps it."""

    kind: str
    outcome: str
    roots: tuple[str, ...]
    detail: tuple[dict[str, Any], ...]  # the verdict table's rows
    runs: tuple[tuple[str, str], ...]  # (side, run id), in order

    @property
    def verdict_id(self) -> str:
        """A digest of what was judged and found: the kind, the outcome, the table and the runs."""
        text = json.dumps([self.kind, self.outcome, list(self.detail), sorted(self.runs)], sort_keys=True,
                          default=str)
        return hashlib.sha256(text.encode()).hexdigest()


def verdict_of(kind: str, outcome: str, roots: Sequence[Path | str], table: pd.DataFrame,
               runs: Sequence[tuple[str, str]]) -> Verdict:
    """A verdict from its table (each row's cells made plain) and the runs behind it."""
    rows = tuple({str(k): plain(v) for k, v in row.items()} for row in table.to_dict("records"))
    return Verdict(kind, outcome, tuple(str(r) for r in roots), rows, tuple((str(s), str(r)) for s, r in runs))


def sides(runs: pd.DataFrame, side: str | None = None) -> list[tuple[str, str]]:
    """(side, run id) of a collection's runs: the side given, else each run's system."""
    return [(side if side is not None else str(system), str(run_id))
            for run_id, system in zip(runs["run_id"], runs["system"])]


def keep_verdict(verdict: Verdict, store: str | None = None) -> Said:
    """Keep the verdict in the store as a command ends and say so, or why not; never an exception."""
    try:
        url = location(store)
        if url is None:
            return Said()
        with open_store(url) as opened:
            added = opened.record_verdict(verdict.verdict_id, verdict.kind, verdict.outcome, verdict.roots,
                                          list(verdict.detail), verdict.runs, time.time())
    except Exception as exc:  # noqa: BLE001 - the verdict stands in its files whatever happens here
        what = inert(exc) if isinstance(exc, (StoreError, OSError)) else f"internal error: {type(exc).__name__}"
        return Said(note=f"the {verdict.kind} verdict was not recorded in the history store ({what}); it stands in "
                         "its report")
    said = "recorded" if added else "already recorded"
    return Said(line=f"history: {verdict.kind} verdict {verdict.verdict_id[:12]} ({verdict.outcome}, "
                     f"{len(verdict.runs)} run(s)) {said} in {inert(redacted(url))}")


def list_verdicts(store: Store, kind: str | None = None, run_id: str | None = None,
                  since: str | None = None) -> pd.DataFrame:
    """The store's verdicts, newest first: of one kind, behind which one run stands (by its run id or the key of
    the execution it judged), made since a time."""
    parts: list[str] = []
    values: list[Any] = []
    if kind is not None:
        parts.append("v.kind = ?")
        values.append(kind)
    if since is not None:
        parts.append("v.made >= ?")
        values.append(moment(since))
    if run_id is not None:
        parts.append("v.verdict_id IN (SELECT verdict_id FROM verdict_runs WHERE run_id = ? OR run_key = ?)")
        values += [run_id, run_id]
    where = f" WHERE {' AND '.join(parts)}" if parts else ""
    found = store.query(f"SELECT v.verdict_id, v.kind, v.made, v.outcome, v.roots, v.detail FROM verdicts v{where} "
                        "ORDER BY v.made DESC, v.verdict_id", values)
    behind: dict[str, list[tuple[str, str]]] = {}
    if found:
        marks = ", ".join("?" * len(found))
        for verdict_id, side, run in store.query(f"SELECT verdict_id, side, run_id FROM verdict_runs WHERE "
                                                 f"verdict_id IN ({marks}) ORDER BY side, run_id",
                                                 [row[0] for row in found]):
            behind.setdefault(verdict_id, []).append((side, run))
    rows = [{"verdict_id": v, "kind": k, "made": float(m), "outcome": o, "roots": json.loads(r),
             "detail": json.loads(d), "runs": len(behind.get(v, [])),
             "run_ids": [f"{side}:{run}" for side, run in behind.get(v, [])]} for v, k, m, o, r, d in found]
    return pd.DataFrame(rows, columns=list(LISTED)).astype({k: t for k, t in LISTED.items() if t != "object"})


def accepted_keys(store: Store) -> set[str]:
    """The executions an accept verdict passed: a configuration's accepted baseline, which history check judges its
    latest stretch against."""
    return {str(key) for (key,) in store.query(
        "SELECT vr.run_key FROM verdict_runs vr JOIN verdicts v ON v.verdict_id = vr.verdict_id WHERE v.kind = "
        "'accept' AND v.outcome = 'pass' AND vr.run_key IS NOT NULL")}
