"""Files and values a results tree or a sweep can hold that once crashed, hung or slipped through: only
regular files are read (a FIFO or /dev/zero as a rank log, status.json or run.json is named and left
unread); a line nested beyond reason is one malformed line; a peak table of the wrong shape or of absurd
figures, a collective record of 10^21 bytes and a status.json of the wrong types are one line each; a full
disk leaves no half-written status or report; retries, SLURM directives that defeat hvdbench's own, a GRES
type with a count, a flag given twice, and GPU ids such as -1 or 0,0 are refused in one line; text from a
run's files reaches the terminal with its control characters shown, and CSV cells cannot run."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest

from conftest import hvdbench_exe, write_run
from hvdbench.analysis.collect import collect
from hvdbench.analysis.document import csv_safe
from hvdbench.core.errors import UsageError, WriteError
from hvdbench.core.gpu_choice import choose_gpu
from hvdbench.core.records import RecordWriter, rank_log_name
from hvdbench.core.spec import RunSpec, RunStatus

pytestmark = pytest.mark.bad_input


def _hvdbench(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([hvdbench_exe(), *argv], capture_output=True, text=True, timeout=60, cwd=cwd)


@pytest.mark.slow  # starts hvdbench
@pytest.mark.parametrize("name, make", [
    ("rank-0.jsonl", "fifo"), ("rank-0.jsonl", "/dev/zero"), ("status.json", "fifo"), ("status.json", "/dev/zero"),
    ("run.json", "fifo"),
])
def test_only_regular_files_are_read(tmp_path: Path, name: str, make: str) -> None:
    run = write_run(tmp_path / "r", RunSpec(benchmark="cifar10", np=1), [[0.1] * 25])
    write_run(tmp_path / "r", RunSpec(benchmark="cifar10", np=2), [[0.1] * 25] * 2)  # a good run beside it
    (run / name).unlink(missing_ok=True)
    if make == "fifo":
        os.mkfifo(run / name)
    else:
        (run / name).symlink_to(make)
    for argv in (["report", "r", "-o", "out"], ["status", "r"]):
        proc = _hvdbench(*argv, cwd=tmp_path)  # within the timeout: nothing blocks on the FIFO
        assert proc.returncode in (0, 1, 2) and "internal error" not in proc.stderr, proc.stderr
    if name != "status.json":
        report = (tmp_path / "out" / "report.md").read_text()
        assert "not a regular file" in report or "a FIFO" in report, report[-2000:]


def test_a_line_nested_beyond_reason_is_one_malformed_line(tmp_path: Path) -> None:
    run = write_run(tmp_path, RunSpec(benchmark="cifar10", np=1), [[0.1] * 25])
    with open(run / "rank-0.jsonl", "a") as handle:
        handle.write('{"hvdbench":1,"kind":"telemetry","rank":0,"local_rank":0,"size":1,"note":'
                     + "[" * 50_000 + "]" * 50_000 + "}\n")
    collection = collect([tmp_path])
    assert collection.runs["status"].tolist() == ["ok"] and collection.file_issues[0].malformed == 1


@pytest.mark.parametrize("text, problem", [
    ("device = 5\n", "expected [[device]] tables"), ("title = 'mine'\n", "TFLOP/s per precision), got none"),
    ("device = [[1, 2]]\n", "device[0]: expected a table"),
    ("[[device]]\nname = 'x'\nfp32 = 1e9\n", "is beyond any device"),
    ("[[device]]\nname = 'x'\nmatch = [['a']]\n", "match must be a non-empty list"),
])
def test_a_peak_table_of_the_wrong_shape_is_one_line(tmp_path: Path, text: str, problem: str) -> None:
    from hvdbench.analysis.tables.efficiency import load_peaks
    from hvdbench.core.errors import ReportError

    (tmp_path / "peaks.toml").write_text(text)
    with pytest.raises(ReportError) as err:
        load_peaks(tmp_path / "peaks.toml")
    assert problem in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("nbytes, times", [(10**21, [0.1]), (0, [0.1]), (1024, [-1.0]), (1024, [float("nan")])])
def test_a_collective_record_that_cannot_be_true_makes_its_run_inconsistent(tmp_path: Path, nbytes: int,
                                                                            times: list[float]) -> None:
    spec = RunSpec(benchmark="collectives", np=1)
    spec.write(tmp_path / spec.id)
    with RecordWriter(tmp_path / spec.id / rank_log_name(0), rank=0, local_rank=0, size=1) as w:
        w.write("env", benchmark="collectives", unit="GB/s")
        w.write("comm", op="allreduce", backend="horovod", dtype="fp32", bytes=nbytes, elements=1, times=times,
                correct=True)
        w.write("summary", unit="GB/s", cases=1)
    runs = collect([tmp_path]).runs
    assert runs["status"].tolist() == ["inconsistent"] and "allreduce record" in runs["reason"].iloc[0]


@pytest.mark.parametrize("body", [{"status": 5, "seconds": "x"}, {"status": "ok"}, [1, 2], "no json"])
def test_a_status_json_of_the_wrong_types_is_read_as_none(tmp_path: Path, body: Any) -> None:
    (tmp_path / "status.json").write_text(body if isinstance(body, str) else json.dumps(body))
    assert RunStatus.read(tmp_path) is None


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs, filled: every write there fails with ENOSPC, as on a full disk."""
    where = tmp_path / "full"
    where.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(where)],
                                           capture_output=True).returncode != 0:
        pytest.skip("a full disk is simulated with a small tmpfs, which needs root")
    try:
        with open(where / "filler", "wb") as handle:
            try:
                handle.write(b"\0" * 128 * 1024)
            except OSError:
                pass
        (where / "run").mkdir(exist_ok=True)
        yield where
    finally:
        subprocess.run(["umount", str(where)], capture_output=True)


