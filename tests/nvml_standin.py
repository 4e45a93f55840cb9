"""An NVML stand-in that answers as the machine behind a recorded ``nvidia-smi topo -m`` would.

It implements the NVML calls hvdbench makes, with the signatures, return values and errors of the public
NVML API (as nvidia-ml-py exposes it): device count and handles, PCI info, the PCIe common ancestor of two
GPUs (``nvmlGpuTopologyLevel_t``), per-link NVLink state, remote PCI info and remote device type
(``nvmlIntNvLinkDeviceType_t``: GPU 0, switch 2), CPU and memory (NUMA) affinity bit masks, MIG mode,
clocks, power, temperature, PCIe link, clock-event reasons, ECC and retired pages.

How the recorded matrix becomes answers:
- NV# between every pair of GPUs (more links per GPU than direct links could give, as on HGX/DGX A100
  NV12 or H100 NV18): each GPU has # active links, every one ending at one of the node's NVSwitches.
- Otherwise NV# between a pair: # links from each GPU whose remote PCI device is the other GPU (DGX-1's
  hybrid cube mesh, NVLink bridges between PCIe cards).
- PIX, PXB, PHB, NODE, SYS: the matching common-ancestor level; under an NVLink pair, NODE where both GPUs
  share CPUs (else SYS).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from hvdbench.core.topology import Topology

LEVELS = {"PIX": 10, "PXB": 20, "PHB": 30, "NODE": 40, "SYS": 50}


class NVMLError(Exception):
    """nvidia-ml-py's base error."""


class NVMLError_NotSupported(NVMLError):  # noqa: N801 - nvidia-ml-py's name
    pass


class NVMLError_InvalidArgument(NVMLError):  # noqa: N801
    pass


@dataclass
class GpuState:
    """What a stand-in GPU reports beyond topology; a test changes these to plant a slow GPU."""

    name: str = "NVIDIA A100-SXM4-80GB"
    sm_clock: int = 1410
    memory_clock: int = 1593
    max_sm_clock: int = 1410
    max_memory_clock: int = 1593
    power_mw: int = 300_000
    power_limit_mw: int = 400_000
    temperature: int = 55
    pcie_gen: int = 4
    pcie_width: int = 16
    max_pcie_gen: int = 4
    max_pcie_width: int = 16
    clock_events: int = 0
    mig: bool = False
    ecc_uncorrected: int = 0
    retired_pages: int = 0
    nvlink_kib_per_sample: int = 0  # NVLink payload each link moves between two telemetry samples, each way
    nvlink_samples: int = 0


