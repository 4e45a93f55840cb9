"""FLOPs per sample match the published figures of ResNet-50 and GPT-2 small; achieved TFLOP/s is judged against
the device's dense peak where the table knows it, says "unknown peak" or "no peak" where not, and nothing fails;
a collective's busbw is set against its links' nominal rate."""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from hvdbench.analysis.tables.efficiency import find_peak, link_rate, load_peaks, peak_cell, with_peaks
from hvdbench.analysis.report.views import headline_rows, headline_titles
from hvdbench.suite import flops
from hvdbench.core.catalog import get_benchmark
from hvdbench.core.errors import ReportError

# torchvision's model documentation: ResNet50_Weights.IMAGENET1K_V1 (v1.5), "GFLOPS 4.09", counted there as
# multiply-adds per 224x224 image, 25,557,032 parameters.
RESNET50_MACS = 4.09e9
# PaLM (Chowdhery et al. 2022), Appendix B: training FLOPs per token = 6N + 12 L H Q T. GPT-2 small: N = 124.4M
# parameters (the tied embedding once), L = 12 layers, H = 12 heads, Q = 64, T = 1,024 tokens.
GPT2_SMALL = 6 * 124_439_808 + 12 * 12 * 12 * 64 * 1024


def counted(benchmark: str, *args: str) -> dict:
    return flops.count_torch(benchmark, get_benchmark(benchmark).check(list(args)))


def test_resnet50_at_224_is_4_09_gmac_forward_and_three_times_that_per_training_step() -> None:
    result = counted("imagenet", "--model", "resnet50", "--batch-size", "64")
    assert result["flops_counted"] == flops.COUNTED
    assert result["flops_forward_per_sample"] == pytest.approx(2 * RESNET50_MACS, rel=0.01)
    # backward is twice forward, less the first convolution's unneeded input gradient
    assert result["flops_per_sample"] == pytest.approx(3 * result["flops_forward_per_sample"], rel=0.02)


def test_gpt2_small_at_1024_tokens_matches_6n_plus_12lhqt_per_token() -> None:
    result = counted("lm", "--batch-size", "2")  # GPT-2 small shape, 1,024-token context by default
    assert result["flops_per_sample"] == pytest.approx(GPT2_SMALL, rel=0.02)  # samples are tokens


def test_a_model_the_meta_device_cannot_run_is_counted_forward_only_on_the_cpu() -> None:
    result = counted("translation", "--batch-size", "2", "--hidden", "64", "--vocab", "500", "--layers", "1",
                     "--src-max-len", "12")
    assert result["flops_counted"] == flops.FORWARD_ONLY
    assert result["flops_per_sample"] == pytest.approx(flops.BACKWARD_FACTOR * result["flops_forward_per_sample"])


def test_counts_are_made_once_per_model_and_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HVDBENCH_CACHE", str(tmp_path))
    calls = []
    real = flops.count_torch
    monkeypatch.setattr(flops, "count_torch", lambda *a: calls.append(a) or real(*a))
    mlp = get_benchmark("mlp")
    first = flops.flops_of("mlp", mlp.check(["--batch-size", "64"]))
    again = flops.flops_of("mlp", mlp.check(["--batch-size", "64", "--steps", "7", "--precision", "bf16"]))
    other = flops.flops_of("mlp", mlp.check(["--mlp-widths", "512"]))
    assert first == again and len(calls) == 2 and other["flops_per_sample"] < first["flops_per_sample"]
    assert len(json.loads((tmp_path / "flops.json").read_text())) == 2


