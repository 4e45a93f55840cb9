"""The history store on a team's server, safely: a writer waits a bounded time for another's turn and says who held
it where the server tells; a password is never printed in any form (a URL's user information, ``?password=`` in its
query, ``password=`` in a libpq keyword string), masked as a field, the driver's words never edited; a location that
is neither a path nor one a backend knows is refused in one line; read commands never create a store; a busy store is
told from an unreadable one."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hvdbench.analysis.history.backends import PG_LOCK
from hvdbench.analysis.history.locations import parse_location, redacted
from hvdbench.analysis.history.recording import record_and_say, record_roots
from hvdbench.analysis.history.store import StoreError, open_store
from hvdbench.cli import main
from test_history_store_keeps_every_run_once import _root

pytestmark = pytest.mark.bad_input


@pytest.mark.parametrize("given, shown", [
    ("postgresql://bench:s3cret@db.lab:5432/history", "postgresql://bench:***@db.lab:5432/history"),
    ("postgresql://bench@db.lab/history?password=s3cret&sslmode=require",
     "postgresql://bench@db.lab/history?password=***&sslmode=require"),
    ("host=db.lab port=5432 dbname=history user=bench password=s3cret",
     "host=db.lab port=5432 dbname=history user=bench password=***"),
])
def test_a_password_is_masked_as_a_field_in_every_form(given: str, shown: str) -> None:
    where = parse_location(given)
    assert (where.backend, where.shown, where.secrets) == ("postgresql", shown, ("s3cret",))
    assert redacted(given) == shown


@pytest.mark.parametrize("given, said", [
    ("postgresql:/db.lab/history", "one slash after the scheme"),
    ("mysql://bench:s3cret@db.lab/history", "mysql stores are not supported"),
    ("hots=db.lab dbname=history password=s3cret", "neither a path nor a libpq keyword string"),
])
def test_a_location_no_backend_knows_is_refused_without_its_password(
        tmp_path: Path, given: str, said: str, capsys: pytest.CaptureFixture[str]) -> None:
    os.chdir(tmp_path)
    assert main(["history", "--store", given]) == 2
    err = capsys.readouterr().err
    assert said in err and "s3cret" not in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []  # no SQLite file of that name was made


def test_the_drivers_words_are_never_edited_to_hide_a_password(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path / "a", repeats=1)
    record_and_say([root], "postgresql://bench:e@127.0.0.1:1/history").show()  # password "e": nothing listens on port 1
    err = capsys.readouterr().err
    assert "postgresql://bench:***@127.0.0.1:1/history: cannot be reached (connection" in err and "***ction" not in err
    record_and_say([root], "host=127.0.0.1 port=1 dbname=history user=bench password=s3cret").show()
    err = capsys.readouterr().err
    assert "password=***" in err and "s3cret" not in err and "cannot be reached" in err


def test_read_commands_never_create_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    typo = tmp_path / "histroy.sqlite"
    for action in ([], ["aggregate"], ["check"], ["verdicts"], ["compare", "--a", "np=1", "--b", "np=2"],
                   ["publish", str(tmp_path / "site")]):
        assert main(["history", *action, "--store", str(typo)]) == 2, action
        err = capsys.readouterr().err
        assert "no store there (nothing was recorded at that path yet)" in err and err.count("\n") == 1
    assert not typo.exists() and not (tmp_path / "site").exists()
    record_roots([_root(tmp_path / "a", repeats=1)], str(tmp_path / "h.sqlite"))
    assert main(["history", "--store", str(tmp_path / "h.sqlite")]) == 0


def _hold(code: str, *argv: str) -> subprocess.Popen[str]:
    """A process that takes a store's write turn, says it holds it, and keeps it until killed."""
    proc = subprocess.Popen([sys.executable, "-c", code, *argv], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "holding"
    return proc


def test_a_busy_store_is_told_from_an_unreadable_one_and_the_wait_is_bounded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "h.sqlite"
    record_roots([_root(tmp_path / "a", repeats=1)], str(store))
    holder = _hold("import sqlite3, sys, time\nc = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
                   "c.execute('BEGIN EXCLUSIVE')\nprint('holding', flush=True)\ntime.sleep(120)", str(store))
    monkeypatch.setenv("HVDBENCH_STORE_WAIT_S", "1")
    try:
        start = time.monotonic()
        with pytest.raises(StoreError, match="busy: another process kept writing to it for 1 s"):
            record_roots([_root(tmp_path / "b", system="dgx-b", repeats=1, seed=7)], str(store))
        assert time.monotonic() - start < 30
        with pytest.raises(StoreError, match="busy") as caught:
            open_store(str(store), create=False)
        assert "not a readable" not in str(caught.value)
    finally:
        holder.kill()
        holder.wait()
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT count(*) FROM runs").fetchone() == (1,)


@pytest.mark.slow
def test_a_postgresql_writer_waits_a_bounded_time_and_names_the_holder(
        tmp_path: Path, postgres: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    url = postgres.database()
    record_roots([_root(tmp_path / "a", repeats=1)], url)
    holder = _hold("import psycopg, sys, time\nc = psycopg.connect(sys.argv[1], autocommit=True, "
                   "application_name='nightly-sweep')\nc.execute('BEGIN')\n"
                   f"c.execute('SELECT pg_advisory_xact_lock({PG_LOCK})')\nprint('holding', flush=True)\n"
                   "time.sleep(120)", url)
    monkeypatch.setenv("HVDBENCH_STORE_WAIT_S", "1")
    try:
        start = time.monotonic()
        with pytest.raises(StoreError) as caught:
            record_roots([_root(tmp_path / "b", system="dgx-b", repeats=1, seed=7)], url)
        said = str(caught.value)
        assert time.monotonic() - start < 30 and "busy: another process kept writing to it for 1 s" in said
        assert "held by server process" in said and "(nightly-sweep)" in said and said.count("\n") == 0
    finally:
        holder.kill()
        holder.wait()
    assert record_roots([_root(tmp_path / "b", system="dgx-b", repeats=1, seed=7)], url).added == 1
