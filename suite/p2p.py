"""Peer-to-peer and host bandwidth: for every GPU pair a device-to-device copy in each direction and in both
at once, and for every GPU host-to-device and device-to-host copies from pinned memory; each iteration timed
between device syncs, every result checked. One process sees every GPU of the node (no Horovod needed).

    python suite/p2p.py --bytes 256M --log-dir runs/p2p          # then: hvdbench report runs/p2p
    hvdbench run p2p --np 1 --output results/box                 # the same through hvdbench

Without a CUDA device it says so in one line and exits 1.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

from hvdbench.core.catalog import get_benchmark
from hvdbench.core.environment import base_environment
from hvdbench.core.errors import UsageError
from hvdbench.core.gpu import DEVICE_ORDER, Nvml, cuda_bus_id, visible_device
from hvdbench.core.records import RecordWriter, rank_log_name
from hvdbench.core.spec import RUN_FILE, RunSpec
from hvdbench.suite.harness import benchmark_args


def timed(copy: Callable[[], None], sync: Callable[[], None], iters: int, warmup: int) -> list[float]:
    """Seconds of each of ``iters`` timed copies after ``warmup`` untimed ones, each bounded by syncs."""
    times = []
    for index in range(warmup + iters):
        sync()
        start = time.perf_counter()
        copy()
        sync()
        if index >= warmup:
            times.append(time.perf_counter() - start)
    return times


def links(count: int) -> dict[tuple[int, int], str]:
    """Link class of every GPU pair from this node's topology (NVML or nvidia-smi), or none where unreadable."""
    try:
        from hvdbench.core.node_topology import local_topology

        topo = local_topology()
    except Exception:  # noqa: BLE001 - no topology is a missing column, not a failed measurement
        return {}
    if len(topo.gpus) != count:
        return {}
    return {(a, b): topo.link(a, b) for a in range(count) for b in range(count) if a != b}


def measure(torch: Any, writer: RecordWriter, nbytes: int, iters: int, warmup: int, devices: list[int]) -> int:
    """Every case; returns how many were measured."""
    count = len(devices)
    buffers = [torch.full((nbytes // 4,), float(i + 1), device=f"cuda:{d}") for i, d in enumerate(devices)]
    host = torch.empty(nbytes // 4).pin_memory()
    bus = [_bus(torch, d) for d in devices]
    known = links(torch.cuda.device_count())

    def sync() -> None:
        for d in devices:
            torch.cuda.synchronize(d)

    cases = 0
    host.fill_(-1.0)
    for i, d in enumerate(devices):
        staging = torch.empty_like(buffers[i])
        for src, dst, copy, out, value in (
                ("host", str(d), lambda s=staging: s.copy_(host, non_blocking=True), staging, -1.0),
                (str(d), "host", lambda i=i: host.copy_(buffers[i], non_blocking=True), host, float(i + 1))):
            times = timed(copy, sync, iters, warmup)
            _check(out, value)
            writer.write("p2p", src=src, dst=dst, mode="uni", bytes=nbytes, times=times,
                         src_bus_id=bus[i] if src != "host" else None, dst_bus_id=bus[i] if dst != "host" else None)
            cases += 1
        host.fill_(-1.0)
    for a in range(count):
        for b in range(count):
            if a == b:
                continue
            target = torch.empty_like(buffers[b])
            times = timed(functools.partial(_copy, target, buffers[a]), sync, iters, warmup)
            _check(target, float(a + 1))
            writer.write("p2p", src=str(devices[a]), dst=str(devices[b]), mode="uni", bytes=nbytes, times=times,
                         peer_access=bool(torch.cuda.can_device_access_peer(devices[a], devices[b])),
                         link=known.get((devices[a], devices[b])), src_bus_id=bus[a], dst_bus_id=bus[b])
            cases += 1
            if a < b:
                times = timed(functools.partial(_both_ways, torch, buffers, devices, a, b), sync, iters, warmup)
                writer.write("p2p", src=str(devices[a]), dst=str(devices[b]), mode="bi", bytes=2 * nbytes,
                             times=times, peer_access=bool(torch.cuda.can_device_access_peer(devices[a], devices[b])),
                             link=known.get((devices[a], devices[b])), src_bus_id=bus[a], dst_bus_id=bus[b])
                cases += 1
    return cases


def _copy(target: Any, source: Any) -> None:
    """One copy from ``source`` into ``target``, queued without waiting."""
    target.copy_(source, non_blocking=True)


def _both_ways(torch: Any, buffers: list[Any], devices: list[int], a: int, b: int) -> None:
    """a→b and b→a at once, each on its source GPU's own stream."""
    to_b, to_a = torch.empty_like(buffers[b]), torch.empty_like(buffers[a])
    streams = torch.cuda.Stream(devices[a]), torch.cuda.Stream(devices[b])
    with torch.cuda.stream(streams[0]):
        to_b.copy_(buffers[a], non_blocking=True)
    with torch.cuda.stream(streams[1]):
        to_a.copy_(buffers[b], non_blocking=True)
    streams[0].synchronize()
    streams[1].synchronize()


def _check(tensor: Any, value: float) -> None:
    if not bool((tensor == value).all()):
        raise RuntimeError(f"a copy delivered wrong values (expected {value:g} everywhere)")


def _bus(torch: Any, device: int) -> str | None:
    return cuda_bus_id(torch.cuda.get_device_properties(device))


def main(argv: list[str] | None = None) -> int:
    info = get_benchmark("p2p")
    args = list(sys.argv[1:] if argv is None else argv)
    flags = info.parse_or_exit(args)
    os.environ.setdefault("CUDA_DEVICE_ORDER", DEVICE_ORDER)
    import torch

    if not torch.cuda.is_available():
        print("error: p2p: no CUDA device is visible to this process; peer-to-peer bandwidth needs GPUs",
              file=sys.stderr)
        return 1
    devices = flags.devices if flags.devices is not None else list(range(torch.cuda.device_count()))
    try:
        if any(d >= torch.cuda.device_count() for d in devices):
            raise UsageError(f"--devices {devices}: this process sees {torch.cuda.device_count()} GPU(s)")
    except UsageError as exc:
        print(f"error: p2p: {exc}", file=sys.stderr)
        return 2
    log_dir = Path(flags.log_dir or f"hvdbench-logs/p2p-{time.strftime('%Y%m%d-%H%M%S')}")
    if not (log_dir / RUN_FILE).exists():
        RunSpec(benchmark="p2p", args=benchmark_args(args), launcher="external").write(log_dir)
    nvml = Nvml()
    with RecordWriter(log_dir / rank_log_name(0), rank=0, local_rank=0, size=1) as writer:
        writer.write("env", benchmark="p2p", framework="pytorch", model="p2p", flags=vars(flags), unit="GB/s",
                     device={"type": "cuda", "torch": torch.__version__, "cuda": torch.version.cuda,
                             "gpus": [torch.cuda.get_device_name(d) for d in devices]},
                     nvml=nvml.driver(),
                     gpu=nvml.static(nvml.handle(_bus(torch, devices[0]), visible_device(devices[0]))),
                     **base_environment())
        cases = measure(torch, writer, flags.bytes, flags.iters, flags.warmup_iters, devices)
        writer.write("summary", unit="GB/s", cases=cases)
    print(f"hvdbench p2p: {cases} case(s) over {len(devices)} GPU(s) ({log_dir})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
