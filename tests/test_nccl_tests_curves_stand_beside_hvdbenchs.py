"""nccl-tests' own output taken into a results root (``hvdbench import nccl-tests``): its curve stands in the
report's collectives table with nccl-tests' busbw, accept criteria judge it on whole runs (one imported run is not
judged, three are), and what is not nccl-tests output, or was imported already, is one line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from hvdbench.cli import main
from hvdbench.core.errors import UsageError
from hvdbench.readers.nccl_tests import parse

FIXTURE = Path(__file__).parent / "fixtures" / "nccl-tests" / "all_reduce_perf-2node.txt"
BACKEND = "[[criterion]]\nname='allreduce 1G'\nmetric='busbw'\nbackend='nccl-tests'\nmin=70\n"


def test_its_table_is_read_as_nccl_tests_prints_it() -> None:
    """The program, the ranks on their hosts, the iterations, NCCL's version from the library code, and per size the
    out-of-place time, algbw, busbw and wrong elements; a type hvdbench does not tabulate is left out and said."""
    text = FIXTURE.read_text().replace("        1024           256     float", "        1024           256      int8")
    [test] = parse(text)
    assert (test.program, test.op, test.iters, test.nccl, test.hosts) == \
        ("all_reduce_perf", "allreduce", 20, "2.27.3", ["node01", "node02"])
    assert [r.bytes for r in test.rows] == [8, 1048576, 134217728, 1073741824] and test.rows[-1].busbw == 75.06
    assert test.left == ["1024 bytes: type 'int8' (hvdbench tabulates float, half, bfloat16)"]
    assert test.ranks[0][3] == "NVIDIA H100 80GB HBM3" and test.avg_busbw == pytest.approx(31.6734)


def _imported(tmp_path: Path, runs: int) -> Path:
    root = tmp_path / "r"
    tmp_path.mkdir(exist_ok=True)
    for i in range(runs):  # the same test run again: its largest size a little slower each time
        copy = tmp_path / f"all_reduce_perf-{i}.txt"
        copy.write_text(FIXTURE.read_text().replace("21456   50.04", f"{21456 + 40 * i}   50.04"))
        assert main(["import", "nccl-tests", str(copy), "-o", str(root), "--system", "dgx"]) == 0
    return root


def test_its_curve_stands_in_the_collectives_table_with_its_own_busbw(tmp_path: Path) -> None:
    root = _imported(tmp_path, 1)
    assert main(["report", str(root), "-o", str(tmp_path / "out")]) == 0
    table = pd.read_csv(tmp_path / "out" / "collectives.csv")
    big = table[table["bytes"] == 1 << 30].iloc[0]
    assert big["backend"] == "nccl-tests" and big["path"].startswith("nccl-tests") and big["np"] == 4
    assert big["nodes"] == 2 and big["busbw_gbs"] == pytest.approx(75.06, abs=0.01)  # its print rounds the time
    assert "nccl-tests" in (tmp_path / "out" / "report.md").read_text()


def test_accept_judges_its_curve_on_whole_runs(tmp_path: Path) -> None:
    """One imported run gives one figure, two give two: not judged (exit 4); three runs give an interval: met."""
    criteria = tmp_path / "criteria.toml"
    criteria.write_text(BACKEND)
    one = _imported(tmp_path / "one", 1)
    assert main(["accept", str(criteria), str(one), "-o", str(tmp_path / "o1")]) == 4
    two = _imported(tmp_path / "two", 2)
    assert main(["accept", str(criteria), str(two), "-o", str(tmp_path / "o2")]) == 4
    assert "fewer than 3 runs" in (tmp_path / "o2" / "acceptance.txt").read_text()
    three = _imported(tmp_path / "three", 3)
    assert main(["accept", str(criteria), str(three), "-o", str(tmp_path / "o3")]) == 0


@pytest.mark.bad_input
def test_what_is_no_nccl_tests_output_or_was_taken_already_is_one_line(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    root = _imported(tmp_path, 1)
    again = tmp_path / "all_reduce_perf-0.txt"
    assert main(["import", "nccl-tests", str(again), "-o", str(root)]) == 2
    assert "already imported" in capsys.readouterr().err
    prose = tmp_path / "notes.txt"
    prose.write_text("# nothing here\n1 2 3\n")
    scatter = tmp_path / "reduce_scatter_perf.txt"
    scatter.write_text(FIXTURE.read_text().replace("all_reduce_perf", "reduce_scatter_perf"))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, said in ((prose, "no nccl-tests table in it"), (scatter, "reduce_scatter_perf is not one hvdbench"),
                       (fifo, "not a regular file")):
        assert main(["import", "nccl-tests", str(path), "-o", str(root)]) == 2
        err = capsys.readouterr().err
        assert said in err and err.count("\n") == 1, err
    assert len([p for p in root.iterdir() if p.is_dir()]) == 1  # nothing half-written beside the one run
    with pytest.raises(UsageError):
        parse("")


def test_each_pair_of_nodes_is_its_own_row(tmp_path: Path) -> None:
    """all_reduce_perf between node01-node02 and node03-node04, the second at half the bandwidth (a bad cable): two
    rows, told apart by their hosts, never one averaged row."""
    bad = tmp_path / "all_reduce_perf-34.txt"
    bad.write_text(FIXTURE.read_text().replace("node01", "node03").replace("node02", "node04")
                   .replace("21456   50.04   75.06", "42912   25.02   37.53"))
    root = tmp_path / "r"
    assert main(["import", "nccl-tests", str(FIXTURE), str(bad), "-o", str(root)]) == 0
    assert main(["report", str(root), "-o", str(tmp_path / "out")]) == 0
    table = pd.read_csv(tmp_path / "out" / "collectives.csv")
    big = table[table["bytes"] == 1 << 30].set_index("placement")["busbw_gbs"]
    assert big["hosts node01,node02"] == pytest.approx(75.06, abs=0.01)
    assert big["hosts node03,node04"] == pytest.approx(37.53, abs=0.01)


def test_every_pair_of_nodes_and_all_of_them_are_run_and_a_slow_pair_is_flagged(tmp_path: Path) -> None:
    """Three nodes: three pairs and all three, each one srun step; node02-node03 at half the bus bandwidth is flagged
    against the best its nodes reach with the third, the others not; every output is kept and taken in as a run; a
    step that fails is said in one line."""
    import subprocess

    from hvdbench.launchers.fabric_pairs import check_pairs, steps

    plan = steps(["node01", "node02", "node03"], 2, "all_reduce_perf", ["-b", "1M"], "pmix")
    assert sorted(s.label for s in plan) == ["all", "node01-node02", "node01-node03", "node02-node03"]
    assert [s.round for s in plan] == [0, 1, 2, 3] and plan[-1].label == "all"  # three nodes: one pair a round
    first = next(s for s in plan if s.label == "node01-node02")
    assert first.argv[:5] == ("srun", "--nodes=2", "--ntasks-per-node=2", "--nodelist=node01,node02", "--mpi=pmix")

    def srun(argv: list[str], stdout: Any, **_: Any) -> subprocess.CompletedProcess[str]:
        nodes = argv[3].split("=", 1)[1].split(",")
        if len(nodes) == 3:
            return subprocess.CompletedProcess(argv, 1, None, "srun: error: Unable to allocate resources\n")
        text = FIXTURE.read_text().replace("node01", "@A").replace("node02", "@B")
        text = text.replace("@A", nodes[0]).replace("@B", nodes[1])
        if nodes == ["node02", "node03"]:
            text = text.replace("21456   50.04   75.06", "42912   25.02   37.53")
        stdout.write(text)
        return subprocess.CompletedProcess(argv, 0, None, "")

    judged, failed = check_pairs(plan, tmp_path / "r", "cluster", 60, srun)
    said = {where: line for where, _, line in judged}
    assert said["hosts node02,node03"].startswith("flagged low: 50% of the best any pair reaches (75.1 GB/s)")
    assert not said["hosts node01,node02"].startswith("flagged")
    assert failed == ["all: exit 1: srun: error: Unable to allocate resources"]
    assert len(list((tmp_path / "r" / "nccl-tests").glob("*.txt"))) == 4
    assert len([p for p in (tmp_path / "r").iterdir() if p.name.startswith("collectives-")]) == 3
    with pytest.raises(UsageError, match="needs 2 or more hosts"):
        steps(["node01"], 1, "all_reduce_perf", [], "pmix")


def test_disjoint_pairs_run_side_by_side_in_rounds_and_in_the_image_where_given(tmp_path: Path) -> None:
    """64 nodes: 2,016 pairs in 63 rounds of 32 disjoint pairs (not 2,016 steps one after another), each node once a
    round; --serial keeps one pair a step; each round's steps run at once (a stand-in srun that sleeps shows the
    round takes one step's time); a pyxis image adds srun's --container-* flags, Apptainer wraps the program."""
    import subprocess
    import threading
    import time

    from hvdbench.core.containers import Container
    from hvdbench.launchers.fabric_pairs import rounds, run_steps, steps

    hosts = [f"gpu{i:02d}" for i in range(64)]
    plan = steps(hosts, 8, "all_reduce_perf", [], "pmix")
    pairs = [s for s in plan if s.label != "all"]
    assert len(pairs) == 2016 and max(s.round for s in pairs) == 62
    for r in range(63):
        nodes = [n for s in pairs if s.round == r for n in s.nodes]
        assert len(nodes) == 64 and len(set(nodes)) == 64
    assert len(rounds(hosts[:5])) == 5 and {s.round for s in steps(hosts[:5], 1, "p", [], "pmix", serial=True)} == \
        set(range(11))
    with pytest.raises(UsageError, match="more than 2,016 one at a time"):
        steps(hosts + ["gpu64"], 8, "p", [], "pmix", serial=True)
    live, most = [0], [0]
    lock = threading.Lock()

    def srun(argv: list[str], stdout: Any, **_: Any) -> subprocess.CompletedProcess[str]:
        with lock:
            live[0] += 1
            most[0] = max(most[0], live[0])
        time.sleep(0.2)
        with lock:
            live[0] -= 1
        return subprocess.CompletedProcess(argv, 0, None, "")

    four = steps(hosts[:4], 1, "p", [], "pmix")
    started = time.monotonic()
    assert all(isinstance(got, Path) for _, got in run_steps(four, tmp_path / "r", 10, srun))
    assert most[0] == 2 and time.monotonic() - started < 0.2 * 4 + 0.5  # 3 rounds of 2 pairs, then all four
    pyxis = steps(hosts[:2], 8, "/opt/nccl-tests/all_reduce_perf", ["-g", "1"], "pmix",
                  container=Container("nvcr.io#nvidia/pytorch:24.05-py3", "pyxis"), root=tmp_path)[0].argv
    assert "--container-image=nvcr.io#nvidia/pytorch:24.05-py3" in pyxis
    assert pyxis[-3:] == ("/opt/nccl-tests/all_reduce_perf", "-g", "1")
    wrapped = steps(hosts[:2], 8, "all_reduce_perf", [], "pmix", container=Container("/i.sif", "apptainer"),
                    root=tmp_path)[0].argv
    assert wrapped[wrapped.index("apptainer"):][:3] == ("apptainer", "exec", "--nv") and wrapped[-2:] == (
        "/i.sif", "all_reduce_perf")


def _pairs(tmp_path: Path, figures: dict[tuple[str, str], str], expected: float | None = None) -> dict[str, str]:
    """Each pair's nccl-tests output with its largest size's line as given (time, algbw, busbw), judged."""
    import subprocess

    from hvdbench.launchers.fabric_pairs import check_pairs, steps

    hosts = sorted({n for pair in figures for n in pair})
    plan = [s for s in steps(hosts, 2, "all_reduce_perf", [], "pmix") if s.label != "all"]

    def srun(argv: list[str], stdout: Any, **_: Any) -> subprocess.CompletedProcess[str]:
        nodes = tuple(argv[3].split("=", 1)[1].split(","))
        text = FIXTURE.read_text().replace("node01", "@A").replace("node02", "@B")
        stdout.write(text.replace("@A", nodes[0]).replace("@B", nodes[1]).replace("21456   50.04   75.06",
                                                                                  figures[nodes]))
        return subprocess.CompletedProcess(argv, 0, None, "")

    judged, failed = check_pairs(plan, tmp_path / "r", "cluster", 60, srun, expected)
    assert not failed
    return {where.removeprefix("hosts "): said for where, _, said in judged}


GOOD, HALF, DOUBLE = "21456   50.04   75.06", "42912   25.02   37.53", "10728  100.08  150.12"


def test_one_bad_node_of_three_is_flagged_though_it_sets_the_pairs_median(tmp_path: Path) -> None:
    """node03 at half speed with both others: its two pairs are the majority of three (their median is the bad
    figure, which flagged nothing); against the best any pair reaches, both its pairs are low, node03 named, and the
    good pair is not flagged high."""
    said = _pairs(tmp_path, {("node01", "node02"): GOOD, ("node01", "node03"): HALF, ("node02", "node03"): HALF})
    assert said["node01,node02"].startswith("100% of the best any pair reaches (75.1 GB/s)")
    for pair in ("node01,node03", "node02,node03"):
        assert said[pair].startswith("flagged low: 50% of the best any pair reaches (75.1 GB/s)") and said[
            pair].endswith("; node03 low with every other node")
    from hvdbench.core.pair_judging import drained

    assert drained([("", 0.0, line) for line in said.values()]) == ["node03"]  # the one to drain, named once


def _nodes(count: int, bad: set[int], fast: str = GOOD, slow: str = HALF) -> dict[tuple[str, str], str]:
    names = [f"node{i:02d}" for i in range(1, count + 1)]
    return {(a, b): slow if i + 1 in bad or j + 1 in bad else fast
            for i, a in enumerate(names) for j, b in enumerate(names) if i < j}


@pytest.mark.parametrize("count, bad", [(4, {3, 4}), (5, {3, 4, 5}), (4, {4})])
def test_a_lone_fast_pair_among_slow_ones_means_the_others_are_slow(tmp_path: Path, count: int, bad: set[int]) -> None:
    """Two bad nodes of four, three of five: the one healthy pair is no "high" outlier, every pair of a bad node is
    flagged low and each bad node named; with the link's expected figure the healthy pair meets it and is never high."""
    said = _pairs(tmp_path / "a", _nodes(count, bad))
    named = {f"node{i:02d}" for i in bad}
    for pair, line in said.items():
        of_bad = bool(set(pair.split(",")) & named)
        assert line.startswith("flagged low: 50% of the best any pair reaches") == of_bad, (pair, line)
        assert not line.startswith("flagged high")
        assert all(f"{n} low with every other node" in line for n in set(pair.split(",")) & named)
    if len(bad) > 1:
        assert "the only pair at this pace: the others are judged slow against it" in said["node01,node02"]
    expected = _pairs(tmp_path / "b", _nodes(count, bad), expected=75.0)
    assert expected["node01,node02"].startswith("100% of the 75.0 GB/s expected")
    assert all(expected[p].startswith("flagged low: 50% of the 75.0 GB/s expected") for p in expected
               if set(p.split(",")) & named)


