"""Topology: which link joins each pair of GPUs (and NICs) of a node, from NVML or ``nvidia-smi topo -m``.

Both sources produce the same typed Topology. Link classes, fastest first: NV# (more bonded NVLinks
faster), PIX (one PCIe switch), PXB (several PCIe bridges), PHB (a PCIe host bridge), NODE (host
bridges within a NUMA node), SYS (across the SMP interconnect between NUMA nodes).
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from hvdbench.core.errors import HvdbenchError
from hvdbench.core.validate import read_small_text

PCIE_CLASSES = ("PIX", "PXB", "PHB", "NODE", "SYS")
_NV = re.compile(r"^NV(\d+)$")
_ALIASES = {"SOC": "SYS"}  # drivers before 384 printed SOC for what later ones call SYS
_MULTIWORD = {"CPU Affinity": "CPU_Affinity", "NUMA Affinity": "NUMA_Affinity", "GPU NUMA ID": "GPU_NUMA_ID"}
_GPU = re.compile(r"^GPU(\d+)$")
# Terminal control sequences: recent drivers underline the header line (ESC[4m ... ESC[0m) even when
# nvidia-smi's output is captured or saved to a file.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class TopologyError(HvdbenchError):
    """A link matrix that cannot be read: ragged, asymmetric, or with an unknown link code."""


def link_rank(link: str) -> tuple[int, int]:
    """Sort key, fastest first: NV# by descending link count, then the PCIe classes in order."""
    match = _NV.match(link)
    if match:
        return (0, -int(match.group(1)))
    return (1 + PCIE_CLASSES.index(link), 0)


def normalise_link(code: str) -> str:
    """A link code as printed, checked: NV<n>, PIX, PXB, PHB, NODE, SYS (SOC read as SYS)."""
    code = _ALIASES.get(code, code)
    if _NV.match(code) or code in PCIE_CLASSES:
        return code
    raise ValueError(f"unknown link code {code!r} (known: NV#, {', '.join(PCIE_CLASSES)})")


def parse_cpus(text: str | None) -> tuple[int, ...]:
    """``0-11,24-35`` as CPU numbers; ``N/A`` or nothing as none."""
    if not text or text.upper() == "N/A":
        return ()
    cpus: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.extend(range(int(low), int(high or low) + 1))
    return tuple(cpus)


def format_cpus(cpus: Sequence[int]) -> str:
    """CPU numbers as ranges, the way nvidia-smi prints them (``0-11,24-35``)."""
    ranges = []
    for _, run in itertools.groupby(enumerate(sorted(set(cpus))), key=lambda pair: pair[1] - pair[0]):
        values = [cpu for _, cpu in run]
        ranges.append(f"{values[0]}" if len(values) == 1 else f"{values[0]}-{values[-1]}")
    return ",".join(ranges)


@dataclass(frozen=True)
class Gpu:
    """One GPU of the node (``mig``: MIG mode is on; only NVML can tell)."""

    index: int
    pci_bus_id: str | None = None
    cpus: tuple[int, ...] = ()
    numa_node: int | None = None
    mig: bool = False


@dataclass(frozen=True)
class Nic:
    """One network adapter in the matrix: its column label and its device name (NIC0 -> mlx5_0)."""

    label: str
    name: str


