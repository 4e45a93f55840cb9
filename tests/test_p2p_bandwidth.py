"""Peer-to-peer and host bandwidth: the arithmetic (GB/s from bytes and the median time), the GPU x GPU matrix
beside each pair's link class and the report section, from recorded numbers on any machine; the script
itself says in one line that it needs CUDA where there is none, and measures where there is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from hvdbench.analysis.collect import collect
from hvdbench.analysis.tables.p2p import bandwidth_gbs, host_rows, matrix_rows, p2p_table
from hvdbench.analysis.report.build import build_report
from hvdbench.core.records import RecordWriter, rank_log_name
from hvdbench.core.spec import RunSpec

MIB256 = 256 * 2**20
# Recorded on an 8-GPU PCIe box (GPU0-GPU1 behind one switch, GPU0-GPU4 across sockets), scaled to 3 GPUs.
CASES = [("host", "0", "uni", MIB256, None, [0.0112, 0.0110, 0.0111]), ("0", "host", "uni", MIB256, None, [0.0105] * 3),
         ("host", "1", "uni", MIB256, None, [0.0111] * 3), ("1", "host", "uni", MIB256, None, [0.0106] * 3),
         ("0", "1", "uni", MIB256, "PIX", [0.0110, 0.0109, 0.0111]), ("1", "0", "uni", MIB256, "PIX", [0.0110] * 3),
         ("0", "1", "bi", 2 * MIB256, "PIX", [0.0125] * 3)]


def _write(root: Path) -> Path:
    spec = RunSpec(benchmark="p2p", launcher="external", system="pcie-box")
    run_dir = root / spec.id
    spec.write(run_dir)
    with RecordWriter(run_dir / rank_log_name(0), rank=0, local_rank=0, size=1) as writer:
        writer.write("env", benchmark="p2p", framework="pytorch", model="p2p", unit="GB/s", host="box1")
        for src, dst, mode, nbytes, link, times in CASES:
            writer.write("p2p", src=src, dst=dst, mode=mode, bytes=nbytes, times=times, link=link,
                         peer_access=None if link is None else True)
        writer.write("summary", unit="GB/s", cases=len(CASES))
    return run_dir


def test_bandwidth_is_bytes_over_the_median_iteration(tmp_path: Path) -> None:
    _write(tmp_path)
    table = p2p_table(collect([tmp_path])).set_index(["src", "dst", "mode"])
    assert table.loc[("0", "1", "uni"), "gbs"] == pytest.approx(MIB256 / 0.0110 / 1e9)
    assert table.loc[("host", "0", "uni"), "gbs"] == pytest.approx(MIB256 / 0.0111 / 1e9)
    assert table.loc[("0", "1", "bi"), "gbs"] == pytest.approx(2 * MIB256 / 0.0125 / 1e9)
    assert bandwidth_gbs(1e9, 0.5) == 2.0


def test_the_matrix_sits_beside_the_link_classes_and_reaches_the_report(tmp_path: Path) -> None:
    _write(tmp_path)
    cases = p2p_table(collect([tmp_path]))
    assert matrix_rows(cases, "uni") == (["from ↓ to →", "GPU0", "GPU1"],
                                         [["GPU0", "X", "PIX · 24.4"], ["GPU1", "PIX · 24.4", "X"]])
    assert matrix_rows(cases, "bi")[1] == [["GPU0", "X", "PIX · 42.9"], ["GPU1", "PIX · 42.9", "X"]]
    assert host_rows(cases)[1] == [["GPU0", "24.2", "25.6"], ["GPU1", "24.2", "25.3"]]
    build_report([tmp_path], tmp_path / "report")
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "## Peer-to-peer bandwidth, box1" in markdown and "| GPU0 | X | PIX · 24.4 |" in markdown
    assert (tmp_path / "report" / "p2p.csv").exists()


@pytest.mark.no_gpu
def test_without_cuda_the_script_says_so_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "suite" / "p2p.py"), "--log-dir", str(tmp_path / "p")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and proc.stderr.strip().count("\n") == 0 and "no CUDA device" in proc.stderr
    assert not (tmp_path / "p").exists()


@pytest.mark.gpu
def test_on_a_gpu_every_case_is_measured_and_checked(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(REPO / "suite" / "p2p.py"), "--bytes", "16M", "--iters", "3",
                           "--log-dir", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    cases = p2p_table(collect([tmp_path]))
    gpus = int(proc.stdout.split(" over ")[1].split()[0])
    assert len(cases) == 2 * gpus + gpus * (gpus - 1) + gpus * (gpus - 1) // 2
    assert (cases["gbs"] > 0).all()
