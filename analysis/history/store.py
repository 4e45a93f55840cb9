"""The history store: every recorded run in one database that outlives results roots. SQLite from the standard
library by default (one file, no server; its rollback journal rather than WAL, which needs memory shared between
the processes and so fails on the network filesystems clusters share), at ``default_location()`` or where
``--store`` or ``HVDBENCH_STORE`` says (``off`` records nothing); a team's PostgreSQL by its URL
(``postgresql://user@host/db``, through psycopg), with the same schema and statements. A write waits its turn
rather than failing while another sweep records (SQLite's BEGIN IMMEDIATE, PostgreSQL's transaction-scoped advisory
lock). The run folders stay the source of truth: ``history import`` rebuilds the store from them, each run once.
The schema carries its version; each newer version is a migration from the one before, so a store made by any
earlier version opens, and one made by a later version is refused untouched."""

from __future__ import annotations

import json
import math
import os
import re
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence
from urllib.parse import urlsplit, urlunsplit

from hvdbench.core.errors import HvdbenchError
from hvdbench.core.validate import inert

STORE_VARIABLE = "HVDBENCH_STORE"
OFF = ("off", "none", "no")  # a store location that turns recording off
WAIT_S = 120.0  # how long a write waits for another process's write to the same store

# Each version's statements, applied in order from the store's version to SCHEMA_VERSION (never edited once
# released: a change is a new version). 1: runs; 2: tags; 3: verdicts and the runs behind each.
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
}
SCHEMA_VERSION = max(MIGRATIONS)
RUN_FIELDS = ("run_id", "digest", "system", "host", "framework", "benchmark", "model", "config", "np", "nodes",
              "status", "started", "ended", "root", "unit", "throughput", "ci_low", "ci_high", "steps",
              "time_to_target_s", "converged", "environment", "row_json", "recorded")


class StoreError(HvdbenchError):
    """A store that cannot be opened, read or written: one line naming it (its password never shown)."""


def default_location() -> Path:
    """Where the store lives unless told otherwise: ``$XDG_DATA_HOME/hvdbench/history.sqlite`` (the XDG default
    ``~/.local/share``)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "hvdbench" / "history.sqlite"


def redacted(url: str) -> str:
    """A store location as it may be printed: a URL's password replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<a location that is not a URL>"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{netloc}"))


def location(given: str | None) -> str | None:
    """The store to use: ``given`` (``--store``), else ``HVDBENCH_STORE``, else the default file; None where
    recording is off."""
    chosen = given if given is not None else os.environ.get(STORE_VARIABLE) or str(default_location())
    return None if chosen.strip().lower() in OFF else chosen


def _sqlite_path(url: str) -> Path:
    """The file of ``sqlite:///abs``, ``sqlite:rel`` or a plain path; another scheme is refused."""
    if re.match(r"^[a-z][a-z0-9+.-]*://", url, re.I) and not url.lower().startswith("sqlite:"):
        scheme = url.split(":", 1)[0]
        raise StoreError(f"store {redacted(url)}: {inert(scheme)} stores are not supported: give a file path, "
                         "sqlite:///path or postgresql://user@host/database")
    if url.lower().startswith("sqlite:"):
        url = re.sub(r"^sqlite:(//)?", "", url, flags=re.I)
    if not url:
        raise StoreError("store: an empty location")
    return Path(url).expanduser()


PG_LOCK = 0x68766462  # the advisory lock every PostgreSQL writer of a store takes first ("hvdb")
UPSERT_RUN = (f"INSERT INTO runs ({', '.join(RUN_FIELDS)}) VALUES ({', '.join('?' * len(RUN_FIELDS))}) "
              f"ON CONFLICT (run_id) DO UPDATE SET {', '.join(f'{n} = excluded.{n}' for n in RUN_FIELDS[1:])}")
UPSERT_TAG = ("INSERT INTO tags (run_id, key, value) VALUES (?, ?, ?) ON CONFLICT (run_id, key) DO UPDATE SET "
              "value = excluded.value")
