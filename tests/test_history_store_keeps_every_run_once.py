"""The history store keeps every execution once across roots and months: a root recorded twice or moved, a copy
relabelled as another system or shifted by a picosecond, add nothing; the same configuration run again (into its
cleared folder, or a new root) adds a run; a retried attempt of the same execution replaces it; a store made by an
earlier schema migrates with every row; a later schema, a corrupt file, a folder or an unwritable place is one line
and the file untouched; two writers at once lose nothing; a password is never printed. The same tests run on the
embedded default (SQLite) and on a real PostgreSQL server the tests start (its outage one line, caught up after)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import write_run
from hvdbench.analysis.history.query import Selection, moment, select
from hvdbench.analysis.history.recording import record_and_say, record_roots
from hvdbench.analysis.history.store import SCHEMA_VERSION, StoreError, open_store, redacted
from hvdbench.cli import main
from hvdbench.core.spec import RunSpec


def _root(root: Path, system: str = "dgx-a", repeats: int = 3, np_: int = 2, shift: float = 0.0,
          seed: int = 1, host: str = "node1") -> Path:
    rng = np.random.default_rng(seed)
    for repeat in range(repeats):
        spec = RunSpec(benchmark="cifar10", args=("--model", "resnet20"), np=np_, repeat=repeat, system=system)
        write_run(root, spec, [list(rng.uniform(0.1, 0.12, 30) + shift) for _ in range(np_)], host=host)
    return root


def _relabel(root: Path, system: str) -> None:
    for spec in root.glob("*/run.json"):
        data = json.loads(spec.read_text())
        data["spec"]["system"] = system
        spec.write_text(json.dumps(data))


def test_a_root_recorded_twice_and_its_copies_count_each_run_once(tmp_path: Path, store_url: str) -> None:
    store = store_url
    root = _root(tmp_path / "a")
    assert record_roots([root], store).added == 3
    again = record_roots([root], store)
    assert (again.added, again.same) == (0, 3)
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    _relabel(copy, "dgx-b")  # the same measurements, sold as another system
    copied = record_roots([copy], store)
    assert (copied.added, copied.copies) == (0, 3) and "copies of recorded runs" in copied.text()
    shifted = _root(tmp_path / "shifted", system="dgx-c", shift=1e-12)  # a picosecond later: the same measurements
    assert record_roots([shifted], store).copies == 3
    other = _root(tmp_path / "other", system="dgx-b", seed=2)  # measured for real
    assert record_roots([other], store).added == 3
    with open_store(store) as opened:
        runs = select(opened, Selection())
    assert sorted(runs["system"].value_counts().items()) == [("dgx-a", 3), ("dgx-b", 3)]
    assert runs["throughput"].notna().all() and (runs["ci_low"] < runs["throughput"]).all()
    assert all(env["host"] == "node1" for env in runs["environment"])


def test_a_run_made_again_adds_a_run_and_only_a_retried_attempt_replaces(tmp_path: Path, store_url: str) -> None:
    store = store_url
    root = _root(tmp_path / "a", repeats=1)
    record_roots([root], store)
    spec = RunSpec.read(next(root.glob("*/run.json")))
    shutil.rmtree(root / spec.id)
    write_run(root, spec, [[0.2] * 10 + [0.25] * 20] * 2, host="node1")  # its folder cleared, run again
    done = record_roots([root], store)
    assert (done.added, done.replaced) == (1, 0)
    folder = root / spec.id
    (folder / "attempt-1").mkdir()  # the executor moves an attempt aside and starts the next: a requeue
    for log in folder.glob("rank-*.jsonl*"):
        log.rename(folder / "attempt-1" / log.name)
    write_run(root, spec, [[0.3] * 10 + [0.35] * 20] * 2, host="node1")
    done = record_roots([root], store)
    assert (done.added, done.replaced) == (0, 1) and "a later attempt of the same execution" in done.text()
    with open_store(store) as opened:
        runs = select(opened, Selection())
    assert len(runs) == 2 and list(runs["run_id"]) == [spec.id] * 2 and runs["run_key"].nunique() == 2
    assert runs["throughput"].max() > 2 * 32 / 0.12 and 2 * 32 / 0.35 <= runs["throughput"].min() <= 2 * 32 / 0.3


def test_runs_are_selected_by_system_size_time_and_tags(tmp_path: Path, store_url: str) -> None:
    store = store_url
    record_roots([_root(tmp_path / "a")], store, tags={"image": "ngc-24.04"})
    record_roots([_root(tmp_path / "b", system="dgx-b", np_=1, seed=3)], store)
    with open_store(store) as opened:
        assert len(select(opened, Selection(system="dgx-b"))) == 3
        assert len(select(opened, Selection(np=2))) == 3
        assert len(select(opened, Selection(tags=(("image", "ngc-24.04"),)))) == 3
        assert len(select(opened, Selection(tags=(("image", "other"),)))) == 0
        assert len(select(opened, Selection(since=moment("1h")))) == 6
        assert len(select(opened, Selection(until=moment("2020-01-01")))) == 0
    assert moment("30d", now=1_000_000_000.0) == 1_000_000_000.0 - 30 * 86400
    assert moment("2026-11-01") == 1_793_491_200.0


def test_the_command_lists_aggregates_and_writes_csv_and_json(tmp_path: Path, store_url: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    store = store_url
    root = _root(tmp_path / "a", system="<b>dgx</b>", host="node\x1b[31m")
    assert main(["history", "import", str(root), "--store", store, "--tag", "site=lab"]) == 0
    assert "3 added" in capsys.readouterr().out
    assert main(["history", "--store", store, "--tag", "site=lab"]) == 0
    listed = capsys.readouterr().out
    assert len(listed.splitlines()) == 5 and "\x1b" not in listed and "node\\x1b[31m" in listed
    assert main(["history", "aggregate", "--store", store]) == 0
    assert "  3  " in capsys.readouterr().out
    assert main(["history", "--store", store, "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert len(records) == 3 and records[0]["tags"] == {"site": "lab"} and records[0]["throughput"] > 0
    assert main(["history", "--store", store, "--format", "csv", "--np", "2"]) == 0
    assert capsys.readouterr().out.count("\n") == 4
    assert main(["history", "--store", store, "--since", "yesterday"]) == 2
    assert "not a time" in capsys.readouterr().err
    assert main(["history", "--store", store, "--system", "nobody"]) == 0
    assert "no run" in capsys.readouterr().err


V1_FIELDS = ("run_id", "digest", "system", "host", "framework", "benchmark", "model", "config", "np", "nodes",
             "status", "started", "ended", "root", "unit", "throughput", "ci_low", "ci_high", "steps",
             "time_to_target_s", "converged", "environment", "row_json", "recorded")


def _old_store(url: str, version: int, rows: list[dict[str, Any]]) -> None:
    """A store as an earlier hvdbench wrote it: its schema's statements, its rows in that schema's columns."""
    from hvdbench.analysis.history.store import MIGRATIONS, _sql_value

    with open_store(url, version=0) as empty, empty.transaction():
        for step in range(1, version + 1):
            for statement in MIGRATIONS[step]:
                empty.execute(statement)
        empty.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(version),))
        for row in rows:
            empty.execute(f"INSERT INTO runs ({', '.join(V1_FIELDS)}) VALUES ({', '.join('?' * len(V1_FIELDS))})",
                          [_sql_value(row.get(n)) for n in V1_FIELDS[:-1]] + [1.0])
        if version >= 2:
            empty.execute("INSERT INTO tags (run_id, key, value) VALUES (?, 'image', 'ngc')", (rows[0]["run_id"],))
        if version >= 3:
            empty.execute("INSERT INTO verdicts (verdict_id, kind, made, outcome, roots, detail) VALUES ('v1', "
                          "'compare', 1.0, 'pass', '[]', '[]')")
            empty.execute("INSERT INTO verdict_runs (verdict_id, side, run_id) VALUES ('v1', 'a', ?)",
                          (rows[1]["run_id"],))


@pytest.mark.parametrize("version", [1, 2, 3])
def test_an_earlier_store_migrates_with_every_row(tmp_path: Path, store_url: str, version: int) -> None:
    root = _root(tmp_path / "a")
    from hvdbench.analysis.collect import collect
    from hvdbench.analysis.history.rows import store_rows
    from hvdbench.analysis.history.verdicts import list_verdicts

    rows = store_rows(collect([root]))
    _old_store(store_url, version, rows)
    with open_store(store_url) as current:
        assert current.version() == SCHEMA_VERSION and current.has_table("tags")
        runs = select(current, Selection())
        assert len(runs) == 3 and sorted(runs["run_id"]) == sorted(r["run_id"] for r in rows)
        if version >= 2:
            assert len(select(current, Selection(tags=(("image", "ngc"),)))) == 1
        if version >= 3:
            [kept] = list_verdicts(current).to_dict("records")
            assert kept["run_ids"] == [f"a:{rows[1]['run_id']}"]
            assert current.query("SELECT run_key FROM verdict_runs")[0][0] == \
                runs.set_index("run_id").loc[rows[1]["run_id"], "run_key"]
    assert record_roots([root], store_url, tags={"k": "v"}).same == 3


@pytest.mark.bad_input
def test_a_later_schema_a_corrupt_file_and_a_folder_are_refused_untouched(tmp_path: Path) -> None:
    later = tmp_path / "later.sqlite"
    record_roots([_root(tmp_path / "a", repeats=1)], str(later))
    with sqlite3.connect(later) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    before = later.read_bytes()
    with pytest.raises(StoreError, match="schema version 99 was written by a later hvdbench"):
        open_store(str(later))
    assert later.read_bytes() == before
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"not a database\n" * 300)
    with pytest.raises(StoreError, match="not a readable hvdbench store"):
        open_store(str(corrupt))
    assert corrupt.read_bytes() == b"not a database\n" * 300
    with pytest.raises(StoreError, match="not a regular file"):
        open_store(str(tmp_path))


@pytest.mark.bad_input
def test_a_store_that_cannot_take_the_runs_costs_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path / "a", repeats=1)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    record_and_say([root], str(blocker / "h.sqlite")).show()  # a folder that cannot be made
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "runs not recorded in the history store" in err and "history import" in err
    assert (root / next(root.iterdir()).name / "run.json").exists()
    secret = "postgresql://bench:s3cret@127.0.0.1:1/history"  # nothing listens on port 1
    assert "s3cret" not in redacted(secret) and "bench:***@127.0.0.1:1" in redacted(secret)
    record_and_say([root], secret).show()
    err = capsys.readouterr().err
    assert "s3cret" not in err and "cannot be reached" in err and err.count("\n") == 1
    record_and_say([root], "mysql://u:s3cret@h/db").show()
    err = capsys.readouterr().err
    assert "s3cret" not in err and "mysql stores are not supported" in err
    record_and_say([root], "off").show()
    assert capsys.readouterr() == ("", "")


@pytest.mark.slow
def test_two_writers_at_once_lose_nothing(tmp_path: Path, store_url: str) -> None:
    store = store_url
    roots = [_root(tmp_path / f"r{i}", system=f"sys{i}", repeats=6, seed=10 + i) for i in range(2)]
    code = ("import sys; from pathlib import Path; from hvdbench.analysis.history.recording import record_roots; "
            "[record_roots([Path(sys.argv[1])], sys.argv[2]) for _ in range(3)]")
    start = time.monotonic()
    procs = [subprocess.Popen([sys.executable, "-c", code, str(root), store]) for root in roots]
    assert [p.wait(timeout=300) for p in procs] == [0, 0], time.monotonic() - start
    with open_store(store) as opened:
        runs = select(opened, Selection())
    assert sorted(runs["system"].value_counts().items()) == [("sys0", 6), ("sys1", 6)]


@pytest.mark.bad_input
def test_tags_kept_in_the_root_reach_the_store_and_a_bad_tags_file_is_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hvdbench.core.errors import UsageError
    from hvdbench.core.tags import TAGS_FILE, tag_pair, write_tags

    root = _root(tmp_path / "a")
    ids = sorted(p.name for p in root.iterdir() if p.is_dir())
    write_tags(root, ids[:2], {"image": "ngc-24.04"})
    write_tags(root, ids[:1], {"driver": "550"})
    store = str(tmp_path / "h.sqlite")
    record_roots([root], store)
    with open_store(store) as opened:
        assert len(select(opened, Selection(tags=(("image", "ngc-24.04"),)))) == 2
        assert list(select(opened, Selection(tags=(("image", "ngc-24.04"), ("driver", "550"))))["run_id"]) == ids[:1]
    (root / TAGS_FILE).write_text('{"x": {"bad key!": "\\u001b[31m"}}')
    assert record_roots([root], str(tmp_path / "other.sqlite")).added == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a tag" in err and "not recorded" in err and "\x1b" not in err
    for bad in ("novalue", "=v", "k=\x1b[31m", "sp ace=v"):
        with pytest.raises(UsageError):
            tag_pair(bad)
    with pytest.raises(UsageError, match="fix or remove it"):
        write_tags(root, ids, {"k": "v"})


@pytest.mark.slow
@pytest.mark.bad_input
def test_a_postgresql_that_goes_down_costs_no_run_and_import_catches_up(
        tmp_path: Path, postgres: Any, capsys: pytest.CaptureFixture[str]) -> None:
    store = postgres.database()
    secret = store.replace("postgresql://postgres@", "postgresql://postgres:s3cret@")  # trust: any password does
    first = _root(tmp_path / "first", repeats=2)
    record_and_say([first], secret).show()
    assert "history: 2 added in postgresql://postgres:***@" in capsys.readouterr().out
    second = _root(tmp_path / "second", system="dgx-b", repeats=2, seed=4)
    postgres.stop()
    try:
        record_and_say([second], secret).show()  # the sweep's end while the server is down
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "runs not recorded" in err and "cannot be reached" in err
        assert "s3cret" not in err and "history import" in err
        assert main(["history", "--store", secret]) == 2
        err = capsys.readouterr().err
        assert err.startswith("hvdbench: error: store postgresql://postgres:***@") and "s3cret" not in err
    finally:
        postgres.start()
    assert main(["history", "import", str(first), str(second), "--store", secret]) == 0
    assert "2 added, 2 already recorded" in capsys.readouterr().out


@pytest.mark.bad_input
def test_a_store_of_a_later_schema_is_refused_and_left_as_it_was(tmp_path: Path, store_url: str) -> None:
    record_roots([_root(tmp_path / "a", repeats=1)], store_url)
    with open_store(store_url) as opened:
        opened.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 99 was written by a later hvdbench"):
        open_store(store_url)
    with pytest.raises(StoreError, match="later hvdbench"):
        record_roots([_root(tmp_path / "b", system="dgx-b", repeats=1, seed=9)], store_url)
    if store_url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(store_url) as connection:
            held = connection.execute("SELECT (SELECT value FROM meta), (SELECT count(*) FROM runs)").fetchone()
    else:
        with sqlite3.connect(store_url) as db:
            held = db.execute("SELECT (SELECT value FROM meta), (SELECT count(*) FROM runs)").fetchone()
    assert tuple(held) == ("99", 1)  # neither migrated back nor written


@pytest.mark.slow
@pytest.mark.bad_input
def test_a_full_disk_costs_no_run_and_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    """The store's file may not grow (RLIMIT_FSIZE, as a full disk refuses a write): the runs are not recorded, one
    line says so, and what the store held before is intact."""
    store = tmp_path / "h.sqlite"
    record_roots([_root(tmp_path / "a", repeats=1)], str(store))
    big = _root(tmp_path / "big", system="dgx-b", repeats=40, seed=5)
    limit = store.stat().st_size + 4096
    code = ("import resource, signal, sys; from pathlib import Path\n"
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
            "from hvdbench.analysis.history.recording import record_and_say\n"
            f"resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))\n"
            "record_and_say([Path(sys.argv[1])], sys.argv[2]).show()\n")
    proc = subprocess.run([sys.executable, "-c", code, str(big), str(store)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and proc.stdout == "", proc.stderr
    assert proc.stderr.count("\n") == 1 and "runs not recorded in the history store" in proc.stderr
    assert "disk" in proc.stderr or "too large" in proc.stderr, proc.stderr  # the write refused, not another fault
    with open_store(str(store)) as opened:
        runs = select(opened, Selection())
    assert list(runs["system"]) == ["dgx-a"]  # the run recorded before, and nothing half-written
