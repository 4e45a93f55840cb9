"""On a GPU the harness turns cuDNN's autotuning on by default (as Horovod's and tf_cnn_benchmarks' scripts
do; --no-cudnn-autotune turns it off) and records it in the env record's ``math``, with whether fp32
products may run as TF32; the report judges an fp32 run against the peak of what ran (test_flops_and_peaks).
The settings are process flags, so they are checked here without a GPU; the collector reads them back."""

from __future__ import annotations

import pytest

from hvdbench.core.catalog import get_benchmark
from hvdbench.core.run_table import BY_NAME, RunFacts
from hvdbench.core.spec import RunSpec


@pytest.mark.parametrize("extra, autotune", [((), True), (("--no-cudnn-autotune",), False)])
def test_pytorch_sets_and_records_autotune_and_tf32(extra: tuple[str, ...], autotune: bool) -> None:
    import torch

    from hvdbench.suite.pytorch import math_settings

    flags = get_benchmark("imagenet").check(["--model", "resnet50", *extra])
    saved = torch.backends.cudnn.benchmark
    try:
        math = math_settings(flags, torch.device("cuda", 0))
        assert math is not None and torch.backends.cudnn.benchmark is autotune and math["cudnn_autotune"] is autotune
        assert math["tf32_convolution"] is torch.backends.cudnn.allow_tf32
        assert math["tf32_matmul"] is torch.backends.cuda.matmul.allow_tf32
        assert math_settings(flags, torch.device("cpu")) is None
    finally:
        torch.backends.cudnn.benchmark = saved


@pytest.mark.tf
@pytest.mark.parametrize("extra, autotune", [((), True), (("--no-cudnn-autotune",), False)])
def test_tensorflow_sets_and_records_autotune_and_tf32(monkeypatch: pytest.MonkeyPatch, extra: tuple[str, ...],
                                                       autotune: bool) -> None:
    from hvdbench.suite.tfharness import math_settings

    monkeypatch.delenv("TF_CUDNN_USE_AUTOTUNE", raising=False)
    flags = get_benchmark("tf_imagenet").check(["--model", "resnet50", *extra])
    math = math_settings(flags, "/GPU:0")
    assert math is not None and math["cudnn_autotune"] is autotune and isinstance(math["tf32_matmul"], bool)
    assert (__import__("os").environ.get("TF_CUDNN_USE_AUTOTUNE") == "0") is (not autotune)
    assert math_settings(flags, "/CPU:0") is None


@pytest.mark.parametrize("env, tf32", [
    ({"math": {"tf32_convolution": True, "tf32_matmul": False}, "device": {"capability": "9.0"}}, True),
    ({"math": {"tf32_convolution": True}, "device": {"capability": "7.0"}}, False),  # Volta has no TF32
    ({"math": {"tf32_convolution": True}, "device": {"capability": "8.0"},
      "variables": {"NVIDIA_TF32_OVERRIDE": "0"}}, False),  # the libraries' global switch
    ({"math": {"tf32_convolution": False, "tf32_matmul": False}, "device": {"capability": "8.6"}}, False),
    ({"math": None, "device": {"type": "cpu"}}, None), ({}, None),
])
def test_the_collector_reads_whether_tf32_ran(env: dict, tf32: bool | None) -> None:
    facts = RunFacts(RunSpec(benchmark="imagenet", np=1), records={"env": {0: env}} if env else {})
    assert BY_NAME["tf32"].value(facts) is tf32