UPSERT_VERSION = ("INSERT INTO meta (key, value) VALUES ('schema_version', ?) ON CONFLICT (key) DO UPDATE SET "
                  "value = excluded.value")


@dataclass(frozen=True)
class Dialect:
    """What differs between the two databases: parameters' mark, how a writer takes its turn, how a table is
    found, and the driver's errors."""

    name: str
    begin: tuple[str, ...]
    has_table: str  # a query of one parameter, the table's name, returning a row where it exists
    errors: tuple[type[BaseException], ...]
    mark: str = "?"

    def sql(self, text: str) -> str:
        """A statement written with ``?`` marks in this database's own."""
        return text if self.mark == "?" else text.replace("?", self.mark)


SQLITE = Dialect("sqlite", ("BEGIN IMMEDIATE",), "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?",
                 (sqlite3.Error,))


def _postgres() -> Dialect:
    import psycopg

    # pg_tables read with the statement's own snapshot: to_regclass looks the name up in the catalog caches, which a
    # writer that waited on the advisory lock (no relation lock) has not refreshed, and would miss tables the writer
    # before it made (it then migrated again: "relation meta already exists")
    return Dialect("postgresql", ("BEGIN", f"SELECT pg_advisory_xact_lock({PG_LOCK})"),
                   "SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = ?",
                   (psycopg.Error,), "%s")


