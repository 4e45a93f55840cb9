"""The databases a history store can live in, one backend each, chosen by the location's scheme
(analysis/history/locations.py) from one registry (``@register_backend``, as MLflow chooses stores): how it connects,
whether a store is there before anything is made, its SQL dialect (parameters' mark, statement rewrites), how a
writer takes its turn and how long it waits for it, and how the database says it is busy. SQLite from the standard
library (its rollback journal rather than WAL, which needs memory shared between processes and so fails on the
network filesystems clusters share); PostgreSQL through psycopg (a team's server), its writers taking a
transaction-scoped advisory lock with a bounded wait that names the holder where the server tells it."""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable

from hvdbench.core.validate import inert

from .locations import SCHEMES, Location, StoreError, said, url_location

WAIT_VARIABLE = "HVDBENCH_STORE_WAIT_S"  # how long a writer waits for another's turn (default WAIT_S)
WAIT_S = 120.0
PG_LOCK = 0x68766462  # the advisory lock every PostgreSQL writer of a store takes first ("hvdb")


def wait_s() -> float:
    """Seconds a write waits for another process's write to the same store (HVDBENCH_STORE_WAIT_S, else WAIT_S)."""
    try:
        value = float(os.environ.get(WAIT_VARIABLE, WAIT_S))
    except ValueError:
        return WAIT_S
    return value if 0 < value <= 3600 else WAIT_S


@dataclass(frozen=True)
class Backend:
    """What differs between databases: how to connect (``connect(location, create)``: a connection in autocommit,
    or a StoreError; ``create`` False: no store is made where none is), the statements that begin a writer's turn, how
    a table is found, the driver's errors and which of them mean busy, the parameters' mark, and why a writer
    waited in vain (the holder, where the database says)."""

    name: str
    connect: Callable[[Location, bool], Any]
    begin: Callable[[], tuple[str, ...]]
    has_table: str  # a query of one parameter, the table's name, returning a row where it exists
    errors: tuple[type[BaseException], ...]
    busy: Callable[[BaseException], bool]
    mark: str = "?"
    holder: Callable[[Any], str] = field(default=lambda connection: "")

    def sql(self, text: str) -> str:
        """A statement written with ``?`` marks in this database's own."""
        return text if self.mark == "?" else text.replace("?", self.mark)


BACKENDS: dict[str, Callable[[], Backend]] = {}


def register_backend(name: str, schemes: tuple[str, ...] = ()) -> Callable[[Callable[[], Backend]],
                                                                          Callable[[], Backend]]:
    """Register a backend's maker under its name (made on first use: a driver imported only then); ``schemes``: the
    URL schemes that name it, read as plain URLs (``locations.url_location``; SQLite's and PostgreSQL's own forms,
    a path and a keyword string, are read in locations.py)."""
    def add(make: Callable[[], Backend]) -> Callable[[], Backend]:
        BACKENDS[name] = make
        SCHEMES.update({scheme: partial(url_location, name) for scheme in schemes})
        return make
    return add


def backend_of(where: Location) -> Backend:
    make = BACKENDS.get(where.backend)
    if make is None:
        raise StoreError(f"store {where.shown}: no backend for {inert(where.backend)} stores")
    return make()


def _sqlite_connect(where: Location, create: bool) -> Any:
    path = Path(where.target)
    if path.exists() and not path.is_file():
        raise StoreError(f"store {where.shown}: not a regular file")
    if not create and not path.exists():
        raise StoreError(f"store {where.shown}: no store there (nothing was recorded at that path yet); give the "
                         "store the runs were recorded in (--store, HVDBENCH_STORE)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(path, timeout=wait_s(), isolation_level=None)
        connection.execute("PRAGMA foreign_keys = ON")
    except (OSError, sqlite3.Error) as exc:
        raise StoreError(f"store {where.shown}: cannot be opened ({inert(exc)})") from None
    return connection


def _sqlite_busy(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc).lower()


@register_backend("sqlite")
def _sqlite() -> Backend:
    return Backend("sqlite", _sqlite_connect, lambda: ("BEGIN IMMEDIATE",),
                   "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?", (sqlite3.Error,),
                   _sqlite_busy)


def _postgres_connect(where: Location, create: bool) -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreError(f"store {where.shown}: a PostgreSQL store needs the psycopg driver: "
                         "pip install 'hvdbench[store]'") from None
    try:
        return psycopg.connect(where.target, autocommit=True, connect_timeout=10)
    except (psycopg.Error, ValueError) as exc:
        raise StoreError(f"store {where.shown}: cannot be reached ({said(exc, where)})") from None


def _postgres_holder(connection: Any) -> str:
    """Who holds the store's advisory lock, as the server tells it: its process, application, client and since."""
    try:
        row = connection.execute(
            "SELECT a.pid, a.application_name, a.client_addr, a.xact_start FROM pg_catalog.pg_locks l JOIN "
            "pg_catalog.pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted AND "
            "l.objid::bigint = %s LIMIT 1", (PG_LOCK,)).fetchone()
    except Exception:  # noqa: BLE001 - naming the holder is a courtesy; the wait's end is said whatever
        return ""
    if row is None:
        return ""
    pid, application, client, since = row
    return (f"held by server process {pid}" + (f" ({inert(application)})" if application else "")
            + (f" from {inert(client)}" if client else "") + (f" since {since:%Y-%m-%d %H:%M:%S}" if since else ""))


@register_backend("postgresql")
def _postgres() -> Backend:
    import psycopg

    # pg_tables read with the statement's own snapshot: to_regclass looks the name up in the catalog caches, which a
    # writer that waited on the advisory lock (no relation lock) has not refreshed, and would miss tables the writer
    # before it made (it then migrated again: "relation meta already exists")
    def begin() -> tuple[str, ...]:
        return ("BEGIN", f"SET LOCAL lock_timeout = '{int(wait_s() * 1000)}ms'",
                f"SELECT pg_advisory_xact_lock({PG_LOCK})")

    def busy(exc: BaseException) -> bool:
        return isinstance(exc, psycopg.errors.LockNotAvailable)

    return Backend("postgresql", _postgres_connect, begin,
                   "SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = current_schema() AND tablename = ?",
                   (psycopg.Error,), busy, "%s", _postgres_holder)
