"""The fifth hostile pass, one test per class of what went wrong (numbered as the pass found them): a crafted line
that hung every command reading NCCL logs; a vendor's results dropped as "copies"; a model file edited between runs
paired with the old one; two runs in one NCCL log read as one; an image name read as a runtime option; a clean-up
that deleted another checkout's image; odd but real input that crashed; a failed launch's reason taken from the
wrapper; unguarded values. Each gives one clear line or the right result, and nothing measured is lost."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest

from hvdbench.suite.core.nccl_log import MAX_LINE, parse_nccl_log, parse_nccl_runs, read_nccl_log, read_nccl_runs

FIXTURES = Path(__file__).parent / "fixtures" / "nccl"
PREFIX = "h1:101:102 [0] NCCL INFO "


def _fast(seconds: float, call: object, *args: object) -> object:
    """``call(*args)`` and check it ended within ``seconds`` (the crafted lines took minutes to forever before)."""
    started = time.perf_counter()
    result = call(*args)  # type: ignore[operator]
    assert time.perf_counter() - started < seconds
    return result


# 1. a crafted line stopped report, compare, accept, project and nccl-log (backtracking patterns)
@pytest.mark.bad_input
@pytest.mark.parametrize("line", [
    PREFIX + "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB" + "/0" * 60 + "/ x",  # exponential: NET path
    PREFIX + "Channel 00/0 : 0[0] -> 1[0] [send] via " + "a " * 100_000 + "b",  # quadratic: via ... at line end
    PREFIX + "Using network " + " a" * 100_000 + "b",
    PREFIX + "NET/Plugin : Loaded net plugin " + "x (v1" * 30_000 + ")",
    "x" * 3_000_000,
])
def test_class_1_a_crafted_line_is_read_in_linear_time(line: str) -> None:
    fabric = _fast(2.0, parse_nccl_log, [line, PREFIX + "NCCL version 2.21.5+cuda12.4"])
    assert fabric.nccl_version == "2.21.5+cuda12.4"  # the rest of the log still read


@pytest.mark.bad_input
def test_class_1_a_log_of_one_huge_line_is_read_capped(tmp_path: Path) -> None:
    path = tmp_path / "nccl-rank-0.log"
    path.write_text(PREFIX + "Using network IB" + " pad" * 2_000_000 + "\n" + PREFIX + "NCCL version 2.19.3\n")
    fabric = _fast(5.0, read_nccl_log, path)
    assert fabric.nccl_version == "2.19.3" and fabric.network is not None and fabric.network.startswith("IB pad")
    assert len(fabric.network) < MAX_LINE <= 8192  # the line read up to the cap, never whole


# 6. two runs in one NCCL log read as one: one run's version, another's network and NICs
@pytest.mark.bad_input
def test_class_6_two_runs_in_one_log_are_read_run_by_run(tmp_path: Path) -> None:
    plugin = (FIXTURES / "plugin-ibext-v8-gdrdma-h100-nccl2.21.5.txt").read_text()  # NCCL 2.21.5, IBext_v8
    first = "\n".join(PREFIX.replace("101", "7") + text for text in (
        "NCCL version 2.18.1+cuda12.1", "NET/IB : Using [0]mlx5_4:1/IB ; OOB eth0:10.0.0.1<0>",
        "Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0", "comm 0x1 rank 0 nranks 16 Init COMPLETE"))
    path = tmp_path / "job.out"
    path.write_text(first + "\n" + plugin)
    runs = read_nccl_runs(path)
    alone = read_nccl_log(FIXTURES / "plugin-ibext-v8-gdrdma-h100-nccl2.21.5.txt")
    assert [(r.nccl_version, r.network) for r in runs] == [("2.18.1+cuda12.1", "Socket"),
                                                           (alone.nccl_version, alone.network)]
    assert runs[1].devices == alone.devices  # NIC names from its own run's device list
    last = read_nccl_log(path)
    assert last.network == alone.network and last.warnings[0].startswith("the log holds 2 runs")


@pytest.mark.bad_input
def test_class_6_channels_of_one_run_that_disagree_are_said() -> None:
    lines = [PREFIX + "NCCL version 2.21.5+cuda12.4"]
    lines += [PREFIX + f"Channel {i:02d}/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA" for i in range(5)]
    lines += [PREFIX + f"Channel {i:02d}/0 : 0[0] -> 8[0] [send] via NET/Socket/0" for i in range(5, 9)]
    [run] = parse_nccl_runs(lines)
    assert run.network == "IB" and "channels disagree: 5 over IB, 4 over Socket (reported: IB, the most)" in \
        run.warnings


def test_class_6_the_command_prints_each_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hvdbench.cli import main

    path = tmp_path / "job.out"
    path.write_text((FIXTURES / "ib-gdrdma-h20-2node-cumem.txt").read_text() * 2)  # nccl-tests twice
    assert main(["nccl-log", str(path)]) == 0
    out = capsys.readouterr().out
    assert "2 runs (NCCL started 2 times), each read on its own" in out and "run 2 of 2:" in out


# 2. two roots whose runs kept the default --system: B's runs dropped as "copies", no decision, exit 0
@pytest.mark.bad_input
def test_class_2_two_roots_with_the_same_run_ids_are_refused_never_dropped(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from conftest import write_run
    from hvdbench.cli import main
    from hvdbench.suite.core.spec import RunSpec

    for root, step in (("a", 0.1), ("b", 0.2)):  # two vendors, both "local"
        write_run(tmp_path / root, RunSpec(benchmark="cifar10", args=("--model", "resnet20")), [[step] * 12])
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "both hold run cifar10-np1-r0-" in err and "give each root its own --system" in err
    assert err.count("\n") == 1 and not (tmp_path / "out").exists()
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "a"), "-o", str(tmp_path / "out")]) == 2
    assert "a results root is given twice" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "a" / ".." / "a")]) == 2  # the same, spelled twice
    capsys.readouterr()
    write_run(tmp_path / "c", RunSpec(benchmark="cifar10", args=("--model", "resnet20"), repeat=1), [[0.1] * 12])
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "c"), "-o", str(tmp_path / "out")]) == 2
    assert "the results hold one system (local): nothing to compare" in capsys.readouterr().err


# 3. a model file edited between two runs: the old model's 1-rank run became the new model's baseline
@pytest.mark.bad_input
def test_class_3_a_model_files_content_is_part_of_the_runs_identity(tmp_path: Path) -> None:
    from conftest import write_run
    from hvdbench.analysis.collect import collect
    from hvdbench.analysis.tables.scaling import scaling_table
    from hvdbench.launchers.plan import file_inputs, plan
    from hvdbench.launchers.runs import benchmark_sweep
    from hvdbench.suite.core.catalog import EXAMPLE_MODEL_FILE, get_benchmark

    model = tmp_path / "model.py"
    model.write_text(EXAMPLE_MODEL_FILE.read_text())

    def planned() -> list:
        sweep = benchmark_sweep("custom", ("--model-file", str(model), "--batch-size", "2"), np=(1, 2),
                                launcher="horovodrun", controller=None, repeats=1, system="s", timeout=60.0,
                                devices=None, topology=None)
        return list(plan(sweep).specs)

    before = planned()
    assert before[0].inputs is not None and before[0].inputs[0][1].startswith("sha256:")
    model.write_text(model.read_text() + "\n# a wider model\n")
    after = planned()
    assert {s.id for s in before}.isdisjoint({s.id for s in after})  # no edited model skipped as "complete"
    assert file_inputs(get_benchmark("custom"), ("--batch-size", "2")) is None
    # the old model's 1-rank run and the new model's 2-rank run: never a speedup between them
    write_run(tmp_path / "r", before[0], [[0.1] * 12], env={"parameters": 4420})
    write_run(tmp_path / "r", after[1], [[0.1] * 12, [0.1] * 12], env={"parameters": 4_337_668})
    table = scaling_table(collect([tmp_path / "r"])).set_index("np")
    assert table.loc[2, "baseline"] == "no 1-GPU run" and pd.isna(table.loc[2, "speedup"])
    assert table.loc[1, "inputs"] != table.loc[2, "inputs"]
