"""The history store: every execution of a run in one database that outlives results roots, in the backend its
location names (analysis/history/backends.py: SQLite by default, a team's PostgreSQL by URL), at
``default_location()`` or where ``--store`` or ``HVDBENCH_STORE`` says (``off`` records nothing).

An execution is a run: each one that finishes is a row of its own (``run_key``), kept unless deleted on purpose; its
configuration (``config``, the key compare pairs runs by) and its run id (configuration and repeat) are columns, not
its identity. The same configuration run again (into a new root, into the same root after its folder was cleared,
another night) adds a row; only a retried attempt of the same execution (its folder again, with more attempts: what
SLURM requeued, or an execution recorded while under way) replaces what was kept. An execution is known by what it
measured: the same measurements again (the root moved, imported twice) add nothing, and a copy of another's (the
same measurements within 1 part in a million, analysis/copies.py's one rule, under another label) is not added.

A write waits its turn, bounded (the backend's); the run folders stay the source of truth: ``history import`` rebuilds
the store from them. The schema carries its version; each newer version is a migration from the one before, so a
store made by any earlier version opens with every row, and one made by a later version is refused untouched."""

from __future__ import annotations

import json
import math
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from hvdbench.core.spec import UNDER_WAY

from ..copies import Fingerprint, same_measurement
from .backends import Backend, backend_of, wait_s
from .locations import Location, StoreError, default_location, location, parse_location, redacted, said

__all__ = ["Recorded", "SCHEMA_VERSION", "Store", "StoreError", "default_location", "location", "open_store",
           "redacted"]

_RUNS4 = ("run_key TEXT PRIMARY KEY, run_id TEXT NOT NULL, digest TEXT NOT NULL UNIQUE, system TEXT, host TEXT, "
          "framework TEXT, benchmark TEXT, model TEXT, config TEXT NOT NULL, np INTEGER, nodes INTEGER, "
          "status TEXT NOT NULL, started DOUBLE PRECISION, ended DOUBLE PRECISION, root TEXT, unit TEXT, "
          "throughput DOUBLE PRECISION, ci_low DOUBLE PRECISION, ci_high DOUBLE PRECISION, steps INTEGER, "
          "time_to_target_s DOUBLE PRECISION, converged INTEGER, environment TEXT NOT NULL, row_json TEXT NOT NULL, "
          "recorded DOUBLE PRECISION NOT NULL, folder TEXT, attempts INTEGER, n_values INTEGER, fingerprint TEXT")
_V3_FIELDS = ("run_id, digest, system, host, framework, benchmark, model, config, np, nodes, status, started, ended, "
              "root, unit, throughput, ci_low, ci_high, steps, time_to_target_s, converged, environment, row_json, "
              "recorded")
# Stable views for a dashboard (Grafana, Metabase, Superset) on the team's store: their names and columns are kept
# across versions (docs/procurement.md, "The store for a dashboard"); the tables beneath may change.
VIEWS = (
    "CREATE VIEW v_runs AS SELECT run_key, run_id, system, host, framework, benchmark, model, config, np, nodes, "
    "status, started, ended, root, folder, attempts, unit, throughput, ci_low, ci_high, time_to_target_s, converged "
    "FROM runs",
    "CREATE VIEW v_configurations AS SELECT config, system, framework, benchmark, model, np, nodes, COUNT(*) AS runs, "
    "SUM(CASE WHEN status = 'ok' THEN 1 ELSE 0 END) AS ok_runs, MIN(started) AS first_started, MAX(started) AS "
    "last_started, AVG(throughput) AS mean_throughput FROM runs GROUP BY config, system, framework, benchmark, model, "
    "np, nodes",
    "CREATE VIEW v_trend AS SELECT config, system, benchmark, model, np, nodes, started, run_key, unit, throughput, "
    "ci_low, ci_high, time_to_target_s FROM runs WHERE status = 'ok'",
    "CREATE VIEW v_changes AS SELECT verdict_id, made, outcome, roots, detail FROM verdicts WHERE kind = 'check'")
