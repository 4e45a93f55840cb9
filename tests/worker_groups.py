"""Where make test runs the tests two at a time (pytest-xdist), each group of tests (conftest's ``_group``: those
that start this machine's shared services, and each file's others) runs in one worker, one test after the other.

pytest-xdist's own ``--dist loadgroup`` names a test's group by appending it to the test's node id in the worker;
pytest 9.2 keeps node ids where that no longer reaches them, and every test became a group of its own: both workers
started their own SLURM clusters, sshd and namespaces, side by side. Here the workers write each test's group into
a file the controller names, once they have collected, and the scheduler (pytest-xdist's load-by-scope) takes a
test's scope from that file, whatever its node id looks like."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, Mapping

import pytest
from xdist.scheduler import LoadScopeScheduling

from hvdbench.core.spec import write_whole

WORKER_INPUT = "hvdbench_groups_file"  # the key of the groups file's path in each worker's input
_FILE = pytest.StashKey[Path]()


def groups_file(config: pytest.Config) -> Path:
    """The controller's file of each test's group (its folder made on first use, removed by ``remove``)."""
    if _FILE not in config.stash:
        config.stash[_FILE] = Path(tempfile.mkdtemp(prefix="hvdbench-test-groups-")) / "groups.json"
    return config.stash[_FILE]


def remove(config: pytest.Config) -> None:
    """Remove the groups file's folder, where this process made one."""
    if _FILE in config.stash:
        shutil.rmtree(config.stash[_FILE].parent, ignore_errors=True)


def write(path: Path, groups: Mapping[str, str]) -> None:
    """Write node id -> group whole (both workers collect the same tests and write the same file)."""
    write_whole(path, json.dumps(dict(groups)))


class GroupScheduling(LoadScopeScheduling):
    """pytest-xdist's load-by-scope, a test's scope being the group its worker's collection wrote for it: a
    scope goes to one worker whole, scopes in the order of the collection (``--no-loadscope-reorder``)."""

    def __init__(self, config: pytest.Config, log: Any, path: Path) -> None:
        super().__init__(config, log)
        self.path = path
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # first asked once every worker has collected (and written the file)
            try:
                self._groups = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise RuntimeError(f"the workers wrote no test groups to {self.path}: {exc}") from None
        return self._groups.get(nodeid, nodeid)
