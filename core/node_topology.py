"""This node's GPU topology as the driver knows it (NVML) and as ``nvidia-smi topo -m`` prints it, compared.

NVML gives, per GPU pair, the PCIe common ancestor, and per GPU each active NVLink with the type and PCI
id of the device at its far end. A link to another GPU counts towards that pair (DGX-1's hybrid cube mesh,
NVLink bridges between PCIe cards). A link to an NVSwitch joins the GPU to every other GPU on the switch
fabric (DGX/HGX A100, H100, H200, B200): such a pair is NV<k>, k the active switch links of the GPU with
fewer, which is what nvidia-smi prints (NV12 on A100, NV18 on H100). The fabric is taken to be the node's
switches together (an NVL domain's GPUs on other nodes are not visible here). A GPU in MIG mode is shown
as its physical GPU, marked: its instances do not use NVLink between each other.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from hvdbench.core.gpu import Nvml, pci_numa_node
from hvdbench.core.gpu import text as nvml_text

from .topology import Gpu, Topology, TopologyError, parse_topo_text

# NVML's topology levels (nvmlGpuTopologyLevel_t) and the class nvidia-smi prints for each.
NVML_LEVELS = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
NVLINK_DEVICE_TYPE_SWITCH = 2  # nvmlIntNvLinkDeviceType_t
CPU_MASK_WORDS = 16            # 1,024 CPUs
NUMA_MASK_WORDS = 4            # 256 NUMA nodes


def topology_from_nvml_values(bus_ids: Sequence[str], ancestors: Sequence[Sequence[int]],
                              nvlinks: Sequence[Sequence[int]], cpus: Sequence[Sequence[int]],
                              numa_nodes: Sequence[int | None], mig: Sequence[bool] | None = None) -> Topology:
    """Build a Topology from what NVML reports per GPU pair: the common PCIe ancestor level and the
    number of active NVLinks between them (NV<n> wins over the PCIe path, as in nvidia-smi)."""
    count = len(bus_ids)
    links: dict[tuple[str, str], str] = {}
    for a in range(count):
        for b in range(count):
            if a == b:
                continue
            if nvlinks[a][b] != nvlinks[b][a] or ancestors[a][b] != ancestors[b][a]:
                raise TopologyError(f"NVML: GPU{a}-GPU{b} is not symmetric")
            if ancestors[a][b] not in NVML_LEVELS:
                raise TopologyError(f"NVML: GPU{a}-GPU{b}: unknown topology level {ancestors[a][b]}")
            links[(f"GPU{a}", f"GPU{b}")] = f"NV{nvlinks[a][b]}" if nvlinks[a][b] else NVML_LEVELS[ancestors[a][b]]
    gpus = tuple(Gpu(i, bus_ids[i], tuple(cpus[i]), numa_nodes[i], bool(mig[i]) if mig else False)
                 for i in range(count))
    return Topology(gpus, (), links, "nvml")


def _bits(words: Sequence[int] | None, bits: int = 64) -> list[int]:
    return [w * bits + b for w, word in enumerate(words or []) for b in range(bits) if word >> b & 1]


def nvlink_counts(nvml: Nvml, handles: Sequence[Any], bus_ids: Sequence[str]) -> tuple[list[list[int]], int]:
    """Active NVLinks between every GPU pair: direct links to the peer, plus, for two GPUs on the switch
    fabric, the fewer of their switch links; and how many active links end at a device NVML could not name
    (an NVML too old to report the remote device type)."""
    count = len(handles)
    direct = [[0] * count for _ in range(count)]
    switched = [0] * count
    unnamed = 0
    enabled = getattr(nvml.nv, "NVML_FEATURE_ENABLED", 1)
    switch = getattr(nvml.nv, "NVML_NVLINK_DEVICE_TYPE_SWITCH", NVLINK_DEVICE_TYPE_SWITCH)
    ids = [b.lower()[-12:] for b in bus_ids]
    for a, handle in enumerate(handles):
        for link in range(getattr(nvml.nv, "NVML_NVLINK_MAX_LINKS", 18)):
            if nvml.query("nvmlDeviceGetNvLinkState", handle, link) != enabled:
                continue  # inactive, or no such link on this GPU (NVML: not supported)
            kind = nvml.query("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
            if kind == switch:
                switched[a] += 1
                continue
            remote = nvml.query("nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
            peer = nvml_text(remote.busId).lower()[-12:] if remote is not None else None
            if peer in ids:
                direct[a][ids.index(peer)] += 1
            elif kind is None:
                unnamed += 1
    counts = [[direct[a][b] + (min(switched[a], switched[b]) if a != b and switched[a] and switched[b] else 0)
               for b in range(count)] for a in range(count)]
    return counts, unnamed


def _numa(nvml: Nvml, handle: Any, bus_id: str) -> int | None:
    """The NUMA node of a GPU's memory affinity (what nvidia-smi prints), else the kernel's for its PCI device."""
    scope = getattr(nvml.nv, "NVML_AFFINITY_SCOPE_NODE", 0)
    nodes = _bits(nvml.query("nvmlDeviceGetMemoryAffinity", handle, NUMA_MASK_WORDS, scope))
    return nodes[0] if nodes else pci_numa_node(bus_id)


def read_nvml_topology(module: Any = None) -> Topology:
    """This node's GPU topology from the driver through NVML (or an NVML-shaped ``module``);
    TopologyError where there is no driver or no GPU."""
    nvml = Nvml(module)
    if not nvml.available:
        raise TopologyError(str(nvml.reason))
    try:
        count = nvml.query("nvmlDeviceGetCount") or 0
        if count == 0:
            raise TopologyError("NVML found no GPU on this machine")
        handles = [nvml.query("nvmlDeviceGetHandleByIndex", i) for i in range(count)]
        bus_ids = [nvml.bus_id(h) or f"GPU{i}" for i, h in enumerate(handles)]
        ancestors = [[0 if a == b else nvml.query("nvmlDeviceGetTopologyCommonAncestor", handles[a], handles[b])
                      for b in range(count)] for a in range(count)]
        cpus = [_bits(nvml.query("nvmlDeviceGetCpuAffinity", h, CPU_MASK_WORDS)) for h in handles]
        mig = [(nvml.query("nvmlDeviceGetMigMode", h) or [0])[0] == 1 for h in handles]
        nvlinks, unnamed = nvlink_counts(nvml, handles, bus_ids)
        topo = topology_from_nvml_values(bus_ids, ancestors, nvlinks, cpus,
                                         [_numa(nvml, h, b) for h, b in zip(handles, bus_ids)], mig)
        if unnamed:  # said where the topology is shown: NVSwitch links cannot be told from unknown devices
            return replace(topo, source=f"nvml ({unnamed} NVLinks end at devices this NVML cannot name: update "
                                        "the driver or nvidia-ml-py; nvidia-smi topo -m is the better view)")
        return topo
    finally:
        nvml.shutdown()


def disagreements(first: Topology, second: Topology) -> list[str]:
    """Where two views of one node differ: GPU count, any GPU pair's link class, a GPU's CPUs or NUMA node
    (compared only where both know them)."""
    if len(first.gpus) != len(second.gpus):
        return [f"{first.source} sees {len(first.gpus)} GPU(s), {second.source} {len(second.gpus)}"]
    out = []
    for a in range(len(first.gpus)):
        for b in range(a + 1, len(first.gpus)):
            if first.link(a, b) != second.link(a, b):
                out.append(f"GPU{a}-GPU{b}: {first.link(a, b)} ({first.source}) "
                           f"vs {second.link(a, b)} ({second.source})")
    for one, two in zip(first.gpus, second.gpus):
        if one.cpus and two.cpus and one.cpus != two.cpus:
            out.append(f"GPU{one.index} CPUs differ between {first.source} and {second.source}")
        if None not in (one.numa_node, two.numa_node) and one.numa_node != two.numa_node:
            out.append(f"GPU{one.index}: NUMA node {one.numa_node} ({first.source}) "
                       f"vs {two.numa_node} ({second.source})")
    return out


@dataclass(frozen=True)
class NodeTopology:
    """The topology placements are planned on, both views it came from, and where they disagree."""

    topology: Topology
    nvml: Topology | None = None
    text: Topology | None = None
    disagreements: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)


def merge(nvml: Topology, text: Topology) -> Topology:
    """NVML's GPUs and GPU links (the driver's word) with the text's NICs and their links."""
    links = {**text.links, **nvml.links}
    gpus = tuple(replace(g, cpus=g.cpus or t.cpus, numa_node=t.numa_node if g.numa_node is None else g.numa_node)
                 for g, t in zip(nvml.gpus, text.gpus))
    return Topology(gpus, text.nics, links, f"{nvml.source} + {text.source}")


