"""Mistaken input and odd tool output of the sixth pass, each handled at its root: a size column with a superscript
digit, a damaged time that would read as petabytes a second, a scheduler state without a word here, a pair's output
naming other nodes than its step, a results folder relative to where qsub does not run, loader_workers 0, a compare
whose one root could not be read, a costs file that prices only one side, a bare NCCL_ knob, a port rate of 1e400."""

from __future__ import annotations

import json
import math
import os
import subprocess
import zlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from conftest import write_run
from hvdbench.analysis.collect import collect
from hvdbench.analysis.report.build import Judging, build
from hvdbench.cli import main
from hvdbench.core.hca import parse_hca_ports
from hvdbench.readers.nccl_tests import parse
from hvdbench.core.spec import RunSpec, RunStatus
from hvdbench.launchers.knobs import name_problem
from hvdbench.launchers.pbs import PbsExecutor, PbsOptions
from hvdbench.launchers.queues import refresh

FIXTURE = Path(__file__).parent / "fixtures" / "nccl-tests" / "all_reduce_perf-2node.txt"
LAST = "  1073741824     268435456     float     sum      -1    21456   50.04   75.06"


@pytest.mark.bad_input
@pytest.mark.parametrize("row, left", [
    ("  1073741824     268435456     float     sum      -1   0.0001   50.04   75.06", "a damaged row"),
    ("  10737418²4     268435456     float     sum      -1    21456   50.04   75.06", None),
])
def test_an_nccl_tests_row_that_cannot_be_so_is_left_out_never_read(row: str, left: str | None) -> None:
    text = FIXTURE.read_text()
    assert LAST in text
    [test] = parse(text.replace(LAST, row))
    assert [r.bytes for r in test.rows] == [8, 1024, 1048576, 134217728]  # the damaged row is not among them
    assert max(r.busbw for r in test.rows) < 100
    if left:
        assert any(left in line for line in test.left), test.left


@pytest.mark.bad_input
@pytest.mark.parametrize("queue", ["slurm", "pbs"])
def test_a_scheduler_state_without_a_word_here_is_never_taken_for_an_end(tmp_path: Path, queue: str) -> None:
    job = "77" if queue == "slurm" else "77.s"

    def tool(argv: list[str], **_: Any) -> SimpleNamespace:
        if argv[0] == "squeue":
            return SimpleNamespace(returncode=0, stdout=f"{job}|SPECIAL_EXIT|None\n", stderr="")
        return SimpleNamespace(returncode=0, stdout=json.dumps({"Jobs": {job: {"job_state": "Z"}}}), stderr="")

    run_dir = tmp_path / "run"
    RunSpec(benchmark="mlp", np=1).write(run_dir)
    RunStatus("submitted", None, 0.0, "", job_id=job).write(run_dir)
    [seen] = refresh(tmp_path, tool).values()
    assert seen.status == "submitted" and "which hvdbench does not know: left as it was" in seen.message
    assert RunStatus.read(run_dir).status == "submitted"  # nothing written


@pytest.mark.bad_input
def test_a_pairs_output_naming_other_nodes_than_its_step_is_not_taken(tmp_path: Path) -> None:
    from hvdbench.launchers.fabric_pairs import check_pairs, steps

    def srun(argv: list[str], stdout: Any, **_: Any) -> subprocess.CompletedProcess[str]:
        stdout.write(FIXTURE.read_text())  # node01 and node02, whatever the step's nodes
        return subprocess.CompletedProcess(argv, 0, None, "")

    plan = steps(["node07", "node08"], 2, "all_reduce_perf", [], "pmix")
    judged, failed = check_pairs(plan, tmp_path / "r", "cluster", 60, srun)
    assert judged == [] and len(failed) == 1
    assert "its ranks name nodes node01, node02, its step ran on node07, node08: not this step's output" in failed[0]


@pytest.mark.bad_input
def test_a_relative_results_folder_reaches_qsub_as_a_path_it_can_open(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """qsub runs in the results folder: the script's path it is given must not be relative to where hvdbench runs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "qsub").write_text('#!/bin/sh\n[ -f "$1" ] || { echo "qsub: script file cannot be loaded" >&2; '
                                  'exit 1; }\necho 7.standin\n')
    (bin_dir / "qsub").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.chdir(tmp_path)
    executor = PbsExecutor(Path("results/pbs"), PbsOptions(gpus=False), name="s", report=lambda line: None)
    [status] = executor.execute([RunSpec(benchmark="mlp", np=1, launcher="mpirun", controller="mpi")])
    assert status.status == "submitted" and status.job_id == "7.standin"


@pytest.mark.bad_input
def test_the_small_refusals_and_readings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hvdbench.launchers.sweep import load_sweep

    assert name_problem("NCCL_") == "NCCL_ is a prefix alone, no variable: name the whole variable (NCCL_...)"
    assert name_problem("NCCL_IB_HCA") is None and name_problem("NCCL_PARAM,") is not None
    [port] = parse_hca_ports("CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n\t\tRate: 1e400\n\t\tLink layer: InfiniBand\n")
    assert port["rate_gbps"] is None  # unknown, never 1 Gb/s
    (tmp_path / "s.yaml").write_text("name: s\nworkloads: [imagenet]\naxes: {np: [1], data: [files], "
                                     "loader_workers: [0, 2]}\n")
    assert dict(load_sweep(tmp_path / "s.yaml").knobs)["loader_workers"] == (0, 2)
    write_run(tmp_path / "a", RunSpec(benchmark="mlp", system="A"), [[0.01] * 30])
    (tmp_path / "b" / "run-1").mkdir(parents=True)
    (tmp_path / "b" / "run-1" / "run.json").write_text("{not json")
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "the results hold one system (A)" in err and "1 run folder(s) could not be read" in err


def test_a_costs_file_that_prices_one_side_says_why_there_is_no_cost_verdict(tmp_path: Path) -> None:
    from hvdbench.analysis.verdicts.costs import load_costs
    from hvdbench.analysis.verdicts.decision import cost_verdict_lines

    for system, step in (("DGX", 0.05), ("L40S", 0.08)):
        for repeat in range(3):
            rng = np.random.default_rng(zlib.crc32(f"{system}{repeat}".encode()))
            write_run(tmp_path / system, RunSpec(benchmark="cifar10", system=system, repeat=repeat),
                      [list(rng.lognormal(math.log(step), 0.02, 30))])
    (tmp_path / "costs.toml").write_text("[systems.DGX]\nhourly_usd = 20.0\ngpus_per_node = 8\n")
    report = build(collect([tmp_path / "DGX", tmp_path / "L40S"]),
                   judging=Judging(baseline="L40S", costs=load_costs(tmp_path / "costs.toml")))
    decided = report.tables["decision"]
    assert decided["cost_finding"].tolist() == ["not judged"]
    [line] = cost_verdict_lines(decided)
    assert line.endswith("not judged: the costs file prices no L40S: no cost per sample to set against the other")
