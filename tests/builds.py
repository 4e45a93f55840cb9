"""What make test builds beside the tests (scripts/test.sh: the MPICH and Intel MPI environments, the CPU image),
waited for by the tests that need it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

WAIT_S = 2400.0  # the longest build alone on 2 cores, cold (two Horovod builds one after the other): about 20 min


def _children() -> dict[int, list[int]]:
    """Every process's children, from /proc (empty where there is none)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended meanwhile
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return children


def hurry(folder: Path) -> None:
    """Raise every build still running beside the tests, and everything it started, from nice 19 to the tests'
    own priority: a test is waiting for one, so the tests leave the CPUs idle, and beside a busy neighbour at nice 0
    a niced build would get almost none of them (measured: pip's install of torch inside the image, 33 s of CPU in
    42 minutes beside two busy loops). Needs the right to lower a niceness (root); without it nothing changes."""
    children = _children()
    own = os.getpriority(os.PRIO_PROCESS, 0)
    for pid_file in folder.glob("*.pid"):
        if pid_file.with_suffix(".rc").exists():
            continue
        try:
            todo = [int(pid_file.read_text())]
        except ValueError:
            continue
        while todo:
            pid = todo.pop()
            todo.extend(children.get(pid, ()))
            try:
                if os.getpriority(os.PRIO_PROCESS, pid) > own:
                    os.setpriority(os.PRIO_PROCESS, pid, own)
            except OSError:
                pass  # ended meanwhile, or not ours to raise


def built_beside(name: str) -> str | None:
    """The output of build ``name`` once it has ended, where make test builds it beside the tests; None where
    nothing is built beside them (the test builds or finds it itself). A build that failed skips the test with the
    build's last line; one still running after WAIT_S fails it."""
    pending = os.environ.get("HVDBENCH_TEST_BUILDS")
    if not pending or pending == "none":
        return None
    folder = Path(pending)
    rc = folder / f"{name}.rc"
    deadline = time.monotonic() + WAIT_S
    while not rc.exists() and time.monotonic() < deadline:
        hurry(folder)
        time.sleep(5.0)
    if not rc.exists():
        pytest.fail(f"{name}, built beside the tests, had not ended after {WAIT_S:.0f} s (log: {folder / name}.log)")
    if rc.read_text().strip() != "0":
        said = [line for path in (folder / f"{name}.out", folder / f"{name}.log") if path.exists()
                for line in path.read_text(errors="replace").splitlines() if line.strip()]
        pytest.skip(f"{name} could not be built beside the tests: {said[-1][:300] if said else 'no output'}")
    return (folder / f"{name}.out").read_text(errors="replace")
