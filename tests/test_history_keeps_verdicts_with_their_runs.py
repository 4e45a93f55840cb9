"""Every verdict (accept, compare, compare --regressions) is kept in the history store with its table, its outcome
and the id of every run behind it, by side, once however often it is made; `history verdicts` lists them by kind
and by run; a store of the second schema migrates to the verdicts' third with its runs; a store that cannot take a
verdict costs the verdict nothing (one line, the exit status the verdict's); a store on a read-only disk is one
line and no run is lost; a run's node power source is part of its environment in the store."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import write_run
from hvdbench.analysis.collect import collect
from hvdbench.analysis.history.recording import record_roots
from hvdbench.analysis.history.rows import store_rows
from hvdbench.analysis.history.store import SCHEMA_VERSION, open_store
from hvdbench.analysis.history.verdicts import list_verdicts
from hvdbench.cli import main
from hvdbench.core.run_facts import power_source as _power_source
from hvdbench.core.spec import RunSpec

ARGS = ("--model", "resnet20", "--batch-size", "32")
CRITERIA = "[[criterion]]\nname='thr'\nbenchmark='cifar10'\ngpus=1\nmetric='throughput'\nmin=250\n"


def _root(root: Path, system: str, step_s: float, seed: int, repeats: int = 3) -> Path:
    rng = np.random.default_rng(seed)
    for repeat in range(repeats):
        write_run(root, RunSpec(benchmark="cifar10", args=ARGS, np=1, system=system, repeat=repeat),
                  [list(rng.normal(step_s, step_s * 0.01, 40))])
    return root


def _ids(root: Path) -> set[str]:
    return {p.parent.name for p in root.glob("*/run.json")}


def test_accept_compare_and_regressions_keep_their_verdicts_with_the_runs_behind_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], store_url: str) -> None:
    """On the embedded SQLite file and on a PostgreSQL server alike."""
    store = store_url
    a, b = _root(tmp_path / "a", "dgx-a", 0.1, 1), _root(tmp_path / "b", "dgx-b", 0.09, 2)
    criteria = tmp_path / "c.toml"
    criteria.write_text(CRITERIA)
    assert main(["accept", str(criteria), str(a), "-o", str(tmp_path / "o1"), "--store", store]) == 0
    assert "history: accept verdict " in capsys.readouterr().out
    assert main(["accept", str(criteria), str(a), "-o", str(tmp_path / "o2"), "--store", store]) == 0  # made again
    assert "already recorded" in capsys.readouterr().out
    assert main(["compare", str(a), str(b), "-o", str(tmp_path / "o3"), "--store", store]) == 0
    assert main(["compare", str(b), str(a), "--regressions", "-o", str(tmp_path / "o4"), "--store", store]) == 1
    capsys.readouterr()
    with open_store(store) as opened:
        kept = list_verdicts(opened).set_index("kind")
        assert sorted(kept.index) == ["accept", "compare", "regressions"]
        accept = kept.loc["accept"]
        assert accept["outcome"] == "pass" and accept["detail"][0]["verdict"] == "pass"
        assert {r.split(":", 1)[1] for r in accept["run_ids"]} == _ids(a) and accept["runs"] == 3
        regressions = kept.loc["regressions"]
        assert regressions["outcome"] == "regression" and regressions["detail"][0]["finding"] == "regression"
        assert {r for r in regressions["run_ids"] if r.startswith("old:")} == {f"old:{i}" for i in _ids(b)}
        assert {r for r in regressions["run_ids"] if r.startswith("new:")} == {f"new:{i}" for i in _ids(a)}
        compared = kept.loc["compare"]
        assert compared["outcome"] == "1 faster" and len(compared["detail"]) == 1
        assert {r.split(":")[0] for r in compared["run_ids"]} == {"dgx-a", "dgx-b"}
        one_of_b = sorted(_ids(b))[0]
        assert sorted(list_verdicts(opened, run_id=one_of_b)["kind"]) == ["compare", "regressions"]
        assert list(list_verdicts(opened, kind="accept")["kind"]) == ["accept"]
    assert main(["history", "verdicts", "--store", store, "--run", one_of_b]) == 0
    listed = capsys.readouterr().out
    assert sorted(line.split()[2] for line in listed.splitlines()[2:]) == ["compare", "regressions"]
    assert main(["history", "verdicts", "--store", store, "--format", "json", "--kind", "accept"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert record["outcome"] == "pass" and len(record["run_ids"]) == 3


@pytest.mark.bad_input
def test_a_store_that_cannot_take_a_verdict_costs_the_verdict_nothing(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    a = _root(tmp_path / "a", "dgx-a", 0.1, 1)
    criteria = tmp_path / "c.toml"
    criteria.write_text(CRITERIA)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["accept", str(criteria), str(a), "-o", str(tmp_path / "o"), "--store",
                 str(blocker / "h.sqlite")]) == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the accept verdict was not recorded in the history store" in err
    assert (tmp_path / "o" / "acceptance.csv").exists()


def test_a_second_schema_store_migrates_to_the_verdicts_with_its_runs(tmp_path: Path) -> None:
    path = str(tmp_path / "h.sqlite")
    root = _root(tmp_path / "a", "dgx-a", 0.1, 1)
    from test_history_store_keeps_every_run_once import _old_store

    _old_store(path, 2, store_rows(collect([root])))
    with open_store(path) as current:
        assert current.version() == SCHEMA_VERSION == 5 and current.has_table("verdict_runs")
        assert len(current.query("SELECT run_id FROM runs")) == 3 and list_verdicts(current).empty


def _read_only(folder: Path, python: str) -> list[str]:
    """A command that runs ``python`` with ``folder`` read-only: a read-only bind mount in a mount namespace of its
    own where root runs the tests (root writes through file modes), the folder's modes otherwise."""
    if os.geteuid() == 0:
        inner = f"mount --bind {folder} {folder} && mount -o remount,ro,bind {folder} && exec {sys.executable} -c " \
                f"{shlex.quote(python)}"
        return ["unshare", "--mount", "sh", "-c", inner]
    folder.chmod(0o555)
    for path in folder.iterdir():
        path.chmod(0o444)
    return [sys.executable, "-c", python]