@dataclass
class Store:
    """An open store at the current schema version."""

    url: str
    connection: Any  # sqlite3.Connection or psycopg.Connection, in autocommit: transactions are explicit
    dialect: Dialect = SQLITE

    def close(self) -> None:
        """Release the store."""
        self.connection.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        """One statement written with ``?`` marks; its cursor."""
        return self.connection.execute(self.dialect.sql(sql), tuple(parameters))

    def query(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of one read, a database's failure as StoreError."""
        try:
            return list(self.execute(sql, parameters).fetchall())
        except self.dialect.errors as exc:
            raise StoreError(f"store {redacted(self.url)}: {_said(exc, self.url)}") from None

    @contextmanager
    def transaction(self) -> Iterator["Store"]:
        """One write transaction, this writer's turn taken at its start (another waits for it), committed whole
        or rolled back."""
        for statement in self.dialect.begin:
            self.execute(statement)
        try:
            yield self
        except BaseException:
            self.execute("ROLLBACK")
            raise
        self.execute("COMMIT")

    def has_table(self, name: str) -> bool:
        query = self.dialect.has_table
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
                raise StoreError(f"store {redacted(self.url)}: a meta table without a schema version: not an "
                                 "hvdbench store; left untouched")
            for version in range(start + 1, to + 1):
                for statement in MIGRATIONS[version]:
                    self.execute(statement)
                self.execute(UPSERT_VERSION, (str(version),))
        return start

    def record(self, runs: Sequence[Mapping[str, Any]], tags: Mapping[str, Mapping[str, str]] | None = None,
               now: float = 0.0) -> "Recorded":
        """Add each run once, in one transaction: a run id already there with the same digest is left, with
        another digest (the folder changed: a retried attempt) is replaced; a digest already there under another
        run id is a copy and is not added."""
        done = Recorded()
        tags = tags or {}
        try:
            with self.transaction():
                for run in runs:
                    what = self._one(run, now)
                    done.count(what)
                    if what != "copies":
                        for key, value in tags.get(str(run["run_id"]), {}).items():
                            self.execute(UPSERT_TAG, (run["run_id"], key, value))
        except self.dialect.errors as exc:
            raise StoreError(f"store {redacted(self.url)}: not written ({_said(exc, self.url)})") from None
        return done

    def record_verdict(self, verdict_id: str, kind: str, outcome: str, roots: Sequence[str], detail: Any,
                       runs: Sequence[tuple[str, str]], now: float) -> bool:
        """Add one verdict with the (side, run id) pairs behind it, once: the same verdict again (same id) is left as
        it was first made. Whether it was added."""
        try:
            with self.transaction():
                if self.execute("SELECT 1 FROM verdicts WHERE verdict_id = ?", (verdict_id,)).fetchone() is not None:
                    return False
                self.execute("INSERT INTO verdicts (verdict_id, kind, made, outcome, roots, detail) VALUES "
                             "(?, ?, ?, ?, ?, ?)", (verdict_id, kind, now, outcome, _sql_value(list(roots)),
                                                    _sql_value(detail)))
                for side, run_id in dict.fromkeys(runs):
                    self.execute("INSERT INTO verdict_runs (verdict_id, side, run_id) VALUES (?, ?, ?)",
                                 (verdict_id, side, run_id))
        except self.dialect.errors as exc:
            raise StoreError(f"store {redacted(self.url)}: not written ({_said(exc, self.url)})") from None
        return True

    def _one(self, run: Mapping[str, Any], now: float) -> str:
        """Add or replace one run; what happened (a Recorded field)."""
        held = self.execute("SELECT digest FROM runs WHERE run_id = ?", (run["run_id"],)).fetchone()
        if held is not None and held[0] == run["digest"]:
            return "same"
        twin = self.execute("SELECT run_id FROM runs WHERE digest = ? AND run_id != ?",
                            (run["digest"], run["run_id"])).fetchone()
        if twin is not None:
            return "copies"
        self.execute(UPSERT_RUN, [_sql_value(run.get(name)) for name in RUN_FIELDS[:-1]] + [now])
        return "added" if held is None else "replaced"


@dataclass
class Recorded:
    """What one recording did: runs added, replaced (their folder changed), already there, copies refused."""

    added: int = 0
    replaced: int = 0
    same: int = 0
    copies: int = 0

    def count(self, what: str) -> None:
        setattr(self, what, getattr(self, what) + 1)

    def text(self) -> str:
        parts = [f"{self.added} added"] + [f"{n} {said}" for n, said in (
            (self.replaced, "replaced (their folder changed)"), (self.same, "already recorded"),
            (self.copies, "copies of recorded runs, left out")) if n]
        return ", ".join(parts)


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


def _said(exc: BaseException, url: str) -> str:
    """A driver's error as one inert line, the URL's password never in it."""
    text = inert(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
    password = urlsplit(url).password if "://" in url else None
    return text.replace(password, "***") if password else text


def _open_sqlite(url: str) -> Store:
    path = _sqlite_path(url)
    shown = redacted(url)
    if path.exists() and not path.is_file():
        raise StoreError(f"store {shown}: not a regular file")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(path, timeout=WAIT_S, isolation_level=None)
        connection.execute("PRAGMA foreign_keys = ON")
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"store {shown}: cannot be opened ({inert(exc)})") from None
    return Store(url, connection, SQLITE)


def _open_postgres(url: str) -> Store:
    shown = redacted(url)
    try:
        import psycopg
    except ImportError:
        raise StoreError(f"store {shown}: a PostgreSQL store needs the psycopg driver: "
                         "pip install 'hvdbench[store]'") from None
    try:
        connection = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except (psycopg.Error, ValueError) as exc:
        raise StoreError(f"store {shown}: cannot be reached ({_said(exc, url)})") from None
    return Store(url, connection, _postgres())


def open_store(url: str, *, version: int = SCHEMA_VERSION) -> Store:
    """Open (and make or migrate) the store at ``url``. A file that is not an SQLite database, a store a later
    hvdbench made, a folder, a server that cannot be reached: StoreError, the store untouched."""
    store = _open_postgres(url) if re.match(r"^postgres(ql)?://", url, re.I) else _open_sqlite(url)
    shown = redacted(url)
    try:
        held = store.version()
        if held > version:
            raise StoreError(f"store {shown}: schema version {held} was written by a later hvdbench (this one "
                             f"knows up to {version}); left untouched")
        if held < version:
            store.migrate(version)
    except store.dialect.errors as exc:
        store.close()
        raise StoreError(f"store {shown}: not a readable hvdbench store ({_said(exc, url)}); left untouched") from None
    except StoreError:
        store.close()
        raise
    return store
