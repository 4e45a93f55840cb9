"""``hvdbench import mlperf`` reads a vendor's whole log, not its time alone: each run's throughput (the steady-state
median of its ``tracked_stats``, ``throughput`` or ``imgs_sec`` as the round names it), its global and per-GPU batch,
and from the systems JSON its nodes, accelerators a node, accelerator and network (numbers given as strings taken as
numbers, impossible ones refused). The systems of one submitter that differ only in node count are one system, so
the shared published-scaling fixtures (MLPerf Training v3.0: DGX H100 at 1 to 96 nodes, Dell XE8545 at 2 to 32) read
as scaling tables beside their time to train; the run whose throughput does not fit its siblings' is left out of the
throughput with its reason, and kept for its time to train."""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from hvdbench.cli import main
from hvdbench.readers.mlperf import find_results

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("published")
    with tarfile.open(FIXTURES / "published-scaling.tar.xz") as archive:
        archive.extractall(root, filter="data")
    return root / "published-scaling" / "mlperf-training-v3.0"


@pytest.fixture(scope="module")
def reported(published: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp("vendor")
    out = io_capture(["import", "mlperf", str(published), "-o", str(root / "r"), "--round", "3.0", "--store", "none"])
    assert main(["report", str(root / "r"), "-o", str(root / "out")]) == 0
    return out, root / "out"


def io_capture(argv: list[str]) -> str:
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(argv) == 0
    return buffer.getvalue()


def test_each_run_reads_its_logged_throughput_batch_and_system(published: Path) -> None:
    results = {r.system: r for r in find_results(published, "3.0")}
    one = results["dgxh100_ngc23.04_mxnet"]
    assert one.described is not None and (one.described.nodes, one.described.per_node) == (1, 8)
    assert "8x ConnectX-7 IB NDR 400Gb/s" in one.described.network and one.described.accelerator == \
        "NVIDIA H100-SXM5-80GB"
    run = one.runs[0]
    assert (run.global_batch, run.train_samples, len(run.epochs_logged)) == (3200, 1281167, 35)
    assert run.throughput() == pytest.approx(56052, rel=2e-3)  # images/s, the first (warm-up) epoch left out
    dell = results["2xXE8545x4A100-SXM-40GB"]  # a round that calls the figure imgs_sec
    assert dell.runs[0].throughput() == pytest.approx(22630, rel=2e-3) and dell.runs[0].global_batch == 1632
    bert = results["dgxh100_n8_ngc23.04_pytorch"]  # one figure a run, logged after run_stop
    assert bert.runs[0].throughput() == pytest.approx(53540.8, rel=1e-6) and bert.runs[0].converged


def test_one_family_over_node_counts_reads_as_one_scaling_table(reported: tuple[str, Path]) -> None:
    said, out = reported
    assert "NVIDIA dgxh100 resnet (dgxh100_n96_ngc23.04_mxnet) on 96 node(s): 22.2 s" in said
    table = pd.read_csv(out / "scaling.csv")
    resnet = table[(table["system"] == "NVIDIA dgxh100") & (table["model"] == "resnet")].set_index("nodes")
    assert list(resnet.index) == [1, 8, 64, 96] and list(resnet["np"]) == [8, 64, 512, 768]
    assert list(resnet["batch_size"]) == [400, 50, 40, 42]  # the per-GPU batch shrinks: strong scaling
    assert resnet.loc[96, "throughput"] == pytest.approx(3.43e6, rel=0.01)
    assert resnet.loc[8, "node_speedup"] == pytest.approx(294.7e3 / 56.05e3, rel=0.01)  # against its 1 node
    dell = table[table["system"] == "Dell XE8545x4A100-SXM-40GB"].set_index("nodes")
    assert list(dell.index) == [2, 4, 8, 16, 32] and list(dell["batch_size"]) == [204, 204, 102, 204, 128]
    runs = pd.read_csv(out / "runs.csv")
    assert set(runs.loc[runs["system"] == "Dell XE8545x4A100-SXM-40GB", "host_network"]) == \
        {"2x ConnectX-6 IB HDR 200Gb/Sec"}
    quality = pd.read_csv(out / "quality.csv")
    scored = quality[(quality["system"] == "NVIDIA dgxh100") & (quality["model"] == "resnet")].set_index("np")
    assert scored.loc[768, "score_s"] == pytest.approx(22.16, abs=0.01) and scored.loc[8, "converged"] == 4
    assert not quality[quality["system"].str.startswith("Dell")]["valid"].any()  # 2 result files a folder, of 5


def test_the_run_that_does_not_fit_its_siblings_is_left_out_of_the_throughput(reported: tuple[str, Path]) -> None:
    said, out = reported
    [line] = [ln for ln in said.splitlines() if "throughput left out" in ln]
    assert "result_0.txt: 32.0 s to train (converged)" in line and "2.48x its 4 siblings' median" in line
    runs = pd.read_csv(out / "runs.csv")
    [left] = runs[runs["left_out"].notna()].to_dict("records")
    assert left["np"] == 512 and "kept for its time to train" in left["left_out"]
    table = pd.read_csv(out / "scaling.csv")
    row = table[(table["np"] == 512) & (table["model"] == "resnet")].iloc[0]
    assert row["repeats"] == 4 and left["run_id"] not in row["runs"]
    assert pd.read_csv(out / "quality.csv").query("np == 512 and model == 'resnet'")["runs"].iloc[0] == 5
    page = (out / "report.md").read_text()
    assert "does not fit its siblings" in page[page.index("## Runs left out"):]


@pytest.mark.parametrize("nodes, said", [("0", "number_of_nodes '0' is not a count of 1 to 65,536"),
                                         ("eight", "number_of_nodes 'eight' is not a count"),
                                         ("-2", "number_of_nodes '-2' is not a count"),
                                         ("1e9", "number_of_nodes '1e9' is not a count")])
def test_a_system_description_with_an_impossible_count_is_refused(published: Path, tmp_path: Path, nodes: str,
                                                                   said: str,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "NVIDIA"
    shutil.copytree(published / "NVIDIA" / "results" / "dgxh100_ngc23.04_mxnet",
                    folder / "results" / "dgxh100_ngc23.04_mxnet")
    (folder / "systems").mkdir()
    data = json.loads((published / "NVIDIA" / "systems" / "dgxh100_ngc23.04_mxnet.json").read_text())
    (folder / "systems" / "dgxh100_ngc23.04_mxnet.json").write_text(json.dumps({**data, "number_of_nodes": nodes}))
    assert main(["import", "mlperf", str(folder), "-o", str(tmp_path / "r"), "--store", "none"]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1 and not (tmp_path / "r").exists()
    (folder / "systems" / "dgxh100_ngc23.04_mxnet.json").write_text(json.dumps({**data, "number_of_nodes": " 2 "}))
    assert main(["import", "mlperf", str(folder), "-o", str(tmp_path / "r"), "--store", "none"]) == 0
    assert "on 16 accelerator(s)" in capsys.readouterr().out  # " 2 " read as 2 nodes of 8