@dataclass(frozen=True)
class Topology:
    """GPUs, NICs and the link class of every pair (keys are column labels: GPU0, NIC0, mlx5_0)."""

    gpus: tuple[Gpu, ...]
    nics: tuple[Nic, ...] = ()
    links: Mapping[tuple[str, str], str] = field(default_factory=dict)
    source: str = ""

    def link(self, a: int, b: int) -> str:
        """The link class between GPU a and GPU b."""
        return self.links[(f"GPU{a}", f"GPU{b}")]

    def near_nics(self, gpu: int) -> list[dict[str, str]]:
        """The NICs GPU ``gpu`` reaches without crossing a host bridge (PIX: one PCIe switch; PXB: several), where
        GPUDirect RDMA pays: ``[{"nic": "mlx5_0", "link": "PIX"}]``."""
        label = f"GPU{gpu}"
        return [{"nic": nic.name, "link": link} for nic in self.nics
                if (link := self.links.get((label, nic.label), "")) in ("PIX", "PXB")]

    def nearest_nics(self) -> list[tuple[int, str, str]]:
        """Each GPU's nearest NIC and the link to it: ``(gpu, "mlx5_0", "PIX")`` (the fastest link, ties by name);
        none where the node shows no NIC."""
        out = []
        for gpu in self.gpus:
            reach = [(link_rank(self.links.get((f"GPU{gpu.index}", n.label), "SYS")), n.name,
                      self.links.get((f"GPU{gpu.index}", n.label), "SYS")) for n in self.nics]
            if reach:
                _, name, link = min(reach)
                out.append((gpu.index, name, link))
        return out

    def nic_warning(self) -> str | None:
        """Where GPUs reach every NIC only across the CPUs' interconnect (SYS) or a host bridge (NODE/PHB): their
        traffic to other nodes crosses it, and GPUDirect RDMA cannot pay; None where every GPU has a NIC near."""
        far = [(g, nic, link) for g, nic, link in self.nearest_nics() if link in ("SYS", "NODE", "PHB")]
        if not far:
            return None
        gpus = ", ".join(str(g) for g, _, _ in far)
        worst = max((link for _, _, link in far), key=link_rank)
        across = "the CPUs' interconnect" if worst == "SYS" else "a host bridge"
        return (f"{len(far)} of {len(self.gpus)} GPU(s) ({gpus}) reach the nearest NIC only across "
                f"{across} ({worst}): their traffic to other "
                "nodes crosses it and GPUDirect RDMA cannot pay; a node for multi-node training has a NIC beside each "
                "GPU or pair (PIX)")

    def labels(self) -> list[str]:
        """Column labels: GPUs then NICs."""
        return [f"GPU{g.index}" for g in self.gpus] + [n.label for n in self.nics]

    def gpu_classes(self) -> list[str]:
        """The link classes present between GPUs, fastest first."""
        found = {self.link(a.index, b.index) for a in self.gpus for b in self.gpus if a.index < b.index}
        return sorted(found, key=link_rank)

    def slowest(self, devices: Iterable[int]) -> str | None:
        """The slowest link among a set of GPUs (None for fewer than two)."""
        ids = sorted(devices)
        links = [self.link(a, b) for i, a in enumerate(ids) for b in ids[i + 1:]]
        return max(links, key=link_rank) if links else None

    def matrix_text(self) -> str:
        """The matrix in nvidia-smi's layout (tab-separated), with CPU and NUMA affinity per GPU."""
        labels = self.labels()
        lines = ["\t" + "\t".join(labels + ["CPU Affinity", "NUMA Affinity"])]
        for label in labels:
            cells = ["X" if label == other else self.links[(label, other)] for other in labels]
            gpu = next((g for g in self.gpus if f"GPU{g.index}" == label), None)
            extra = ([format_cpus(gpu.cpus) or "N/A", "N/A" if gpu.numa_node is None else str(gpu.numa_node)]
                     if gpu else [])
            lines.append("\t".join([label, *cells, *extra]))
        if any(n.label != n.name for n in self.nics):
            lines += ["", "NIC Legend:", ""] + [f"  {n.label}: {n.name}" for n in self.nics]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON: GPUs, NICs, and the matrix as rows of labels."""
        labels = self.labels()
        return {
            "source": self.source,
            "gpus": [asdict(g) for g in self.gpus],
            "nics": [asdict(n) for n in self.nics],
            "labels": labels,
            "matrix": [["X" if a == b else self.links[(a, b)] for b in labels] for a in labels],
            "gpu_classes": self.gpu_classes(),
        }


def _tokens(line: str) -> list[str]:
    for words, joined in _MULTIWORD.items():
        line = line.replace(words, joined)
    return line.split()


def parse_topo_text(text: str, source: str = "text") -> Topology:
    """Parse ``nvidia-smi topo -m`` output in any of its printed or pasted forms.

    Raises TopologyError naming the line for a ragged row, an asymmetric matrix or an unknown code.
    """
    lines = _ANSI.sub("", text).splitlines()
    header_at = next((i for i, line in enumerate(lines) if re.match(r"^GPU0$", (_tokens(line) or [""])[0])), None)
    if header_at is None:
        raise TopologyError(f"{source}: no topology matrix (no header line starting with GPU0)")
    header = _tokens(lines[header_at])
    extra_cols = [h for h in header if h in _MULTIWORD.values()]
    devices = [h for h in header if h not in _MULTIWORD.values()]
    if header[: len(devices)] != devices:
        raise TopologyError(f"{source}: line {header_at + 1}: affinity columns before device columns")
    rows, extras, end = _matrix_rows(lines, header_at, devices, extra_cols, source)
    links = _links(rows, devices, header_at, source)
    gpus, nics = _devices(devices, extras, _nic_legend(lines[end:]), source)
    if [g.index for g in gpus] != list(range(len(gpus))):
        raise TopologyError(f"{source}: line {header_at + 1}: GPU columns are not GPU0..GPU{len(gpus) - 1}")
    return Topology(tuple(gpus), tuple(nics), links, source)


def _matrix_rows(lines: list[str], header_at: int, devices: list[str], extra_cols: list[str],
                 source: str) -> tuple[dict[str, list[str]], dict[str, dict[str, str]], int]:
    """The matrix's rows under the header (each device's link codes and its affinity columns), and the line
    after the matrix; a ragged or missing row is a TopologyError."""
    rows: dict[str, list[str]] = {}
    extras: dict[str, dict[str, str]] = {}
    end = header_at + 1
    for end in range(header_at + 1, len(lines)):
        tokens = _tokens(lines[end])
        if not tokens or tokens[0] not in devices:
            break
        label, cells = tokens[0], tokens[1:]
        expected = len(devices) + (len(extra_cols) if _GPU.match(label) else 0)  # NIC rows carry no affinity
        if len(cells) != expected:
            raise TopologyError(f"{source}: line {end + 1}: row {label} has {len(cells)} cells, expected "
                                f"{len(devices)} links" + (f" and {len(extra_cols)} affinity columns"
                                                           if expected > len(devices) else ""))
        rows[label] = cells[: len(devices)]
        extras[label] = dict(zip(extra_cols, cells[len(devices):]))
    else:
        end = len(lines)
    missing = [d for d in devices if d not in rows]
    if missing:
        raise TopologyError(f"{source}: line {header_at + 1}: no row for {', '.join(missing)}")
    return rows, extras, end


def _links(rows: dict[str, list[str]], devices: list[str], header_at: int, source: str) -> dict[tuple[str, str], str]:
    """Each pair's link class, checked: X on the diagonal, known codes, a symmetric matrix."""
    row_line = {label: header_at + 2 + i for i, label in enumerate(rows)}
    links: dict[tuple[str, str], str] = {}
    for a, cells in rows.items():
        for b, code in zip(devices, cells):
            if a == b:
                if code != "X":
                    raise TopologyError(f"{source}: line {row_line[a]}: {a} to itself is {code!r}, expected X")
                continue
            try:
                links[(a, b)] = normalise_link(code)
            except ValueError as exc:
                raise TopologyError(f"{source}: line {row_line[a]}: {a}-{b}: {exc}") from None
    for (a, b), code in links.items():
        if links[(b, a)] != code:
            raise TopologyError(f"{source}: line {row_line[a]}: not symmetric: {a}-{b} is {code} "
                                f"but {b}-{a} is {links[(b, a)]}")
    return links


