"""Everything a run records reaches the report: parameters, peak memory, wall and set-up time, the timed
window's telemetry means and energy per sample, --breakdown phases, --profile operators; knobs are sweep
axes whose runs sit side by side with a ratio and its interval; the executive summary leads the report."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import write_run
from hvdbench.analysis.report.build import build_report
from hvdbench.launchers.plan import plan
from hvdbench.launchers.sweep import load_sweep
from hvdbench.core.records import RecordWriter, rank_log_name
from hvdbench.core.spec import RunSpec


def _gpu_run(root: Path, spec: RunSpec, step: float, *, power: float, energy_per_s: float | None) -> Path:
    """Rank logs as a GPU run writes them: timed phase, telemetry inside the window, breakdown phases."""
    run_dir = root / spec.id
    spec.write(run_dir)
    for rank in range(spec.np):
        with RecordWriter(run_dir / rank_log_name(rank), rank=rank, local_rank=rank, size=spec.np) as w:
            w.write("env", benchmark="imagenet", framework="pytorch", model="resnet50", unit="images",
                    parameters=25_557_032, flags={"batch_size": 64},
                    math={"cudnn_autotune": spec.np == 1, "tf32_matmul": False, "tf32_convolution": True})
            w.write("phase", phase="warmup", steps=2)
            for i in range(2):
                w.write("step", step=i, warmup=True, duration=1.0, samples=64, loss=7.0)
            w.write("phase", phase="timed", steps=30)
            start = w.write("telemetry", power_w=power, gpu_util_pct=98.0, sm_clock_mhz=1980, memory_clock_mhz=2619,
                            energy_mj=0 if energy_per_s else None)["mono"]
            for i in range(2, 32):
                w.write("step", step=i, warmup=False, duration=step, samples=64, loss=6.0,
                        phases={"forward": step * 0.3, "backward": step * 0.5, "exchange": step * 0.1,
                                "optimizer": step * 0.1})
            import time
            time.sleep(0.05)
            if energy_per_s:
                now = w.write("telemetry", power_w=power, energy_mj=0)["mono"]
                w.write("telemetry", power_w=power, energy_mj=int((now - start) * energy_per_s * 1000) + 1)
            w.write("profile", steps=2, trace="trace-rank0.json", sort_by="self device time",
                    top=[{"name": "aten::convolution_backward", "calls": 106, "self_cpu_us": 900.0,
                          "self_device_us": 41000.0, "cpu_total_us": 2000.0}])
            w.write("summary", steps=30, samples=64.0 * 30, peak_device_bytes=21_474_836_480)
    return run_dir


def test_run_details_breakdown_and_profile_reach_md_html_and_csv(tmp_path: Path) -> None:
    _gpu_run(tmp_path, RunSpec(benchmark="imagenet", np=1), 0.2, power=650.0, energy_per_s=None)
    _gpu_run(tmp_path, RunSpec(benchmark="imagenet", np=2), 0.21, power=640.0, energy_per_s=600.0)
    text, paths = build_report([tmp_path], tmp_path / "out")
    markdown, page = paths["markdown"].read_text(), paths["html"].read_text()
    for needle in ("## Run details", "25,557,032", "21.47 device", "## Step breakdown", "## Top operators (--profile)",
                   "aten::convolution_backward", "## Executive summary"):
        assert needle in markdown and needle.replace("## ", "") in page, needle
    assert markdown.index("## Executive summary") < markdown.index("## `local:")
    details = pd.read_csv(tmp_path / "out" / "details.csv").set_index("np")
    # a rank field (a core/run_table.py column) reaches the run table and the Run details section
    assert bool(details.loc[1, "cudnn_autotune"]) is True and bool(details.loc[2, "cudnn_autotune"]) is False
    assert "| cuDNN autotune |" in markdown and " | on |" in markdown and " | off |" in markdown
    assert details.loc[1, "power_w"] == 650.0 and details.loc[2, "power_w"] == 1280.0  # summed over ranks
    # 1 GPU: power x time = 650 W x its window / 1920 images; 2 GPUs: NVML's counter, 600 J/s per GPU
    assert details.loc[1, "energy_from"] == "power × time"
    assert details.loc[2, "energy_from"] == "NVML energy counter"
    from hvdbench.analysis.collect import collect

    windows = collect([tmp_path]).windows.groupby("run_id").agg(seconds=("end_s", "sum"), start=("start_s", "sum"),
                                                                 samples=("samples", "sum"))
    two = windows.loc[RunSpec(benchmark="imagenet", np=2).id]
    expected = 600.0 * (two["seconds"] - two["start"]) / two["samples"]  # J/s per GPU x each GPU's window / samples
    assert details.loc[2, "energy_j_per_sample"] == pytest.approx(expected, rel=0.05)
    assert (details["setup_s"] > 0).all() and (details["wall_s"] >= details["setup_s"]).all()
    breakdown = pd.read_csv(tmp_path / "out" / "breakdown.csv").set_index("np")
    assert breakdown.loc[2, "backward"] == pytest.approx(105.0) and breakdown.loc[2, "step_ms"] == pytest.approx(210.0)


def test_knobs_are_sweep_axes_and_sit_side_by_side_with_a_ratio(tmp_path: Path) -> None:
    sweep_file = tmp_path / "knobs.yaml"
    sweep_file.write_text("workloads: [{benchmark: cifar10, args: [--model, resnet20]},\n"
                          "            {benchmark: tf_cifar10, args: [--model, resnet20]}]\n"
                          "axes: {np: [1], channels_last: [false, true], compile: [false, true],\n"
                          "       data: [device, host], fp16_allreduce: [true], threads: [2]}\n")
    args = {s.args for s in plan(load_sweep(sweep_file)).specs}
    assert ("--model", "resnet20", "--channels-last", "--compile", "--data", "host", "--fp16-allreduce",
            "--threads", "2") in args
    assert ("--model", "resnet20", "--data-format", "channels_last", "--xla", "--data", "device", "--fp16-allreduce",
            "--threads", "2") in args  # the same knobs in TensorFlow's own flags
    assert len(args) == 16
    rng = np.random.default_rng(4)
    for layout, mean in (((), 0.131), (("--channels-last",), 0.100)):
        spec = RunSpec(benchmark="cifar10", args=("--model", "resnet20", *layout), np=1)
        write_run(tmp_path / "runs", spec, [list(rng.normal(mean, mean * 0.02, 40))])
    build_report([tmp_path / "runs"], tmp_path / "out")
    knobs = pd.read_csv(tmp_path / "out" / "knobs.csv")
    assert list(knobs["knob"]) == ["channels_last"] and list(knobs["value"]) == ["NHWC"]
    assert knobs.loc[0, "ratio_low"] < knobs.loc[0, "ratio"] < knobs.loc[0, "ratio_high"]
    assert 1.25 < knobs.loc[0, "ratio"] < 1.37
    assert "| NCHW → NHWC |" in (tmp_path / "out" / "report.md").read_text()


def test_a_knob_the_benchmark_refuses_is_one_line(tmp_path: Path) -> None:
    from hvdbench.launchers.sweep import SweepError

    sweep_file = tmp_path / "bad.yaml"
    sweep_file.write_text("workloads: [mlp]\naxes: {np: [1], channels_last: [true]}\n")
    with pytest.raises(SweepError, match=r"workloads\[0\] \(mlp --channels-last\).*applies to CNNs"):
        plan(load_sweep(sweep_file))
