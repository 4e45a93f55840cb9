"""A history store backend beyond SQLite and PostgreSQL is one registration (CONTRIBUTING's row): a stand-in backend
under a scheme of its own, registered by ``@register_backend`` alone, is chosen by its URL, migrated, written and read
by the store and the command line as the other two are, every statement in its own dialect (its parameter mark and
its writer's turn), its password masked wherever the location is shown; nothing in the store names a backend."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pytest

from conftest import write_run
from hvdbench.analysis.history import backends, locations
from hvdbench.analysis.history.backends import Backend, register_backend
from hvdbench.analysis.history.query import Selection, select
from hvdbench.analysis.history.recording import record_roots
from hvdbench.analysis.history.store import open_store
from hvdbench.cli import main
from hvdbench.core.spec import RunSpec

MARK = ":p"  # the stand-in's parameter mark: SQLite's named form, rewritten from the store's ``?`` by its dialect


class Journal:
    """An SQLite connection that keeps every statement it is given: what the store asked of the stand-in."""

    def __init__(self, path: str) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None)
        self.statements: list[str] = []

    def execute(self, sql: str, parameters: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        self.statements.append(sql)
        marks = sql.count(MARK)
        named = sql
        for index in range(marks):  # each :p its own name, in order, as SQLite's named parameters are bound
            named = named.replace(MARK, f":q{index}", 1)
        return self.connection.execute(named, {f"q{i}": value for i, value in enumerate(parameters)})

    def close(self) -> None:
        self.connection.close()


JOURNALS: list[Journal] = []


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> str:
    """The stand-in backend registered (for this test only) under the scheme ``journal``."""
    monkeypatch.setattr(backends, "BACKENDS", dict(backends.BACKENDS))
    monkeypatch.setattr(locations, "SCHEMES", dict(locations.SCHEMES))
    monkeypatch.setattr(backends, "SCHEMES", locations.SCHEMES)

    def connect(where: locations.Location, create: bool) -> Journal:
        path = urlsplit(where.target).path
        if not create and not Path(path).exists():
            raise locations.StoreError(f"store {where.shown}: no store there")
        JOURNALS.append(Journal(path))
        return JOURNALS[-1]

    @register_backend("journal", schemes=("journal",))
    def _journal() -> Backend:
        return Backend("journal", connect, lambda: ("BEGIN EXCLUSIVE",),
                       "SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?", (sqlite3.Error,),
                       lambda exc: "locked" in str(exc), mark=MARK)

    JOURNALS.clear()
    return "journal"


def _root(root: Path, repeats: int = 3) -> Path:
    rng = np.random.default_rng(1)
    for repeat in range(repeats):
        spec = RunSpec(benchmark="cifar10", args=("--model", "resnet20"), np=2, repeat=repeat, system="dgx-a")
        write_run(root, spec, [list(rng.uniform(0.1, 0.12, 30)) for _ in range(2)])
    return root


def test_a_registered_backend_is_chosen_by_its_scheme_and_keeps_every_run_once(
        tmp_path: Path, standin: str, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"{standin}://bench:s3cret@/{tmp_path / 'history.db'}"
    root = _root(tmp_path / "a")
    assert record_roots([root], url).added == 3
    again = record_roots([root], url)
    assert (again.added, again.same) == (0, 3)  # recorded twice, kept once
    with open_store(url, create=False) as opened:
        runs = select(opened, Selection())
        assert opened.where.backend == "journal" and "s3cret" not in str(opened.where)
    assert len(runs) == 3 and runs["throughput"].notna().all()
    statements = [sql for journal in JOURNALS for sql in journal.statements]
    assert "BEGIN EXCLUSIVE" in statements  # each writer's turn taken the stand-in's way
    assert any(MARK in sql for sql in statements) and not any("?" in sql for sql in statements)
    with sqlite3.connect(tmp_path / "history.db") as written:  # what the stand-in holds is the store's schema
        assert written.execute("SELECT COUNT(*) FROM runs").fetchone() == (3,)
    assert main(["history", "--store", url]) == 0
    out, err = capsys.readouterr()
    assert "dgx-a" in out and "s3cret" not in out + err


def test_an_unregistered_scheme_is_refused_naming_the_registered_ones(tmp_path: Path, standin: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["history", "--store", "mysql://bench:s3cret@db.lab/history"]) == 2
    err = capsys.readouterr().err
    assert "mysql stores are not supported" in err and "journal://…" in err and "s3cret" not in err
    assert err.count("\n") == 1
