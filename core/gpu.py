"""NVML facts about this rank's GPU: fixed ones for the env record, sampled ones for telemetry.

Where no driver exists every call degrades to a one-line note ("no NVIDIA driver ...") instead of an
exception; the CPU sampler then records this process's CPU use and resident memory.
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from typing import Any, Callable, Mapping

from .errors import UsageError
from .gpu_choice import visible_devices
from .records import RecordWriter

# nvmlClocksEventReason* bits (called throttle reasons by older drivers)
CLOCK_EVENTS = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


# NVML field ids (nvml.h's NVML_FI_DEV_*; stable across drivers) and the c_nvmlValue_t member of each value type
NVLINK_LINK_COUNT = 91  # NVML_FI_DEV_NVLINK_LINK_COUNT
NVLINK_DATA_TX = 138  # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: KiB of payload sent on one link (scope: the link)
NVLINK_DATA_RX = 139  # NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX
_FIELD_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def clock_event_names(mask: int) -> list[str]:
    """The named reasons set in an NVML clock-event (throttle) bit mask."""
    return [name for bit, name in CLOCK_EVENTS.items() if mask & bit]


class Nvml:
    """NVML for this process, or the reason it is absent (``available`` False, ``reason`` set)."""

    def __init__(self, module: Any = None) -> None:
        self.nv: Any = None
        self.reason: str | None = None
        self._links: dict[str, int] = {}  # NVLinks per GPU, by bus id
        try:
            if module is None:
                module = importlib.import_module("pynvml")
            module.nvmlInit()
            self.nv = module
        except ImportError:
            self.reason = "no NVML: the nvidia-ml-py package is not installed"
        except Exception as exc:  # pynvml.NVMLError and its many subclasses
            self.reason = f"no NVIDIA driver on this machine (NVML: {exc})"

    @property
    def available(self) -> bool:
        return self.nv is not None

    def field_values(self, handle: Any, fields: list[tuple[int, int]]) -> list[int | float | None]:
        """NVML field values (``nvmlDeviceGetFieldValues``), one per (field id, scope id): the number, or None
        where this GPU or driver does not have the field (or NVML has no such call)."""
        values = self.query("nvmlDeviceGetFieldValues", handle, fields)
        if values is None:
            return [None] * len(fields)
        out: list[int | float | None] = []
        for value in values:
            member = _FIELD_MEMBERS.get(int(getattr(value, "valueType", -1)))
            ok = getattr(value, "nvmlReturn", 1) == 0 and member is not None
            out.append(getattr(value.value, member, None) if ok else None)  # type: ignore[arg-type]
        return out

    def nvlink_links(self, handle: Any) -> int:
        """How many NVLinks the GPU has (NVML's link-count field, asked once per GPU); 0 without NVLink."""
        key = self.bus_id(handle) or str(handle)
        if key not in self._links:
            count = self.field_values(handle, [(NVLINK_LINK_COUNT, 0)])[0]
            self._links[key] = int(count) if isinstance(count, (int, float)) and 0 < count <= 64 else 0
        return self._links[key]

    def nvlink_counters(self, handle: Any) -> dict[str, int | None]:
        """NVLink data sent and received since the driver loaded, KiB summed over the GPU's links (NVML's
        NVLINK_THROUGHPUT_DATA_TX/RX field values, payload without protocol overhead); None where the GPU has
        no NVLink or the driver no such field. Rates come from two samples' difference (as energy's)."""
        links = self.nvlink_links(handle)
        if not links:
            return {"nvlink_tx_kib": None, "nvlink_rx_kib": None}
        fields = [(field, link) for field in (NVLINK_DATA_TX, NVLINK_DATA_RX) for link in range(links)]
        values = self.field_values(handle, fields)
        tx, rx = values[:links], values[links:]
        return {"nvlink_tx_kib": None if None in tx else int(sum(tx)),  # type: ignore[arg-type]
                "nvlink_rx_kib": None if None in rx else int(sum(rx))}  # type: ignore[arg-type]

    def query(self, name: str, *args: Any) -> Any:
        """One NVML query; None where this GPU or driver does not support it."""
        try:
            value = getattr(self.nv, name)(*args)
        except Exception:
            return None
        return value.decode() if isinstance(value, bytes) else value

    def shutdown(self) -> None:
        """Release NVML (where it was initialised)."""
        if self.available:
            self.query("nvmlShutdown")
            self.nv = None

    def bus_id(self, handle: Any) -> str | None:
        """A GPU's PCI bus id as NVML prints it (8-digit domain)."""
        pci = self.query("nvmlDeviceGetPciInfo", handle)
        return None if pci is None else text(pci.busId)

    def handle(self, pci_bus_id: str | None, visible: str) -> Any:
        """The NVML handle of a GPU by PCI bus id (what CUDA sees), else by what CUDA_VISIBLE_DEVICES names
        it: a UUID (``GPU-...``, ``MIG-...``) or an index, which under CUDA_DEVICE_ORDER=PCI_BUS_ID is NVML's."""
        if not self.available:
            return None
        if pci_bus_id:
            handle = self.query("nvmlDeviceGetHandleByPciBusId", pci_bus_id)
            if handle is not None:
                return handle
        if visible.isdigit():
            return self.query("nvmlDeviceGetHandleByIndex", int(visible))
        return self.query("nvmlDeviceGetHandleByUUID", visible)

    def driver(self) -> dict[str, Any]:
        """Driver and CUDA driver versions, or the note saying NVML is absent."""
        if not self.available:
            return {"available": False, "reason": self.reason}
        cuda = self.query("nvmlSystemGetCudaDriverVersion")
        return {"available": True, "driver": self.query("nvmlSystemGetDriverVersion"),
                "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else None,
                "nvml": self.query("nvmlSystemGetNVMLVersion")}

    def static(self, handle: Any) -> dict[str, Any]:
        """Fixed facts of one GPU."""
        clk = self.nv.NVML_CLOCK_SM if self.available else 0
        mem_clk = self.nv.NVML_CLOCK_MEM if self.available else 1
        bus = self.bus_id(handle)
        memory = self.query("nvmlDeviceGetMemoryInfo", handle)
        limit = self.query("nvmlDeviceGetEnforcedPowerLimit", handle)
        return {
            "name": self.query("nvmlDeviceGetName", handle), "uuid": self.query("nvmlDeviceGetUUID", handle),
            "pci_bus_id": bus, "index": self.query("nvmlDeviceGetIndex", handle),
            "memory_total_bytes": None if memory is None else memory.total,
            "max_sm_clock_mhz": self.query("nvmlDeviceGetMaxClockInfo", handle, clk),
            "max_memory_clock_mhz": self.query("nvmlDeviceGetMaxClockInfo", handle, mem_clk),
            "power_limit_w": None if limit is None else limit / 1000.0,
            "pcie_max_gen": self.query("nvmlDeviceGetMaxPcieLinkGeneration", handle),
            "pcie_max_width": self.query("nvmlDeviceGetMaxPcieLinkWidth", handle),
            "persistence_mode": self.query("nvmlDeviceGetPersistenceMode", handle),
            "numa_node": pci_numa_node(bus),
            "ecc_uncorrected": self.query("nvmlDeviceGetTotalEccErrors", handle,
                                          getattr(self.nv, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1),
                                          getattr(self.nv, "NVML_VOLATILE_ECC", 0)),
            "retired_pages": _count(self.query(
                "nvmlDeviceGetRetiredPages", handle,
                getattr(self.nv, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1))),
        }

    def sample(self, handle: Any) -> dict[str, Any]:
        """What changes while training: utilization, memory, clocks, power, temperature, PCIe link, clock events."""
        util = self.query("nvmlDeviceGetUtilizationRates", handle)
        memory = self.query("nvmlDeviceGetMemoryInfo", handle)
        power = self.query("nvmlDeviceGetPowerUsage", handle)
        events = self.query("nvmlDeviceGetCurrentClocksEventReasons", handle)
        if events is None:
            events = self.query("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        return {
            "gpu_util_pct": None if util is None else util.gpu, "mem_util_pct": None if util is None else util.memory,
            "memory_used_bytes": None if memory is None else memory.used,
            "sm_clock_mhz": self.query("nvmlDeviceGetClockInfo", handle, self.nv.NVML_CLOCK_SM),
            "memory_clock_mhz": self.query("nvmlDeviceGetClockInfo", handle, self.nv.NVML_CLOCK_MEM),
            "power_w": None if power is None else power / 1000.0,
            "energy_mj": self.query("nvmlDeviceGetTotalEnergyConsumption", handle),
            "temperature_c": self.query("nvmlDeviceGetTemperature", handle, self.nv.NVML_TEMPERATURE_GPU),
            "pcie_gen": self.query("nvmlDeviceGetCurrPcieLinkGeneration", handle),
            "pcie_width": self.query("nvmlDeviceGetCurrPcieLinkWidth", handle),
            "clock_events": None if events is None else clock_event_names(int(events)),
            **self.nvlink_counters(handle),
        }


def refuse_unseen_gpus(choice: str, framework: str, module: Any = None) -> None:
    """The one-line UsageError for ``--device auto`` or ``cuda`` where the framework sees no GPU: ``auto``
    only where NVML counts GPUs all the same (a machine without any trains on its CPU, as asked), ``cuda``
    always. The reason names CUDA_VISIBLE_DEVICES where it hides the GPUs or names none of them, else
    ``framework`` (what the framework is and why it may not see them, in words)."""
    nvml = Nvml(module)
    try:
        count = nvml.query("nvmlDeviceGetCount") if nvml.available else None
    finally:
        nvml.shutdown()
    reason = None
    if count:
        text, named = os.environ.get("CUDA_VISIBLE_DEVICES"), visible_devices()
        if named is not None and all(v in ("-1", "NoDevFiles") for v in named):
            why = f"CUDA_VISIBLE_DEVICES={text!r} hides them from this process"
        elif named and all(v.isdigit() and int(v) >= count for v in named):
            why = f"CUDA_VISIBLE_DEVICES={text!r} names none of them (ids 0-{count - 1})"
        else:
            why = framework
        reason = f"this node has {count} NVIDIA GPU(s) (NVML) but {why}"
    if choice == "auto" and reason:
        raise UsageError(f"--device auto: {reason}; fix that, or pass --device cpu to measure the CPU")
    if choice == "cuda":
        raise UsageError("--device cuda: no CUDA device is visible to this process" + (f"; {reason}" if reason else ""))


def visible_gpu_count(env: Mapping[str, str] | None = None, module: Any = None) -> int | None:
    """How many GPUs a process started here would see: NVML's count narrowed by CUDA_VISIBLE_DEVICES as
    CUDA reads it (indices and GPU-/MIG- UUIDs, up to the first entry that names no GPU, a repeated one
    included); None where NVML is absent (no driver: a CPU machine)."""
    nvml = Nvml(module)
    if not nvml.available:
        return None
    try:
        count = nvml.query("nvmlDeviceGetCount") or 0
        named = visible_devices(env)
        if named is None:
            return count
        seen: set[str] = set()
        for entry in named:
            known = (entry.isdigit() and int(entry) < count) or (
                entry.startswith(("GPU-", "MIG-")) and nvml.query("nvmlDeviceGetHandleByUUID", entry) is not None)
            if not known or entry in seen:
                break
            seen.add(entry)
        return len(seen)
    finally:
        nvml.shutdown()


def cuda_bus_id(props: Any) -> str | None:
    """A CUDA device's PCI bus id, from its properties (PyTorch's), in NVML's form (8-digit domain)."""
    if not hasattr(props, "pci_bus_id"):
        return None
    return f"{getattr(props, 'pci_domain_id', 0):08X}:{props.pci_bus_id:02X}:{getattr(props, 'pci_device_id', 0):02X}.0"


def _count(value: Any) -> int | None:
    """How many items NVML returned (None where the query is not supported)."""
    return None if value is None else len(value)


def text(value: Any) -> str:
    """An NVML string, which older bindings return as bytes."""
    return value.decode() if isinstance(value, bytes) else str(value)


def pci_numa_node(bus_id: str | None) -> int | None:
    """The NUMA node the kernel reports for a PCI device (NVML's bus id has an 8-digit domain)."""
    if not bus_id:
        return None
    try:
        with open(f"/sys/bus/pci/devices/{bus_id.lower()[-12:]}/numa_node", encoding="ascii") as handle:
            node = int(handle.read().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


class ProcessSampler:
    """This process's CPU use since the last sample (percent of one core) and resident memory."""

    def __init__(self) -> None:
        self._last = (time.monotonic(), _cpu_seconds())

    def sample(self) -> dict[str, Any]:
        now, cpu = time.monotonic(), _cpu_seconds()
        wall = now - self._last[0]
        percent = 100.0 * (cpu - self._last[1]) / wall if wall > 0 else None
        self._last = (now, cpu)
        return {"process_cpu_pct": percent, "rss_bytes": _rss_bytes()}


def _cpu_seconds() -> float:
    times = os.times()
    return times.user + times.system


def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class TelemetrySampler:
    """A daemon thread writing a ``telemetry`` record every ``interval`` seconds until stopped."""

    def __init__(self, writer: RecordWriter, interval: float, sample: Callable[[], dict[str, Any]],
                 note: str | None = None) -> None:
        self.writer, self.interval, self._sample, self.note = writer, interval, sample, note
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hvdbench-telemetry", daemon=True)

    def start(self) -> "TelemetrySampler":
        if self.interval > 0:
            self._thread.start()
        return self

    def _run(self) -> None:
        first = True
        while not self._stop.wait(0 if first else self.interval):
            extra = {"note": self.note} if first and self.note else {}
            try:
                self.writer.write("telemetry", **self._sample(), **extra)
            except ValueError:
                if self.writer.closed:  # closed under us: the run is over
                    return
                raise
            first = False

    def stop(self) -> None:
        """Stop sampling and wait for the thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


def telemetry_for(nvml: Nvml, handle: Any, node: Callable[[], dict[str, Any]] | None = None
                  ) -> tuple[Callable[[], dict[str, Any]], str | None]:
    """The sampling function for this rank, and the note to record once (NVML absent); ``node`` adds the node's
    own power (core/node_power.py, local rank 0)."""
    process = ProcessSampler()
    extra = node or dict
    if nvml.available and handle is not None:
        return (lambda: {**nvml.sample(handle), **process.sample(), **extra()}), None
    off = f"GPU telemetry off: {nvml.reason or 'this rank trains on the CPU'}"
    return (lambda: {**process.sample(), **extra()}), off


DEVICE_ORDER = "PCI_BUS_ID"  # CUDA numbers GPUs as NVML and nvidia-smi do (CUDA's default puts the fastest first)


def visible_device(cuda_index: int) -> str:
    """What CUDA_VISIBLE_DEVICES says the rank's CUDA device ``cuda_index`` is (an NVML index or a UUID), or
    the index itself where the variable does not list it."""
    visible = visible_devices() or []
    return visible[cuda_index] if cuda_index < len(visible) else str(cuda_index)