# Each version's statements, applied in order from the store's version to SCHEMA_VERSION (never edited once
# released: a change is a new version). 1: runs; 2: tags; 3: verdicts and the runs behind each; 4: executions as
# runs (run_key the identity, run_id a column), their folder, attempts and fingerprint; tags and verdicts by run_key;
# 5: the dashboard's views.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: ("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE runs (run_id TEXT PRIMARY KEY, digest TEXT NOT NULL UNIQUE, system TEXT, host TEXT, "
        "framework TEXT, benchmark TEXT, model TEXT, config TEXT NOT NULL, np INTEGER, nodes INTEGER, "
        "status TEXT NOT NULL, started DOUBLE PRECISION, ended DOUBLE PRECISION, root TEXT, unit TEXT, "
        "throughput DOUBLE PRECISION, ci_low DOUBLE PRECISION, ci_high DOUBLE PRECISION, steps INTEGER, "
        "time_to_target_s DOUBLE PRECISION, converged INTEGER, environment TEXT NOT NULL, row_json TEXT NOT NULL, "
        "recorded DOUBLE PRECISION NOT NULL)",
        "CREATE INDEX runs_by_workload ON runs (benchmark, system, started)",
        "CREATE INDEX runs_by_config ON runs (config, started)"),
    2: ("CREATE TABLE tags (run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE, key TEXT NOT NULL, "
        "value TEXT NOT NULL, PRIMARY KEY (run_id, key))",),
    3: ("CREATE TABLE verdicts (verdict_id TEXT PRIMARY KEY, kind TEXT NOT NULL, made DOUBLE PRECISION NOT NULL, "
        "outcome TEXT NOT NULL, roots TEXT NOT NULL, detail TEXT NOT NULL)",
        "CREATE TABLE verdict_runs (verdict_id TEXT NOT NULL REFERENCES verdicts (verdict_id) ON DELETE CASCADE, "
        "side TEXT NOT NULL, run_id TEXT NOT NULL, PRIMARY KEY (verdict_id, side, run_id))",
        "CREATE INDEX verdict_runs_by_run ON verdict_runs (run_id)",
        "CREATE INDEX verdicts_by_time ON verdicts (kind, made)"),
    4: (f"CREATE TABLE runs4 ({_RUNS4})",
        f"INSERT INTO runs4 (run_key, {_V3_FIELDS}) SELECT run_id || '~' || substr(digest, 3, 12), {_V3_FIELDS} "
        "FROM runs",
        "CREATE TABLE tags4 (run_key TEXT NOT NULL REFERENCES runs4 (run_key) ON DELETE CASCADE, key TEXT NOT NULL, "
        "value TEXT NOT NULL, PRIMARY KEY (run_key, key))",
        "INSERT INTO tags4 (run_key, key, value) SELECT r.run_key, t.key, t.value FROM tags t JOIN runs4 r ON "
        "r.run_id = t.run_id",
        "DROP TABLE tags", "DROP TABLE runs", "ALTER TABLE runs4 RENAME TO runs", "ALTER TABLE tags4 RENAME TO tags",
        "CREATE INDEX runs_by_workload ON runs (benchmark, system, started)",
        "CREATE INDEX runs_by_config ON runs (config, started)", "CREATE INDEX runs_by_id ON runs (run_id)",
        "CREATE INDEX runs_by_folder ON runs (folder)", "CREATE INDEX runs_by_values ON runs (n_values)",
        "ALTER TABLE verdict_runs ADD COLUMN run_key TEXT",
        "UPDATE verdict_runs SET run_key = (SELECT r.run_key FROM runs r WHERE r.run_id = verdict_runs.run_id)"),
    5: VIEWS,
}
SCHEMA_VERSION = max(MIGRATIONS)
RUN_FIELDS = ("run_key", "run_id", "digest", "system", "host", "framework", "benchmark", "model", "config", "np",
              "nodes", "status", "started", "ended", "root", "unit", "throughput", "ci_low", "ci_high", "steps",
              "time_to_target_s", "converged", "environment", "row_json", "folder", "attempts", "n_values",
              "fingerprint", "recorded")
INSERT_RUN = f"INSERT INTO runs ({', '.join(RUN_FIELDS)}) VALUES ({', '.join('?' * len(RUN_FIELDS))})"
REPLACE_RUN = f"UPDATE runs SET {', '.join(f'{n} = ?' for n in RUN_FIELDS[1:])} WHERE run_key = ?"
UPSERT_TAG = ("INSERT INTO tags (run_key, key, value) VALUES (?, ?, ?) ON CONFLICT (run_key, key) DO UPDATE SET "
              "value = excluded.value")
UPSERT_VERSION = ("INSERT INTO meta (key, value) VALUES ('schema_version', ?) ON CONFLICT (key) DO UPDATE SET "
                  "value = excluded.value")