def _devices(devices: list[str], extras: dict[str, dict[str, str]], nic_names: dict[str, str],
             source: str) -> tuple[list[Gpu], list[Nic]]:
    """The GPUs with their CPU and NUMA affinity, and the NICs with their legend names."""
    gpus, nics = [], []
    for label in devices:
        match = _GPU.match(label)
        if not match:
            nics.append(Nic(label, nic_names.get(label, label)))
            continue
        info = extras[label]
        numa = info.get("NUMA_Affinity", "N/A")
        try:
            cpus = parse_cpus(info.get("CPU_Affinity"))
        except ValueError:
            raise TopologyError(f"{source}: row {label}: CPU affinity {info.get('CPU_Affinity')!r} is not a "
                                "CPU list such as 0-11,24-35") from None
        gpus.append(Gpu(int(match.group(1)), cpus=cpus, numa_node=int(numa) if numa.isdigit() else None))
    return gpus, nics


def _nic_legend(lines: Sequence[str]) -> dict[str, str]:
    """``NIC0: mlx5_0`` lines after a ``NIC Legend:`` heading."""
    names: dict[str, str] = {}
    in_legend = False
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("NIC Legend"):
            in_legend = True
            continue
        match = re.match(r"^(NIC\d+)\s*:\s*(\S+)$", stripped)
        if in_legend and match:
            names[match.group(1)] = match.group(2)
    return names


MAX_TOPOLOGY_BYTES = 1 << 20  # a 72-GPU matrix with NICs is ~40 kB


def read_topology_file(path: Path) -> Topology:
    """A saved ``nvidia-smi topo -m`` output, or hvdbench's own ``topo --json``."""
    try:
        text = read_small_text(path, MAX_TOPOLOGY_BYTES, "a topology matrix ('nvidia-smi topo -m')", strict=False)
    except ValueError as exc:
        raise TopologyError(str(exc)) from None
    if text.lstrip().startswith("{"):
        try:
            return topology_from_json(json.loads(text), str(path))
        except ValueError as exc:
            raise TopologyError(f"{path}: not valid JSON ({exc})") from None
    return parse_topo_text(text, str(path))


def topology_from_json(data: Any, source: str = "json") -> Topology:
    """The inverse of Topology.to_json; a TopologyError names what does not fit."""
    try:
        labels = [str(label) for label in data["labels"]]
        matrix = data["matrix"]
        if len(matrix) != len(labels) or any(len(row) != len(labels) for row in matrix):
            raise TopologyError(f"{source}: the matrix is not {len(labels)} x {len(labels)} like its labels")
        links = {(a, b): normalise_link(str(matrix[i][j])) for i, a in enumerate(labels)
                 for j, b in enumerate(labels) if a != b}
        gpus = tuple(Gpu(int(g["index"]), g.get("pci_bus_id"), tuple(int(c) for c in g.get("cpus", ())),
                         g.get("numa_node"), bool(g.get("mig"))) for g in data["gpus"])
        nics = tuple(Nic(str(n["label"]), str(n["name"])) for n in data.get("nics", []))
    except TopologyError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TopologyError(f"{source}: not hvdbench's topology JSON ({type(exc).__name__}: {exc})") from None
    if [f"GPU{g.index}" for g in gpus] + [n.label for n in nics] != labels:
        raise TopologyError(f"{source}: its gpus and nics do not match its labels")
    return Topology(gpus, nics, links, source)