def test_only_a_pair_faster_than_the_link_can_be_is_flagged_high(tmp_path: Path) -> None:
    """Four nodes, one pair at twice the others: without the link's figure, the others are the slow ones (said so);
    with it (75 GB/s), the double pair is faster than the link can be and flagged high, the rest stand."""
    figures = {**_nodes(4, set()), ("node01", "node02"): DOUBLE}
    said = _pairs(tmp_path / "a", figures)
    assert said["node01,node02"].endswith("the others are judged slow against it (--expect-busbw, the link's nominal "
                                          "figure, tells a slow fabric from one fast path)")
    expected = _pairs(tmp_path / "b", figures, expected=75.0)
    assert expected["node01,node02"].startswith("flagged high: 200% of the 75.0 GB/s expected")
    assert not any(line.startswith("flagged") for pair, line in expected.items() if pair != "node01,node02")


def test_two_nodes_are_too_few_to_compare_unless_the_link_is_named(tmp_path: Path) -> None:
    """One pair has nothing to be set against: said plainly; with the link's expected figure, judged against it."""
    assert _pairs(tmp_path / "a", {("node01", "node02"): HALF})["node01,node02"].startswith(
        "too few to compare: no other pair of these nodes (give --expect-busbw")
    said = _pairs(tmp_path / "b", {("node01", "node02"): HALF}, expected=75.0)["node01,node02"]
    assert said.startswith("flagged low: 50% of the 75.0 GB/s expected")


def test_the_report_of_a_pairs_check_judges_them_lists_every_node_and_says_what_to_drain(tmp_path: Path,
                                                                                         capsys: Any) -> None:
    """Four nodes, node04 at half speed with every other: the report of the fabric command's results carries the same
    verdicts, names node04 in its summary with the drain command, and its System under test lists all four nodes
    (node04 is never first in a pair, and the first is all its record's host names)."""
    said = _pairs(tmp_path, _nodes(4, {4}))
    out = tmp_path / "report"
    assert main(["report", str(tmp_path / "r"), "-o", str(out)]) == 0
    text = (out / "report.md").read_text(encoding="utf-8")
    section = text[text.index("## Fabric between nodes"):]
    for pair, line in said.items():
        assert f"| {pair} |" in section and line.split(";")[0] in section
    assert "Fabric: node04 is low with every other node in nccl-tests" in text
    assert "scontrol update NodeName=node04 State=DRAIN" in text
    system = text[text.index("## System under test"):]
    assert "| hosts | 4: node01, node02, node03, node04 |" in system.replace("  ", " ")
    table = pd.read_csv(out / "fabric_pairs.csv")
    assert len(table) == 6 and table["verdict"].str.startswith("flagged low").sum() == 3