@dataclass
class Store:
    """An open store at the current schema version."""

    where: Location
    connection: Any  # the backend's connection, in autocommit: transactions are explicit
    backend: Backend

    @property
    def url(self) -> str:
        return self.where.target

    @property
    def shown(self) -> str:
        return self.where.shown

    def close(self) -> None:
        """Release the store."""
        self.connection.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        """One statement written with ``?`` marks; its cursor."""
        return self.connection.execute(self.backend.sql(sql), tuple(parameters))

    def query(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of one read, a database's failure as StoreError."""
        try:
            return list(self.execute(sql, parameters).fetchall())
        except self.backend.errors as exc:
            raise StoreError(f"store {self.shown}: {self.failure(exc)}") from None

    def failure(self, exc: BaseException) -> str:
        """A driver's error in one line: busy (another writer held the store past the wait), or what it said."""
        if self.backend.busy(exc):
            holder = self.backend.holder(self.connection)
            return (f"busy: another process kept writing to it for {wait_s():g} s (HVDBENCH_STORE_WAIT_S)"
                    + (f"; {holder}" if holder else "") + "; nothing of this write was kept, try again")
        return said(exc, self.where)

    @contextmanager
    def transaction(self) -> Iterator["Store"]:
        """One write transaction, this writer's turn taken at its start (another waits for it, bounded), committed
        whole or rolled back."""
        try:
            for statement in self.backend.begin():
                self.execute(statement)
        except self.backend.errors as exc:
            self._rollback()
            raise StoreError(f"store {self.shown}: not written ({self.failure(exc)})") from None
        try:
            yield self
        except BaseException:
            self._rollback()
            raise
        self.execute("COMMIT")

    def _rollback(self) -> None:
        try:
            self.execute("ROLLBACK")
        except self.backend.errors:
            pass

    def has_table(self, name: str) -> bool:
        query = self.backend.has_table
        return self.execute(query, (name,) * query.count("?")).fetchone() is not None

    def version(self) -> int:
        """The schema version the store holds (0: empty; -1: a meta table without one)."""
        if not self.has_table("meta"):
            return 0
        row = self.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row is not None and str(row[0]).isdigit() else -1

    def migrate(self, to: int = SCHEMA_VERSION) -> int:
        """Bring the store to version ``to``, in one transaction; the version it started at."""
        with self.transaction():
            start = self.version()
            if start < 0:
                raise StoreError(f"store {self.shown}: a meta table without a schema version: not an hvdbench "
                                 "store; left untouched")
            for version in range(start + 1, to + 1):
                for statement in MIGRATIONS[version]:
                    self.execute(statement)
                self.execute(UPSERT_VERSION, (str(version),))
        return start

    def record(self, runs: Sequence[Mapping[str, Any]], tags: Mapping[str, Mapping[str, str]] | None = None,
               now: float = 0.0) -> "Recorded":
        """Add each execution once, in one transaction (module docstring: what adds, replaces or is left); ``tags``
        by each row's run id."""
        done = Recorded()
        tags = tags or {}
        try:
            with self.transaction():
                for run in runs:
                    what, key = self._one(run, now)
                    done.count(what)
                    if what != "copies":
                        for name, value in tags.get(str(run["run_id"]), {}).items():
                            self.execute(UPSERT_TAG, (key, name, value))
        except self.backend.errors as exc:
            raise StoreError(f"store {self.shown}: not written ({self.failure(exc)})") from None
        return done

    def _measured_before(self, run: Mapping[str, Any]) -> tuple[str, str] | None:
        """The run kept whose measurements these are (by digest, else within the copy rule): its key and run id."""
        row = self.execute("SELECT run_key, run_id FROM runs WHERE digest = ?", (run["digest"],)).fetchone()
        if row is not None:
            return str(row[0]), str(row[1])
        mine = Fingerprint.from_text(run.get("fingerprint"))
        if mine is None:
            return None
        for key, run_id, text in self.execute("SELECT run_key, run_id, fingerprint FROM runs WHERE n_values = ?",
                                              (mine.count,)).fetchall():
            theirs = Fingerprint.from_text(text)
            if theirs is not None and same_measurement(mine, theirs):
                return str(key), str(run_id)
        return None

    def _one(self, run: Mapping[str, Any], now: float) -> tuple[str, str]:
        """Add, replace or leave one execution; what happened (a Recorded field) and the key it is kept under."""
        before = self._measured_before(run)
        if before is not None:  # the same run (its root moved, imported again), or a copy sold under another label
            return ("same" if _spec_id(before[1]) == _spec_id(str(run["run_id"])) else "copies"), before[0]
        key = str(run.get("run_key") or f"{run['run_id']}~{str(run['digest']).split(':', 1)[-1][:12]}")
        values = [key] + [_sql_value(run.get(name)) for name in RUN_FIELDS[1:-1]] + [now]
        held = self.execute("SELECT run_key, attempts, status FROM runs WHERE folder = ? ORDER BY recorded DESC",
                            (run.get("folder"),)).fetchone() if run.get("folder") else None
        if held is not None and ((run.get("attempts") or 1) > (held[1] or 1) or held[2] in UNDER_WAY):
            self.execute(REPLACE_RUN, values[1:] + [held[0]])  # a later attempt of the same execution
            return "replaced", str(held[0])
        self.execute(INSERT_RUN, values)
        return "added", key

    def record_verdict(self, verdict_id: str, kind: str, outcome: str, roots: Sequence[str], detail: Any,
                       runs: Sequence[tuple[str, str]], now: float) -> bool:
        """Add one verdict with the (side, run id) pairs behind it, once, each pointing at the execution it judged
        (the one kept under that run id from the verdict's roots, else the latest of that run id); the same verdict
        again (same id) is left as it was first made. Whether it was added."""
        try:
            with self.transaction():
                if self.execute("SELECT 1 FROM verdicts WHERE verdict_id = ?", (verdict_id,)).fetchone() is not None:
                    return False
                self.execute("INSERT INTO verdicts (verdict_id, kind, made, outcome, roots, detail) VALUES "
                             "(?, ?, ?, ?, ?, ?)", (verdict_id, kind, now, outcome, _sql_value(list(roots)),
                                                    _sql_value(detail)))
                for side, run_id in dict.fromkeys(runs):
                    self.execute("INSERT INTO verdict_runs (verdict_id, side, run_id, run_key) VALUES (?, ?, ?, ?)",
                                 (verdict_id, side, run_id, self._key_of(run_id, roots)))
        except self.backend.errors as exc:
            raise StoreError(f"store {self.shown}: not written ({self.failure(exc)})") from None
        return True

    def _key_of(self, run_id: str, roots: Sequence[str]) -> str | None:
        found = self.execute("SELECT run_key, root FROM runs WHERE run_id = ? ORDER BY recorded DESC",
                             (run_id,)).fetchall()
        resolved = {str(Path(r).resolve()) for r in roots}
        mine = [key for key, root in found if root is not None and str(Path(root).resolve()) in resolved]
        return (mine or [key for key, _ in found] or [None])[0]


@dataclass
class Recorded:
    """What one recording did: runs added, replaced (a later attempt of the same execution), already there, copies
    refused."""

    added: int = 0
    replaced: int = 0
    same: int = 0
    copies: int = 0

    def count(self, what: str) -> None:
        setattr(self, what, getattr(self, what) + 1)

    def text(self) -> str:
        parts = [f"{self.added} added"] + [f"{n} {said}" for n, said in (
            (self.replaced, "replaced (a later attempt of the same execution)"), (self.same, "already recorded"),
            (self.copies, "copies of recorded runs, left out")) if n]
        return ", ".join(parts)


def _spec_id(run_id: str) -> str:
    """A row's run id without the root a collection told it apart by (analysis/found.py): its spec's id."""
    return run_id.split("@", 1)[0]


def _sql_value(value: Any) -> Any:
    """A run field as the database keeps it: NaN and missing values as NULL, mappings as JSON, booleans as 0/1."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, allow_nan=False, default=str)
    if isinstance(value, bool):
        return int(value)
    if hasattr(value, "item"):  # numpy and pandas scalars
        return _sql_value(value.item())
    return value


def open_store(url: str, *, version: int = SCHEMA_VERSION, create: bool = True) -> Store:
    """Open (and make or migrate) the store at ``url``; ``create`` False (a read) makes none where there is none. A
    file that is not a store, a store a later hvdbench made, a folder, a server that cannot be reached, a location
    no backend knows: StoreError in one line, the store untouched."""
    where = parse_location(url)
    backend = backend_of(where)
    store = Store(where, backend.connect(where, create), backend)
    try:
        held = store.version()
        if held > version:
            raise StoreError(f"store {where.shown}: schema version {held} was written by a later hvdbench (this one "
                             f"knows up to {version}); left untouched")
        if held == 0 and not create:
            raise StoreError(f"store {where.shown}: no hvdbench store there (nothing was recorded in it yet)")
        if held < version:
            store.migrate(version)
    except backend.errors as exc:
        store.close()
        if backend.busy(exc):
            raise StoreError(f"store {where.shown}: {store.failure(exc)}") from None
        raise StoreError(f"store {where.shown}: not a readable hvdbench store ({said(exc, where)}); left "
                         "untouched") from None
    except StoreError:
        store.close()
        raise
    return store