@dataclass
class StandInNvml:
    """A module-like object: pass it to ``Nvml(module)`` or ``read_nvml_topology(module)``."""

    topo: Topology
    switches: int = 6
    max_links: int = 18
    states: list[GpuState] = field(default_factory=list)

    NVML_FEATURE_DISABLED = 0
    NVML_FEATURE_ENABLED = 1
    NVML_NVLINK_DEVICE_TYPE_GPU = 0
    NVML_NVLINK_DEVICE_TYPE_SWITCH = 2
    NVML_AFFINITY_SCOPE_NODE = 0
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_TEMPERATURE_GPU = 0
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_VOLATILE_ECC = 0
    NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1
    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVML_SUCCESS = 0
    NVML_ERROR_NOT_SUPPORTED = 3

    def __post_init__(self) -> None:
        count = len(self.topo.gpus)
        self.states = self.states or [GpuState() for _ in range(count)]
        self.NVML_NVLINK_MAX_LINKS = self.max_links
        self.bus = [f"00000000:{0x07 + 0x10 * i:02X}:00.0" for i in range(count)]
        self.switch_bus = [f"00000000:{0xC0 + s:02X}:00.0" for s in range(self.switches)]
        nv = {(a, b): int(self.topo.link(a, b)[2:]) for a in range(count) for b in range(count)
              if a != b and self.topo.link(a, b).startswith("NV")}
        per_gpu = [[nv.get((a, b), 0) for b in range(count) if b != a] for a in range(count)]
        self.switched = count > 1 and all(len(set(p)) == 1 and p[0] > 0 for p in per_gpu) \
            and sum(per_gpu[0]) > self.max_links
        self.links: list[list[tuple[int, str]]] = []  # per GPU: (remote type, remote bus id) of each active link
        for a in range(count):
            if self.switched:
                mine = [(self.NVML_NVLINK_DEVICE_TYPE_SWITCH, self.switch_bus[i % self.switches])
                        for i in range(per_gpu[a][0])]
            else:
                mine = [(self.NVML_NVLINK_DEVICE_TYPE_GPU, self.bus[b]) for b in range(count) if b != a
                        for _ in range(nv.get((a, b), 0))]
            self.links.append(mine)

    # --- library and devices
    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12040

    def nvmlSystemGetNVMLVersion(self) -> str:
        return "12.550.54.15"

    def nvmlDeviceGetCount(self) -> int:
        return len(self.topo.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        if not 0 <= index < len(self.topo.gpus):
            raise NVMLError_InvalidArgument("Invalid Argument")
        return index

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: str | bytes) -> int:
        text = bus_id.decode() if isinstance(bus_id, bytes) else bus_id
        for index, known in enumerate(self.bus):
            if known.lower()[-12:] == text.lower()[-12:]:
                return index
        raise NVMLError("Not Found")

    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes) -> int:
        text = uuid.decode() if isinstance(uuid, bytes) else uuid
        for index in range(len(self.topo.gpus)):
            if self.nvmlDeviceGetUUID(index) == text:
                return index
        raise NVMLError("Not Found")

    def nvmlDeviceGetIndex(self, handle: int) -> int:
        return handle

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        return f"GPU-5f1a0d6e-0000-4000-8000-{handle:012d}"

    def nvmlDeviceGetName(self, handle: int) -> str:
        return self.states[handle].name

    def nvmlDeviceGetPciInfo(self, handle: int) -> Any:
        return SimpleNamespace(busId=self.bus[handle].encode())

    # --- topology
    def nvmlDeviceGetTopologyCommonAncestor(self, a: int, b: int) -> int:
        link = self.topo.link(a, b)
        if link in LEVELS:
            return LEVELS[link]
        shared = set(self.topo.gpus[a].cpus) & set(self.topo.gpus[b].cpus)
        return LEVELS["NODE" if shared or not self.topo.gpus[a].cpus else "SYS"]

    def _link(self, handle: int, link: int) -> tuple[int, str]:
        if not 0 <= link < self.max_links:
            raise NVMLError_InvalidArgument("Invalid Argument")
        if not self.links[handle]:
            raise NVMLError_NotSupported("Not Supported")  # a GPU without NVLink
        if link >= len(self.links[handle]):
            raise NVMLError_NotSupported("Not Supported")
        return self.links[handle][link]

    def nvmlDeviceGetNvLinkState(self, handle: int, link: int) -> int:
        self._link(handle, link)
        return self.NVML_FEATURE_ENABLED

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: int, link: int) -> int:
        return self._link(handle, link)[0]

    def nvmlDeviceGetNvLinkRemotePciInfo(self, handle: int, link: int) -> Any:
        return SimpleNamespace(busId=self._link(handle, link)[1].encode())

    def nvmlDeviceGetCpuAffinity(self, handle: int, words: int) -> list[int]:
        mask = [0] * words
        for cpu in self.topo.gpus[handle].cpus:
            mask[cpu // 64] |= 1 << (cpu % 64)
        return mask

    def nvmlDeviceGetMemoryAffinity(self, handle: int, words: int, scope: int) -> list[int]:
        node = self.topo.gpus[handle].numa_node
        if node is None:
            raise NVMLError_NotSupported("Not Supported")
        mask = [0] * words
        mask[node // 64] |= 1 << (node % 64)
        return mask

    def nvmlDeviceGetMigMode(self, handle: int) -> list[int]:
        on = int(self.states[handle].mig)
        return [on, on]

    # --- facts and telemetry
    def nvmlDeviceGetMemoryInfo(self, handle: int) -> Any:
        return SimpleNamespace(total=80 * 2**30, used=2**30, free=79 * 2**30)

    def nvmlDeviceGetMaxClockInfo(self, handle: int, clock: int) -> int:
        state = self.states[handle]
        return state.max_sm_clock if clock == self.NVML_CLOCK_SM else state.max_memory_clock

    def nvmlDeviceGetClockInfo(self, handle: int, clock: int) -> int:
        state = self.states[handle]
        return state.sm_clock if clock == self.NVML_CLOCK_SM else state.memory_clock

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: int) -> int:
        return self.states[handle].power_limit_mw

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return self.states[handle].power_mw

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        return self.states[handle].temperature

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:
        return SimpleNamespace(gpu=98, memory=40)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: int) -> int:
        return self.states[handle].max_pcie_gen

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: int) -> int:
        return self.states[handle].max_pcie_width

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: int) -> int:
        return self.states[handle].pcie_gen

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: int) -> int:
        return self.states[handle].pcie_width

    def nvmlDeviceGetPersistenceMode(self, handle: int) -> int:
        return 1

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        return self.states[handle].clock_events

    def nvmlDeviceGetTotalEccErrors(self, handle: int, error_type: int, counter: int) -> int:
        return self.states[handle].ecc_uncorrected

    def nvmlDeviceGetRetiredPages(self, handle: int, cause: int) -> list[int]:
        return list(range(self.states[handle].retired_pages))

    def nvmlDeviceGetFieldValues(self, handle: int, fields: list[tuple[int, int]]) -> list[Any]:
        """The NVLink link count (field 91, an unsigned int) and each link's payload counters (138 sent, 139
        received, KiB, unsigned long long, growing by ``nvlink_kib_per_sample`` at every call); any other field,
        or a link the GPU lacks, answers NOT_SUPPORTED in its own value, as NVML does."""
        state, links = self.states[handle], len(self.links[handle])
        state.nvlink_samples += 1
        out = []
        for field_id, scope in fields:
            if field_id == 91:
                out.append(SimpleNamespace(nvmlReturn=0, valueType=1, value=SimpleNamespace(uiVal=links)))
            elif field_id in (138, 139) and 0 <= scope < links:
                kib = state.nvlink_samples * state.nvlink_kib_per_sample
                out.append(SimpleNamespace(nvmlReturn=0, valueType=3, value=SimpleNamespace(ullVal=kib)))
            else:
                out.append(SimpleNamespace(nvmlReturn=self.NVML_ERROR_NOT_SUPPORTED, valueType=0, value=None))
        return out