def test_a_full_disk_leaves_no_half_written_status(full_disk: Path) -> None:
    with pytest.raises(WriteError) as err:
        RunStatus("ok", 0, 1.0, "x" * 10_000).write(full_disk / "run")
    assert "cannot write" in str(err.value) and "No space left" in str(err.value)
    assert not list((full_disk / "run").iterdir())


@pytest.mark.slow  # starts hvdbench
def test_a_full_disk_leaves_no_partial_report(tmp_path: Path, full_disk: Path) -> None:
    write_run(tmp_path / "r", RunSpec(benchmark="cifar10", np=1), [[0.1] * 25])
    proc = _hvdbench("report", "r", "-o", str(full_disk / "report"), cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "cannot write the report into" in lines[0], proc.stderr
    assert sorted(p.name for p in full_disk.iterdir()) == ["filler", "run"]  # no staging, no half a report


@pytest.mark.parametrize("body, problem", [
    ("retries: 1000000000\n", "retries: at most 10"),
    ("slurm: {directives: ['--no-requeue']}\n", "--no-requeue is set by hvdbench"),
    ("slurm: {directives: ['--signal=KILL@1']}\n", "--signal is set by hvdbench"),
    ("slurm: {directives: ['--gpus=8']}\n", "--gpus is set by hvdbench"),
    ("slurm: {gpu_type: 'a100:4'}\n", "is not a GRES type such as a100 (no count)"),
    ("target_ci: 2\nworkloads: [{benchmark: cifar10, args: [--target-ci, '5']}]\n", "--target-ci is given twice"),
    ("axes: {np: [1], batch_size: [32]}\nworkloads: [{benchmark: cifar10, args: [--batch-size, '8']}]\n",
     "--batch-size is given twice"),
])
def test_values_that_defeat_the_sweep_are_refused_in_one_line(tmp_path: Path, body: str, problem: str) -> None:
    from hvdbench.launchers.plan import plan
    from hvdbench.launchers.sweep import SweepError, load_sweep

    text = body + ("" if "workloads" in body else "workloads: [cifar10]\n") + ("" if "axes" in body else
                                                                               "axes: {np: [1]}\n")
    (tmp_path / "s.yaml").write_text(text)
    with pytest.raises(SweepError) as err:
        plan(load_sweep(tmp_path / "s.yaml"))
    assert problem in str(err.value) and "\n" not in str(err.value), str(err.value)


@pytest.mark.parametrize("env, problem", [
    ({"HVDBENCH_DEVICES": "-1"}, "HVDBENCH_DEVICES='-1': expected distinct GPU ids"),
    ({"HVDBENCH_DEVICES": "0,0"}, "HVDBENCH_DEVICES='0,0': expected distinct GPU ids"),
    ({"SLURM_STEP_GPUS": "0,0"}, "SLURM_STEP_GPUS='0,0'"),
    ({"SLURM_JOB_GPUS": "GPU-5f1a0d6e-0000-4000-8000-000000000000"}, "SLURM_JOB_GPUS='GPU-5f1a0d6e"),
])
def test_gpu_ids_no_placement_or_grant_can_hold_are_refused(env: dict[str, str], problem: str) -> None:
    with pytest.raises(UsageError, match="expected distinct GPU ids") as err:
        choose_gpu(0, env, count=8)
    assert problem in str(err.value)


@pytest.mark.parametrize("visible, index, physical", [
    ("GPU-5f1a0d6e-0000-4000-8000-000000000000", 0, None),  # a UUID: CUDA's device 0, found by NVML by UUID
    ("MIG-1d2c3b4a-0000-0000-0000-000000000000", 0, None), ("0,0", 0, 0), ("3", 0, 3),
])
def test_visible_devices_as_the_driver_reads_them(visible: str, index: int, physical: int | None) -> None:
    choice = choose_gpu(0, {"CUDA_VISIBLE_DEVICES": visible}, count=1)
    assert (choice.cuda_index, choice.physical) == (index, physical)


def test_text_from_a_run_reaches_the_terminal_with_its_control_characters_shown(tmp_path: Path) -> None:
    import json

    hostile = "sys\x1b]2;pwned\x07\x1b[31m\rgone"
    run = write_run(tmp_path / "r", RunSpec(benchmark="cifar10", np=1, system="sys"), [[0.1] * 25])
    payload = json.loads((run / "run.json").read_text())  # a run.json edited by hand: RunSpec refuses such a label
    payload["spec"]["system"] = hostile
    (run / "run.json").write_text(json.dumps(payload))
    RunStatus("failed", 1, 1.0, "rank 0: \x1b[2J cleared").write(run)
    for argv in (["status", "r"], ["report", "r", "-o", "out"]):
        proc = subprocess.run([hvdbench_exe(), *argv], capture_output=True, cwd=tmp_path, timeout=120)
        shown = proc.stdout + proc.stderr
        assert b"\x1b" not in shown and b"\r" not in shown and b"\x07" not in shown, shown[-500:]
    assert "\\x1b[2J cleared" in subprocess.run([hvdbench_exe(), "status", "r"], capture_output=True, text=True,
                                                cwd=tmp_path).stdout


@pytest.mark.parametrize("cell, safe", [
    ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"), ("+1+2", "'+1+2"), ("@SUM(A1)", "'@SUM(A1)"),
    ("-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"), ("\tx", "\\tx"),  # a tab: shown as its escape
    ("--model resnet20 --batch-size 32", "--model resnet20 --batch-size 32"), ("-", "-"), ("ok", "ok"),
])
def test_csv_cells_cannot_run_in_a_spreadsheet(cell: str, safe: str) -> None:
    import pandas as pd

    table = pd.DataFrame({"text": pd.array([cell], dtype="string"), "number": [-1.5]})
    out = csv_safe(table)
    assert out["text"].iloc[0] == safe and out["number"].iloc[0] == -1.5