@pytest.mark.slow
@pytest.mark.tf
def test_tensorflow_workloads_use_the_count_of_the_same_pytorch_model(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HVDBENCH_CACHE", str(tmp_path))
    tf_flags = get_benchmark("tf_mlp").check(["--mlp-widths", "256,128", "--batch-size", "16"])
    result = flops.flops_of("tf_mlp", tf_flags)
    torch_count = counted("mlp", "--mlp-widths", "256,128", "--batch-size", "16")
    assert result["flops_per_sample"] == torch_count["flops_per_sample"]
    assert result["flops_counted"].endswith("on PyTorch mlp (the same model and sizes)")
    proc = subprocess.run([sys.executable, "-m", "hvdbench.suite.flops", "nosuch", "{}"], capture_output=True,
                          text=True)
    assert proc.returncode != 0 and "unknown benchmark 'nosuch'" in proc.stderr


def scaling_rows(*rows: dict) -> pd.DataFrame:
    base = {"system": "s", "framework": "pytorch", "benchmark": "imagenet", "model": "resnet50", "args": "",
            "launcher": "horovodrun", "controller": "gloo", "placement": "", "knobs": "", "nodes": 1, "np": 8,
            "throughput": 8000.0, "ci_low": 7900.0, "ci_high": 8100.0, "per_rank": 1000.0, "speedup": 7.5,
            "speedup_low": 7.4, "speedup_high": 7.6, "efficiency": 0.94, "efficiency_low": 0.92,
            "efficiency_high": 0.95, "median_step_ms": 64.0, "cv": 0.01, "warmup_used": 5.0, "repeats": 1,
            "repeat_min": 8000.0, "repeat_max": 8000.0, "baseline": "its own 1-GPU run", "precision": "bf16",
            "flops_per_sample": 24.3e9, "tflops_per_gpu": 1000 * 24.3e9 / 1e12, "peak_tflops": math.nan,
            "pct_of_peak": math.nan, "peak": None, "device_name": "NVIDIA H100 80GB HBM3",
            "unit": "images"}
    return pd.DataFrame([{**base, **row} for row in rows])


def test_known_gpus_get_a_share_of_their_dense_peak_and_unknown_ones_say_so() -> None:
    table = with_peaks(scaling_rows({}, {"device_name": "NVIDIA Imaginary X1"}, {"device_name": "AMD EPYC 7B13"},
                                    {"device_name": "NVIDIA A100-SXM4-80GB", "precision": "fp32"},
                                    {"device_name": "Tesla V100-SXM2-32GB"},
                                    {"flops_per_sample": math.nan, "tflops_per_gpu": math.nan}), load_peaks())
    assert table.loc[0, "pct_of_peak"] == pytest.approx(24.3 / 989.4 * 100)
    assert table.loc[0, "peak"].startswith("H100 SXM bf16 989.4 TFLOP/s (NVIDIA H100")
    cells = [row[headline_titles(table).index("% of peak")] for row in headline_rows(table)]
    assert table.loc[3, "pct_of_peak"] == pytest.approx(24.3 / 156.0 * 100)  # TF32 not recorded off: A100's tf32
    assert cells == ["2%", "unknown peak", "no peak", "16%", "unknown peak: no bf16 figure for V100 SXM2", "n/a"]
    tflops = [row[headline_titles(table).index("TFLOP/s per GPU")] for row in headline_rows(table)]
    assert tflops[:5] == ["24.3"] * 5 and tflops[5] == "n/a"


@pytest.mark.parametrize("device, tf32, column, peak", [
    ("NVIDIA H100 80GB HBM3", True, "tf32", 494.7), ("NVIDIA H100 80GB HBM3", None, "tf32", 494.7),
    ("NVIDIA H100 80GB HBM3", False, "fp32", 66.9), ("NVIDIA A100-SXM4-80GB", True, "tf32", 156.0),
    ("Tesla V100-SXM2-32GB", None, "fp32", 15.7),  # no TF32 on Volta
])
def test_fp32_is_judged_against_the_precision_that_ran(device: str, tf32: bool | None, column: str,
                                                       peak: float) -> None:
    """An fp32 ResNet-50 on an H100 at 100 TFLOP/s (its convolutions in TF32) is 20% of the TF32 peak, never
    150% of the fp32 one; a run that recorded TF32 off is judged against fp32."""
    row = {"precision": "fp32", "device_name": device, "tf32": tf32, "tflops_per_gpu": 10.0}
    table = with_peaks(scaling_rows(row), load_peaks())
    assert table.loc[0, "peak_tflops"] == pytest.approx(peak) and f" {column} " in table.loc[0, "peak"]
    if column == "tf32":
        assert table.loc[0, "pct_of_peak"] <= 100


def test_a_peak_file_adds_a_cpu_and_comes_first(tmp_path: Path) -> None:
    extra = tmp_path / "peaks.toml"
    extra.write_text('[[device]]\nname = "EPYC 7B13"\nmatch = ["EPYC 7B13"]\nfp32 = 2.0\nbf16 = 4.0\n'
                     'source = "vendor sheet"\n\n[[device]]\nname = "my H100"\nmatch = ["H100"]\nbf16 = 900\n')
    peaks = load_peaks(extra)
    assert peak_cell(peaks, "AMD EPYC 7B13 64-Core Processor", "fp32", on_gpu=False)[0] == 2.0
    assert find_peak(peaks, "NVIDIA H100 80GB HBM3").name == "my H100"


@pytest.mark.parametrize(("text", "message"), [
    ("[[device]]\nname = 'x'\nfp32 = -1\n", "device[0]: fp32 must be a positive number of TFLOP/s, got -1"),
    ("[[device]]\nname = 'x'\nfp64 = 9\n", "device[0]: unknown key(s) fp64; valid: name, match, source, fp32"),
    ("[[device]]\nmatch = ['x']\n", "device[0]: expected a table with name"),
    ("[[device]\n", "not valid TOML"),
    ("[[device]]\nname = 'x'\nfp32 = 1e-300\n", "fp32 1e-300 TFLOP/s is below any device"),  # no 300-digit % of peak
])
def test_a_bad_peak_file_is_one_line_naming_the_entry(tmp_path: Path, text: str, message: str) -> None:
    extra = tmp_path / "peaks.toml"
    extra.write_text(text)
    with pytest.raises(ReportError) as caught:
        load_peaks(extra)
    assert message in str(caught.value) and str(extra) in str(caught.value) and "\n" not in str(caught.value)


def test_link_rates_of_nvlink_and_pcie_placements() -> None:
    assert link_rate("NV12", 1, math.nan, math.nan) == (300.0, "12 NVLinks, 300 GB/s")
    assert link_rate("NV18", 1, 5, 16) == (450.0, "18 NVLinks, 450 GB/s")
    rate, name = link_rate("PIX", 1, 4, 16)
    assert rate == pytest.approx(31.5, rel=0.01) and name == "PCIe gen4 x16, 31.5 GB/s"
    assert link_rate("SYS", 1, math.nan, math.nan) is None  # no PCIe facts: unknown, not a guess
    assert link_rate("NV12", 2, 4, 16) is None and link_rate("all", 1, 4, 16) is None


def test_count_flags_are_the_sizing_ones() -> None:
    flags = get_benchmark("tf_imagenet").check(["--model", "vgg16", "--image-size", "64", "--xla"])
    assert get_benchmark("tf_imagenet").sizing(flags) == {"model": "vgg16", "batch_size": 32, "seed": 1234,
                                                           "image_size": 64}
    assert isinstance(flags, argparse.Namespace)


def test_sizes_count_cpu_ranks_only_where_every_device_names_a_cpu() -> None:
    """A table's size column says CPU ranks only where every row's device is named as a CPU names itself; a GPU's
    name, an imported result's bare "H100" or a device not recorded keeps it GPUs."""
    from hvdbench.analysis.tables.efficiency import on_cpu_ranks, ranks_title

    assert on_cpu_ranks(["AMD EPYC 7763 64-Core Processor", "Intel(R) Xeon(R) Platinum 8480+"])
    assert on_cpu_ranks(["QEMU Virtual CPU version 2.5+"]) and ranks_title(["Neoverse-V2"]) == "CPU ranks"
    for mixed in (["H100"], ["NVIDIA H100 80GB HBM3"], [None], [], ["AMD EPYC 7763", "NVIDIA A100-SXM4-80GB"]):
        assert not on_cpu_ranks(mixed) and ranks_title(mixed) == "GPUs"


def test_the_knob_cross_workload_and_collectives_tables_count_cpu_ranks_as_such() -> None:
    """The knob table, the cross-workload summary and the collectives keep the devices their rows ran on (beside the
    table, not in its CSV): CPU ranks are headed as ranks, a GPU's rows as GPUs."""
    import pandas as pd

    from hvdbench.analysis.tables.comm import peak_rows, ratio_rows
    from hvdbench.analysis.tables.summary import cross_model, cross_rows

    def table(device: str) -> pd.DataFrame:
        return pd.DataFrame({"system": ["s", "s"], "np": [2, 2], "model": ["a", "b"], "independent": [False, False],
                             "speedup": [1.8, 1.9], "efficiency": [0.9, 0.95], "device_name": [device, device]})

    cpu, gpu = cross_model(table("AMD EPYC 7763 64-Core Processor")), cross_model(table("NVIDIA H100 80GB HBM3"))
    assert cross_rows(cpu)[0][1] == "CPU ranks" and cross_rows(gpu)[0][1] == "GPUs"
    assert "device_name" not in cpu.columns and cross_rows(cpu)[1][0][:3] == ["s", "2", "2"]
    assert peak_rows(pd.DataFrame(), pd.DataFrame(), ["AMD EPYC 7763 64-Core Processor"])[0][2] == "CPU ranks"
    assert ratio_rows(pd.DataFrame(), ["NVIDIA H100 80GB HBM3"])[0][2] == "GPUs"
    assert peak_rows(pd.DataFrame(), pd.DataFrame())[0][2] == "GPUs"  # no device known: GPUs, as before
