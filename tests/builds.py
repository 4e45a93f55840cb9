"""What make test builds beside the tests (scripts/test.sh: the MPICH and Intel MPI environments, the CPU image),
waited for by the tests that need it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

WAIT_S = 2400.0  # the longest build alone on 2 cores, cold (two Horovod builds one after the other): about 20 min


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
        time.sleep(5.0)
    if not rc.exists():
        pytest.fail(f"{name}, built beside the tests, had not ended after {WAIT_S:.0f} s (log: {folder / name}.log)")
    if rc.read_text().strip() != "0":
        said = [line for path in (folder / f"{name}.out", folder / f"{name}.log") if path.exists()
                for line in path.read_text(errors="replace").splitlines() if line.strip()]
        pytest.skip(f"{name} could not be built beside the tests: {said[-1][:300] if said else 'no output'}")
    return (folder / f"{name}.out").read_text(errors="replace")
