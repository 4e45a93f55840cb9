"""What make test builds beside the tests runs at nice 19; once a test waits for it, the build and everything it
started run at the tests' own priority (tests/builds.py), so a busy neighbour at nice 0 cannot starve it."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from builds import hurry

pytestmark = pytest.mark.slow


@pytest.mark.skipif(os.geteuid() != 0, reason="raising a niceness needs root (CI's machine runs as root)")
def test_a_waited_for_build_and_its_children_leave_nice_19(tmp_path: Path) -> None:
    build = subprocess.Popen(["nice", "-n", "19", "sh", "-c", "sleep 30 & sleep 30 & wait"])
    ended = subprocess.Popen(["nice", "-n", "19", "sleep", "30"])
    try:
        (tmp_path / "image.pid").write_text(str(build.pid))
        (tmp_path / "done.pid").write_text(str(ended.pid))
        (tmp_path / "done.rc").write_text("0")  # a build that has ended is left as it is
        deadline = time.monotonic() + 10
        while len(_children_of(build.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        sleepers = _children_of(build.pid)
        assert len(sleepers) == 2 and os.getpriority(os.PRIO_PROCESS, sleepers[0]) == 19
        hurry(tmp_path)
        own = os.getpriority(os.PRIO_PROCESS, 0)
        assert [os.getpriority(os.PRIO_PROCESS, p) for p in (build.pid, *sleepers)] == [own] * 3
        assert os.getpriority(os.PRIO_PROCESS, ended.pid) == 19
    finally:
        for process in (build, ended):
            subprocess.run(["pkill", "-P", str(process.pid)], check=False)
            process.kill()
            process.wait()


def _children_of(pid: int) -> list[int]:
    return [int(p) for p in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True,
                                           text=True).stdout.split()]
