"""``--device auto`` on a node with NVIDIA GPUs that the framework cannot see (a CPU build, missing CUDA
libraries, a driver too old, CUDA_VISIBLE_DEVICES hiding them) is refused in one line naming why, instead
of measuring the CPU and reporting it as the node; a machine without GPUs, or ``--device cpu``, trains on
the CPU as before. NVML is a stand-in counting 8 GPUs."""

from __future__ import annotations

from typing import Any

import pytest

from hvdbench.core.errors import UsageError

pytestmark = pytest.mark.no_gpu  # on a GPU machine the framework sees its GPUs and nothing is refused


class EightGpus:
    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: return 8


class NoDriver:
    def nvmlInit(self) -> None:
        raise RuntimeError("NVML Shared Library Not Found")


def test_pytorch_auto_refuses_a_gpu_node_it_cannot_use(monkeypatch: pytest.MonkeyPatch) -> None:
    from hvdbench.suite.pytorch import pick_device

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(UsageError) as err:
        pick_device("auto", 0, EightGpus())
    message = str(err.value)
    assert message.startswith("--device auto: this node has 8 NVIDIA GPU(s) (NVML) but PyTorch ")
    assert message.endswith("; fix that, or pass --device cpu to measure the CPU") and "\n" not in message


@pytest.mark.parametrize("hidden", ["", "-1"])
def test_hidden_gpus_are_named_as_the_reason(monkeypatch: pytest.MonkeyPatch, hidden: str) -> None:
    from hvdbench.suite.pytorch import pick_device

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hidden)
    with pytest.raises(UsageError, match=f"but CUDA_VISIBLE_DEVICES='{hidden}' hides them from this process"):
        pick_device("auto", 0, EightGpus())


def test_gpu_ids_the_node_lacks_are_named_as_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    from hvdbench.suite.pytorch import pick_device

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "8,9")
    with pytest.raises(UsageError, match=r"but CUDA_VISIBLE_DEVICES='8,9' names none of them \(ids 0-7\)"):
        pick_device("auto", 0, EightGpus())


@pytest.mark.parametrize("choice, module", [("auto", NoDriver()), ("cpu", EightGpus())])
def test_no_gpus_or_an_explicit_cpu_trains_on_the_cpu(choice: str, module: Any) -> None:
    from hvdbench.suite.pytorch import pick_device

    device, gpu = pick_device(choice, 0, module)
    assert device.type == "cpu" and gpu is None


@pytest.mark.tf
def test_tensorflow_auto_refuses_a_gpu_node_it_cannot_use(monkeypatch: pytest.MonkeyPatch) -> None:
    from hvdbench.suite.tfharness import pin_device

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    with pytest.raises(UsageError, match=r"this node has 8 NVIDIA GPU\(s\) \(NVML\) but TensorFlow "):
        pin_device("auto", 0, EightGpus())
    assert pin_device("auto", 0, NoDriver()) == ("/CPU:0", None)


def test_device_cuda_says_why_no_gpu_is_visible(monkeypatch: pytest.MonkeyPatch) -> None:
    from hvdbench.suite.pytorch import pick_device

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(UsageError) as err:
        pick_device("cuda", 0, EightGpus())
    assert str(err.value) == ("--device cuda: no CUDA device is visible to this process; this node has 8 NVIDIA "
                              "GPU(s) (NVML) but CUDA_VISIBLE_DEVICES='' hides them from this process")
    with pytest.raises(UsageError, match="^--device cuda: no CUDA device is visible to this process$"):
        pick_device("cuda", 0, NoDriver())