def node_topology(module: Any = None, smi_text: str | None = None) -> NodeTopology:
    """This node's topology from NVML and ``nvidia-smi topo -m`` (``smi_text`` stands in for the command):
    both where both exist (merged, NVML winning, every disagreement named), else the one there is;
    TopologyError saying why neither is there."""
    reasons = []
    try:
        from_nvml: Topology | None = read_nvml_topology(module)
    except TopologyError as exc:
        from_nvml, reasons = None, [str(exc)]
    if smi_text is None:
        smi = shutil.which("nvidia-smi")
        if smi is None:
            reasons.append("no nvidia-smi on PATH")
        else:
            try:
                smi_text = subprocess.run([smi, "topo", "-m"], capture_output=True, text=True, timeout=60,
                                          check=True).stdout
            except (OSError, subprocess.SubprocessError) as exc:
                reasons.append(f"'nvidia-smi topo -m' failed ({exc})")
    from_text: Topology | None = None
    unread: tuple[str, ...] = ()
    try:
        from_text = parse_topo_text(smi_text, "nvidia-smi topo -m") if smi_text else None
    except TopologyError as exc:  # a driver's new format must not cost the NVML view
        reasons.append(str(exc))
        unread = (f"{exc}; placements use NVML's view alone",)
    notes = unread + tuple(f"GPU{g.index} is in MIG mode: shown as its physical GPU; its instances share no NVLink"
                           for g in (from_nvml.gpus if from_nvml else ()) if g.mig)
    if from_nvml is not None and from_text is not None:
        differ = disagreements(from_nvml, from_text)
        chosen = merge(from_nvml, from_text) if len(from_nvml.gpus) == len(from_text.gpus) else from_nvml
        return NodeTopology(chosen, from_nvml, from_text, tuple(differ), notes)
    only = from_nvml or from_text
    if only is not None:
        return NodeTopology(only, from_nvml, from_text, (), notes)
    raise TopologyError("; ".join(reasons) + "; pass a saved 'nvidia-smi topo -m' output (topo --file, run --topology)")


def gpu_nics(physical: int | None) -> list[dict[str, str]] | None:
    """The NICs this node's GPU ``physical`` shares a PCIe switch with (Topology.near_nics), for the rank's record;
    None where the GPU or the topology is unknown."""
    if physical is None:
        return None
    try:
        return local_topology().near_nics(physical)
    except (TopologyError, OSError, ValueError, KeyError):
        return None


def local_topology() -> Topology:
    """This machine's topology for planning placements (see ``node_topology``)."""
    return node_topology().topology
