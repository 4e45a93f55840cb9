"""The report's tables reproduce known scaling ratios, cover every swept axis, compare systems, and the
HTML page renders offline in a real browser with every log string escaped."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from conftest import write_run
from hvdbench.analysis.collect import collect
from hvdbench.analysis.report.build import build_report
from hvdbench.analysis.tables.scaling import scaling_table
from hvdbench.core.records import RecordWriter
from hvdbench.core.spec import RunSpec

ARGS = ("--model", "resnet50", "--batch-size", "64")
BATCH = 64


def _spec(np_: int, args: tuple[str, ...] = ARGS, **kw: object) -> RunSpec:
    return RunSpec(benchmark="imagenet", args=args, np=np_, **kw)  # type: ignore[arg-type]


def _write(root: Path, spec: RunSpec, per_gpu: float, **kw: object) -> None:
    """A run whose every rank processes BATCH images per step at per_gpu images/s."""
    write_run(root, spec, [[BATCH / per_gpu] * 30] * spec.np, samples=BATCH, **kw)  # type: ignore[arg-type]


# Per-GPU throughputs of a published-style ResNet-50 table (1, 2, 4, 8, 16 GPUs): the ratios are the answer.
PER_GPU = {1: 360.0, 2: 351.3, 4: 342.9, 8: 331.2, 16: 298.4}


def test_speedup_and_efficiency_reproduce_a_known_table_to_three_digits(tmp_path: Path) -> None:
    for n, per_gpu in PER_GPU.items():
        _write(tmp_path, _spec(n, nodes=2 if n == 16 else 1), per_gpu)
    table = scaling_table(collect([tmp_path])).set_index("np")
    for n, per_gpu in PER_GPU.items():
        assert table.loc[n, "speedup"] == pytest.approx(n * per_gpu / 360.0, abs=5e-4)
        assert table.loc[n, "efficiency"] == pytest.approx(per_gpu / 360.0, abs=5e-4)
        assert table.loc[n, "throughput"] == pytest.approx(n * per_gpu, abs=0.05)
    # 16 GPUs on 2 nodes against 1 node of 8: 2 x 298.4 / 331.2 per GPU
    assert table.loc[16, "node_speedup"] == pytest.approx(16 * 298.4 / (8 * 331.2), abs=5e-4)
    assert table.loc[16, "node_efficiency"] == pytest.approx(298.4 / 331.2, abs=5e-4)


def test_placements_batch_sizes_precisions_and_communication_cost(tmp_path: Path) -> None:
    _write(tmp_path, _spec(1), 360.0)
    _write(tmp_path, _spec(2, placement="PIX"), 350.0)
    _write(tmp_path, _spec(2, placement="SYS"), 280.0)
    _write(tmp_path, _spec(2, args=ARGS + ("--independent",), placement="PIX"), 359.0)
    for batch, per_gpu in ((32, 300.0), (128, 380.0)):
        _write(tmp_path, _spec(1, args=("--model", "resnet50", "--batch-size", str(batch))), per_gpu)
    _write(tmp_path, _spec(1, args=ARGS + ("--precision", "amp")), 900.0)
    text, paths = build_report([tmp_path], tmp_path / "out")
    table = pd.read_parquet(tmp_path / "out" / "scaling.parquet")
    pix = table[(table["placement"] == "PIX") & ~table["independent"]].iloc[0]
    assert pix["comm_cost"] == pytest.approx(1 - 350.0 / 359.0, abs=5e-4)
    assert set(table["batch_size"].dropna().astype(int)) == {32, 64, 128}
    assert set(table["precision"]) == {"fp32", "amp"}
    md = paths["markdown"].read_text()
    for section in ("## By placement at equal GPU count", "## By batch size", "## By precision",
                    "## Cost of communication", "## Warm-up", "## Stragglers"):
        assert section in md
    assert "| PIX | 700.0 |" in md and "80%" in md  # SYS relative to the best placement: 560 / 700
    for name in ("runs", "run_stats", "scaling", "stragglers"):
        assert (tmp_path / "out" / f"{name}.csv").exists() and (tmp_path / "out" / f"{name}.parquet").exists()


def test_systems_side_by_side_per_gpu_per_watt_per_dollar(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from hvdbench.cli import main

    for system, per_gpu, watts in (("dgx-a100", 700.0, 300.0), ("pcie-v100", 350.0, 250.0)):
        for n in (1, 2):
            _write(tmp_path / system, _spec(n, system=system), per_gpu, telemetry={"power_w": watts})
    assert main(["compare", str(tmp_path / "dgx-a100"), str(tmp_path / "pcie-v100"), "-o", str(tmp_path / "cmp"),
                 "--price", "dgx-a100=4.0", "--price", "pcie-v100=1.5"]) == 0
    assert "systems side by side" in capsys.readouterr().out
    compared = pd.read_csv(tmp_path / "cmp" / "compare.csv").set_index(["system", "np"])
    a, v = compared.loc[("dgx-a100", 2)], compared.loc[("pcie-v100", 2)]
    assert a["per_gpu"] == pytest.approx(700.0) and a["per_watt"] == pytest.approx(1400.0 / 600.0)
    assert a["per_dollar"] == pytest.approx(1400.0 * 3600 / (4.0 * 2))
    assert v["relative"] == pytest.approx(0.5) and v["per_dollar"] == pytest.approx(700.0 * 3600 / 3.0)
    assert main(["compare", str(tmp_path / "dgx-a100"), str(tmp_path / "pcie-v100"), "--price", "nosuch=1"]) == 2
    assert "names system(s) nosuch" in capsys.readouterr().err


def test_broken_inputs_are_listed_and_the_rest_is_reported(tmp_path: Path) -> None:
    _write(tmp_path, _spec(1), 360.0)
    _write(tmp_path, _spec(2), 350.0)
    (tmp_path / "empty-dir").mkdir()
    orphan = tmp_path / "copied-logs"
    orphan.mkdir()
    with RecordWriter(orphan / "rank-0.jsonl", rank=0, local_rank=0, size=1) as w:
        w.write("step", step=0, warmup=False, duration=0.1, samples=1)
    future = tmp_path / _spec(2).id / "rank-1.jsonl"
    with open(future, "a") as handle:  # a newer hvdbench wrote part of this file
        handle.write(json.dumps({"hvdbench": 2, "kind": "step", "rank": 1, "size": 2, "step": 99}) + "\n")
    cut = tmp_path / _spec(2).id / "rank-0.jsonl"
    cut.write_text(cut.read_text() + '{"hvdbench":1,"kind":"step","rank":0,"si')
    text, paths = build_report([tmp_path], tmp_path / "out")
    md = paths["markdown"].read_text()
    assert "copied-logs: rank logs without a run.json" in md
    assert "record schema version ['2'] (this hvdbench reads version 1); those records skipped" in md
    assert "truncated or malformed record" in md
    assert "2 malformed log line(s) in 2 file(s)" in text
    table = pd.read_csv(paths["scaling"])
    assert list(table["np"]) == [1, 2] and table["throughput"].iloc[1] == pytest.approx(700.0)


HOSTILE = '<script>alert("x")</script> a|b & "c"'


@pytest.mark.slow
def test_html_is_self_contained_escaped_and_renders_in_chromium(tmp_path: Path) -> None:
    for n, per_gpu in PER_GPU.items():
        _write(tmp_path, _spec(n, system=HOSTILE, placement="NV2" if n > 1 else None), per_gpu,
               telemetry={"power_w": 250.0, "sm_clock_mhz": 1410.0})
    _write(tmp_path, _spec(2, system=HOSTILE, placement="SYS"), 200.0)
    _, paths = build_report([tmp_path], tmp_path / "out")
    page = paths["html"].read_text()
    assert '<script>alert("x")</script>' not in page and "&lt;script&gt;alert(&quot;x&quot;)" in page
    assert not any(ref in page for ref in ('src="http', "href=\"http", "url(http", "@import"))  # nothing fetched
    assert page.count('<figure class="plot">') >= 4
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (scripts/setup.sh installs it where it can)")
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking",
             "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'chromium'}",
             "--window-size=1366,900", "--virtual-time-budget=5000"]
    proc = subprocess.run([*flags, "--dump-dom", paths["html"].as_uri()], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    figures = page.count('<figure class="plot">')
    assert f'data-plots="{figures}"' in dom and f'data-plots-drawn="{figures}"' in dom, dom[:300]
    assert "data-errors" not in dom and "<h2>Executive summary</h2>" in dom
    # a laptop's 1366 px: wide tables scroll inside their own box, the page itself never runs off the screen
    page_width = int(re.search(r'data-page-width="(\d+)"', dom).group(1))
    window_width = int(re.search(r'data-window-width="(\d+)"', dom).group(1))
    assert window_width == 1366 and page_width <= window_width, (page_width, window_width)
    shot = tmp_path / "laptop.png"
    subprocess.run([*flags, f"--screenshot={shot}", paths["html"].as_uri()], capture_output=True, timeout=120)
    header = shot.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(header[16:20], "big") == 1366
