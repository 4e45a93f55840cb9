"""Hostile and mistaken input that used to hang a rank or grow without bound, each refused in one line naming it or
ended whole: regular files only in a dataset (a FIFO named like a JPEG hung the rank until its timeout; a link read a
file from outside), sizes bounded by what the record says (an imported header's 20,000 GPUs in one process), numbers
bounded by what any machine has (a job of 190 years), and a tool's time limit ending its whole process group."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from hvdbench.core.bounded import run_bounded
from hvdbench.core.datasets import index
from hvdbench.core.errors import UsageError
from hvdbench.readers.nccl_tests import parse
from hvdbench.launchers.sweep import load_sweep

FIXTURE = Path(__file__).parent / "fixtures" / "nccl-tests" / "all_reduce_perf-2node.txt"


def _images(root: Path) -> Path:
    for label in ("n01", "n02"):
        (root / "train" / label).mkdir(parents=True)
        for i in range(2):
            (root / "train" / label / f"{i}.JPEG").write_bytes(b"\xff\xd8jpeg")
    return root


@pytest.mark.bad_input
@pytest.mark.parametrize("plant", ["fifo", "link out", "link in", "folder link"])
def test_a_dataset_is_read_from_its_own_regular_files_only(tmp_path: Path, plant: str) -> None:
    root = _images(tmp_path / "data")
    where = root / "train" / "n01" / "2.JPEG"
    outside = tmp_path / "elsewhere.JPEG"
    outside.write_bytes(b"\xff\xd8secret")
    if plant == "fifo":
        os.mkfifo(where)
    elif plant == "link out":
        where.symlink_to(outside)
    elif plant == "link in":
        where.symlink_to(root / "train" / "n01" / "0.JPEG")  # the same sample read twice
    else:
        (tmp_path / "more").mkdir()
        (root / "train" / "n03").symlink_to(tmp_path / "more")
    with pytest.raises(UsageError) as caught:
        index(root, "imagenet")
    said = str(caught.value)
    assert "\n" not in said and ("not a regular file" in said or "is not followed" in said)
    assert str(root / "train") in said
    assert len(index(_images(tmp_path / "clean"), "imagenet")) == 4


@pytest.mark.bad_input
def test_an_imported_header_cannot_make_thousands_of_ranks() -> None:
    text = FIXTURE.read_text()
    damaged = "\n".join(line for line in text.splitlines() if not line.startswith("#  Rank")).replace(
        "nGpus 1", "nGpus 20000")
    assert "nGpus 20000" in damaged
    with pytest.raises(UsageError, match=r"nThread 1 nGpus 20000: 20,000 GPUs in one process and no '# Rank' line"):
        parse(damaged)
    assert parse(text)  # the output as nccl-tests wrote it


@pytest.mark.bad_input
@pytest.mark.parametrize("block, line, said", [
    ("slurm", "time: 100000000", "at most 366 days"),
    ("slurm", "time: '69350-00:00:00'", "69,350 days: at most 366 days"),
    ("pbs", "time: 100000000", "at most 366 days"),
    ("", "timeout: 1.0e+300", "more than a year"),
])
def test_a_job_longer_than_a_year_is_a_typo(tmp_path: Path, block: str, line: str, said: str) -> None:
    text = "name: s\nworkloads: [cifar10]\naxes: {np: [1]}\n" + (f"{block}:\n  {line}\n" if block else f"{line}\n")
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(UsageError, match=said):
        load_sweep(tmp_path / "s.yaml")


@pytest.mark.bad_input
def test_a_tools_time_limit_ends_its_whole_process_group(tmp_path: Path) -> None:
    """A shell that started a child and waits for it: at the limit, both end (subprocess.run's own timeout leaves the
    child running)."""
    pid_file = tmp_path / "child"
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        run_bounded(["sh", "-c", f"sleep 300 & echo $! > {pid_file}; wait"], timeout=1.0, capture_output=True)
    assert time.monotonic() - started < 30
    child = int(pid_file.read_text())
    for _ in range(50):
        if not Path(f"/proc/{child}").exists() or Path(f"/proc/{child}/stat").read_text().split()[2] == "Z":
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the child {child} outlived its tool's time limit")
    done = run_bounded(["sh", "-c", "echo out; echo err >&2"], timeout=10, capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (0, "out\n", "err\n")