@pytest.mark.slow
@pytest.mark.bad_input
def test_a_store_on_a_read_only_disk_is_one_line_and_costs_no_run(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "h.sqlite"
    record_roots([_root(tmp_path / "a", "dgx-a", 0.1, 1)], str(path))
    before = path.read_bytes()
    later = _root(tmp_path / "b", "dgx-b", 0.1, 2)
    python = (f"from hvdbench.analysis.history.recording import record_and_say; "
              f"record_and_say([{str(later)!r}], {str(path)!r}).show()")
    try:
        done = subprocess.run(_read_only(folder, python), capture_output=True, text=True, timeout=120)
    finally:
        folder.chmod(0o755)
        path.chmod(0o644)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("\n") == 1 and "runs not recorded in the history store" in done.stderr
    assert "history import" in done.stderr and ("readonly" in done.stderr or "read-only" in done.stderr)
    assert path.read_bytes() == before and len(_ids(later)) == 3
    assert record_roots([later], str(path)).added == 3  # caught up once it can be written


def test_the_node_power_source_is_said_and_kept() -> None:
    assert _power_source({"rapl": ["package-0", "dram"], "reason": None, "bmc": "ipmitool dcmi power reading",
                          "bmc_reason": None}) == "RAPL package-0, dram; BMC ipmitool dcmi power reading"
    assert _power_source({"rapl": None, "reason": "no /sys/class/powercap", "bmc": None,
                          "bmc_reason": "BMC not read: ipmitool is not installed"}) == \
        "none (no /sys/class/powercap; BMC not read: ipmitool is not installed)"
    assert _power_source(None) is None
