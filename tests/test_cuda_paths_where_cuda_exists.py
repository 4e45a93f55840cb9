"""The CUDA-only paths of the PyTorch harness, run for real where a CUDA device exists (skipped
elsewhere): device pinning and facts, batches resident, copied and loaded onto the GPU, an amp step
with its gradient scaler, peak device memory, and NVML found by the device's PCI bus id. No Horovod is
needed: the trainer runs as an independent replica."""

from __future__ import annotations

import argparse

import pytest

pytestmark = pytest.mark.gpu


def _flags(**kw: object) -> argparse.Namespace:
    from hvdbench.core.catalog import get_benchmark

    argv = ["--model", "resnet20", "--batch-size", "8", "--independent", "--device", "cuda"]
    for key, value in kw.items():
        argv += [f"--{key.replace('_', '-')}", str(value)] if value is not True else [f"--{key.replace('_', '-')}"]
    return get_benchmark("cifar10").check(argv)


def test_device_facts_and_nvml_handle_by_bus_id() -> None:
    from hvdbench.core.gpu import Nvml
    from hvdbench.suite.pytorch import device_info, pick_device

    device, _ = pick_device("cuda", 0)
    info = device_info(device)
    assert info["type"] == "cuda" and info["name"] and info["capability"] and info["nccl"]
    nvml = Nvml()
    assert nvml.available, nvml.reason
    handle = nvml.handle(info["pci_bus_id"], "0")
    assert nvml.bus_id(handle).lower().endswith(info["pci_bus_id"].lower()[-12:])
    sample = nvml.sample(handle)
    assert sample["sm_clock_mhz"] and sample["memory_used_bytes"] and sample["power_w"] is not None


@pytest.mark.parametrize("data", ["device", "host", "loader"])
def test_amp_step_on_the_gpu_with_each_data_mode(data: str) -> None:
    import torch

    from hvdbench.suite.cifar10 import build
    from hvdbench.suite.pytorch import BuildContext, Trainer, peak_memory, pick_device

    flags = _flags(precision="amp", data=data, channels_last=True)
    device, _ = pick_device("cuda", 0)
    ctx = BuildContext(flags, device, 0, 1)
    trainer = Trainer(None, build(ctx), flags, device, ctx.data_generator(), 1)
    assert trainer.scaler is not None
    for _ in range(3):
        out = trainer.step()
    torch.cuda.synchronize()
    assert out.loss.is_cuda and torch.isfinite(out.loss.float())
    assert peak_memory(device)["peak_device_bytes"] > 0
    phases = trainer.breakdown_step(torch.cuda.synchronize).phases
    assert phases is not None and all(v >= 0 for v in phases.values())


def test_the_nics_on_gpu_0s_pcie_switch_come_from_this_nodes_topology() -> None:
    from hvdbench.core.node_topology import gpu_nics, local_topology

    near = gpu_nics(0)
    assert near is not None  # NVML (or nvidia-smi) gave the node's matrix
    nics = {nic.name for nic in local_topology().nics}
    assert all(n["nic"] in nics and n["link"] in ("PIX", "PXB") for n in near)  # a node without NICs gives []
