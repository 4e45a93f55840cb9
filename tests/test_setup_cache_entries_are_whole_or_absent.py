"""Set-up's cache entries (Horovod's and mpi4py's wheels) are whole or absent: scripts/setup.sh's ``cache_entry``,
run under set-up's own shell options and ERR trap, makes an entry in one rename of a folder its command filled; a
command that fails leaves neither the entry nor its folder; an empty entry an earlier set-up left is replaced and a
full one another set-up made meanwhile is taken; the folder a killed set-up left is swept once it is a day
untouched, while one a running set-up is filling is kept."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.bad_input]

SETUP = Path(__file__).resolve().parents[1] / "scripts" / "setup.sh"
FILL = "bash -c 'echo wheel > \"$0/horovod.whl\"'"


def _cache_entry() -> str:
    """The function's text as setup.sh has it, with the settings it reads."""
    text = SETUP.read_text()
    found = re.search(r"^PART_STALE_MIN=[^\n]*\n^cache_entry\(\) \{\n.*?^\}\n", text, re.S | re.M)
    assert found, "scripts/setup.sh has no cache_entry"
    return found.group(0)


def _run(cache: Path, line: str) -> subprocess.CompletedProcess[str]:
    script = (f"set -Eeuo pipefail\ntrap 'echo \"ERR trap: $BASH_COMMAND\" >&2; exit 9' ERR\n{_cache_entry()}\n"
              f"{line}\n")
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "C": str(cache)})


def _parts(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.glob("*.part-*"))


def test_an_entry_is_made_whole_and_a_failed_command_leaves_nothing(tmp_path: Path) -> None:
    made = _run(tmp_path, f'cache_entry "$C/w/entry" {FILL} && echo made')
    assert made.returncode == 0 and "made" in made.stdout, made.stderr
    assert (tmp_path / "w" / "entry" / "horovod.whl").read_text() == "wheel\n" and not _parts(tmp_path / "w")
    failed = _run(tmp_path, 'cache_entry "$C/w/other" false || echo "not made: $?"')
    assert failed.returncode == 0 and "not made: 1" in failed.stdout, failed.stderr
    assert not (tmp_path / "w" / "other").exists() and not _parts(tmp_path / "w")


def test_an_empty_entry_is_replaced_and_a_full_one_made_meanwhile_is_taken(tmp_path: Path) -> None:
    (tmp_path / "w" / "empty").mkdir(parents=True)
    assert _run(tmp_path, f'cache_entry "$C/w/empty" {FILL}').returncode == 0
    assert (tmp_path / "w" / "empty" / "horovod.whl").exists()
    (tmp_path / "w" / "full").mkdir()
    (tmp_path / "w" / "full" / "theirs.whl").write_text("theirs\n")
    taken = _run(tmp_path, f'cache_entry "$C/w/full" {FILL} && echo taken')
    assert taken.returncode == 0 and "taken" in taken.stdout, taken.stderr
    assert [p.name for p in (tmp_path / "w" / "full").iterdir()] == ["theirs.whl"] and not _parts(tmp_path / "w")


def test_a_killed_set_ups_folder_is_swept_after_a_day_and_a_running_ones_kept(tmp_path: Path) -> None:
    wheels = tmp_path / "w"
    stale, running, another = wheels / "entry.part-AAAAAA", wheels / "entry.part-BBBBBB", wheels / "else.part-CCCCCC"
    for folder in (stale, running, another):
        folder.mkdir(parents=True)
        (folder / "half.whl").write_text("half\n")
    day_ago = time.time() - 25 * 3600
    for folder in (stale, another):
        os.utime(folder, (day_ago, day_ago))
    assert _run(tmp_path, f'cache_entry "$C/w/entry" {FILL}').returncode == 0
    assert not stale.exists()  # a day untouched: no set-up is filling it
    assert running.exists() and another.exists()  # one being filled now; another entry's, swept by its own turn
    assert (wheels / "entry" / "horovod.whl").exists()
