"""A target cluster in one file (``hvdbench project RESULTS --target cluster.toml``): nodes, GPUs per node,
the bus within a node and the NICs between nodes, and the efficiency a buyer asks how long it holds.
Every key is checked; a bad one is one line naming it and the valid ones. Shipped examples:
``analysis/projection/targets/*.toml``, named by their stem (``--target dgx-h100``)."""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hvdbench.core.errors import UsageError
from hvdbench.core.validate import MAX_TOML, read_small_text

from .allreduce_model import Fabric
from .simulated import PLACEMENTS, Tree

SHIPPED = Path(__file__).parent / "targets"

# key -> (type, required, what it is); nested tables as their own dicts
_TOP: dict[str, tuple[type, bool, str]] = {
    "name": (str, True, "the cluster's name"),
    "gpu": (str, True, "the GPU model of its nodes as its name reads (H100, L40S): the projection's compute is the "
                       "measured device's, so it must be this model"),
    "gpus_per_node": (int, True, "GPUs (ranks) per node"),
    "nodes": (list, True, "node counts to project, e.g. [1, 2, 4, 8, 16]"),
    "efficiency_below": (float, False, "the efficiency in % the report asks how long it holds (default 80)"),
    "intra_node": (dict, True, "the bus within a node"),
    "inter_node": (dict, True, "the NICs between nodes"),
    "fabric": (dict, False, "the leaf-and-spine fabric between nodes, for the SimGrid second opinion"),
}
_FABRIC: dict[str, tuple[type, bool, str]] = {
    "nodes_per_leaf": (int, True, "nodes a leaf switch holds"),
    "taper": (float, True, "the leaves' uplinks' oversubscription: 1 non-blocking, 4 for 4:1"),
    "placement": (str, False, f"where the job's nodes sit: {' or '.join(PLACEMENTS)} (default scattered)"),
}
_INTRA: dict[str, tuple[type, bool, str]] = {
    "bus": (str, True, "NVLink/NVSwitch or PCIe, in words"),
    "gbs": (float, True, "bus bandwidth per GPU an allreduce reaches, GB/s"),
    "latency_us": (float, True, "latency per ring step, µs"),
    "nvls": (bool, False, "NVLink SHARP in the node's NVSwitch (NCCL's NVLS: H100/H200 HGX and DGX), default false"),
}
_INTER: dict[str, tuple[type, bool, str]] = {
    "nics": (int, True, "NICs per node"),
    "nic_gbit": (float, True, "each NIC's rate, Gbit/s"),
    "latency_us": (float, True, "latency per ring step, µs"),
    "collnet": (bool, False, "SHARP aggregation in the switches between nodes (NCCL's CollNet, with its SHARP "
                             "plugin), default false"),
}


# Beyond these no cluster has: a larger figure is a slip of units (Gbit/s for GB/s, ns for µs)
MAX_GPUS_PER_NODE = 1024  # an NVLink domain of 576 GPUs is the largest today
MAX_NICS = 64
MAX_LATENCY_US = 1e5  # 0.1 s per ring step
GBS = (1e-4, 1e4)  # as analysis/allreduce_model.PLAUSIBLE_GBS


@dataclass(frozen=True)
class Target:
    """A cluster to project to."""

    name: str
    gpu: str
    gpus_per_node: int
    nodes: tuple[int, ...]
    efficiency_below: float
    bus: str
    intra_gbs: float
    intra_latency_us: float
    nics: int
    nic_gbit: float
    inter_latency_us: float
    source: str
    nvls: bool = False
    collnet: bool = False
    tree: Tree | None = None  # the leaf-and-spine fabric, where the file describes it

    @property
    def inter_gbs(self) -> float:
        """A node's injection bandwidth: every NIC at its rate, in GB/s."""
        return self.nics * self.nic_gbit / 8

    def inter_link(self) -> str:
        """The link between nodes as ``project``'s ``--link`` spec."""
        return f"{_slug(self.name)}={self.inter_gbs:g},{self.inter_latency_us:g}us"

    def intra_link(self) -> str:
        """The bus within a node as a link spec."""
        return f"{_slug(self.bus)}={self.intra_gbs:g},{self.intra_latency_us:g}us"

    def matches(self, device: str | None) -> bool:
        """Whether a measured device is the target's GPU model (its name holds the target's, case aside)."""
        return bool(device) and self.gpu.lower() in str(device).lower()

    def nccl_fabric(self) -> Fabric:
        """What its fabric offers NCCL beyond ring and tree."""
        return Fabric(nvls=self.nvls, collnet=self.collnet)

    def describe(self) -> str:
        offers = [name for name, has in (("NVLS", self.nvls), ("CollNet/SHARP", self.collnet)) if has]
        return (f"target {self.name} ({self.source}): {self.gpus_per_node} × {self.gpu} per node on {self.bus} "
                f"({self.intra_gbs:g} GB/s, {self.intra_latency_us:g} µs), {self.nics} × {self.nic_gbit:g} Gbit/s "
                f"NICs per node ({self.inter_gbs:g} GB/s, {self.inter_latency_us:g} µs); NCCL's algorithms: ring, "
                f"tree{''.join(', ' + o for o in offers)}")


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._+-" else "-" for c in text).strip("-") or "target"


def _checked(table: Any, keys: dict[str, tuple[type, bool, str]], where: str, source: str) -> dict[str, Any]:
    """The table's values, each of its declared type; an unknown, missing or mistyped key is a UsageError."""
    if not isinstance(table, dict):
        raise UsageError(f"{source}: {where or 'the file'} must be a table")
    prefix = f"{where}." if where else ""
    unknown = sorted(set(table) - set(keys))
    if unknown:
        raise UsageError(f"{source}: unknown key {prefix}{unknown[0]} (valid: {', '.join(keys)})")
    missing = [k for k, (_, required, _) in keys.items() if required and k not in table]
    if missing:
        raise UsageError(f"{source}: missing {prefix}{missing[0]} ({keys[missing[0]][2]})")
    out = {}
    for key, value in table.items():
        kind, _, what = keys[key]
        ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
        if kind is float:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
        elif kind is int:
            ok = ok and value > 0
        elif kind is str:
            ok = ok and bool(value.strip())
        if not ok:
            raise UsageError(f"{source}: {prefix}{key} = {value!r}: expected {_KIND[kind]} ({what})")
        out[key] = float(value) if kind is float else value
    return out


_KIND = {str: "text", int: "a whole number > 0", float: "a number > 0", list: "a list", dict: "a table",
         bool: "true or false"}


def parse_target(text: str, source: str) -> Target:
    """A target cluster from TOML text; every problem is one UsageError line naming its key."""
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise UsageError(f"{source}: not TOML: {exc}") from None
    top = _checked(data, _TOP, "", source)
    intra = _checked(top["intra_node"], _INTRA, "intra_node", source)
    inter = _checked(top["inter_node"], _INTER, "inter_node", source)
    nodes = top["nodes"]
    if not nodes or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in nodes):
        raise UsageError(f"{source}: nodes = {nodes!r}: expected a list of whole numbers > 0")
    _bounded(source, top, intra, inter)
    tree = _tree(top["fabric"], source) if "fabric" in top else None
    below = top.get("efficiency_below", 80.0)
    if not 1 < below < 100:
        raise UsageError(f"{source}: efficiency_below = {below:g}: expected a percentage above 1 and below 100 "
                         "(80 for 80%; a fraction such as 0.8 is refused, as it would read as 0.8%)")
    return Target(top["name"].strip(), top["gpu"].strip(), top["gpus_per_node"], tuple(sorted(set(nodes))), below,
                  intra["bus"].strip(),
                  intra["gbs"], intra["latency_us"], inter["nics"], inter["nic_gbit"], inter["latency_us"], source,
                  intra.get("nvls", False), inter.get("collnet", False), tree)


def _tree(table: Any, source: str) -> Tree:
    """The [fabric] table as a Tree; a taper below 1 or a placement not known is one line."""
    fabric = _checked(table, _FABRIC, "fabric", source)
    placement = fabric.get("placement", "scattered").strip()
    if placement not in PLACEMENTS:
        raise UsageError(f"{source}: fabric.placement = {placement!r}: expected {' or '.join(PLACEMENTS)}")
    if not 1 <= fabric["taper"] <= 64 or fabric["nodes_per_leaf"] > MAX_GPUS_PER_NODE:
        raise UsageError(f"{source}: fabric.taper = {fabric['taper']:g} (1 to 64) or nodes_per_leaf = "
                         f"{fabric['nodes_per_leaf']} (at most {MAX_GPUS_PER_NODE}): no fabric has that")
    return Tree(fabric["nodes_per_leaf"], fabric["taper"], placement)


def _bounded(source: str, top: dict[str, Any], intra: dict[str, Any], inter: dict[str, Any]) -> None:
    """Figures no cluster has are refused in one line: a slip of units would project nonsense."""
    checks = (("gpus_per_node", top["gpus_per_node"], 1, MAX_GPUS_PER_NODE),
              ("intra_node.gbs", intra["gbs"], *GBS), ("intra_node.latency_us", intra["latency_us"], 0, MAX_LATENCY_US),
              ("inter_node.nics", inter["nics"], 1, MAX_NICS),
              ("inter_node.nic_gbit", inter["nic_gbit"], GBS[0] * 8, GBS[1] * 8 / max(1, inter["nics"])),
              ("inter_node.latency_us", inter["latency_us"], 0, MAX_LATENCY_US))
    for key, value, low, high in checks:
        if not low <= value <= high:
            raise UsageError(f"{source}: {key} = {value:g}: no cluster has that (expected {low:g} to {high:g})")


def load_target(name_or_path: str) -> Target:
    """A target from a file, or a shipped one by its name (``dgx-h100``)."""
    path = Path(name_or_path)
    if not path.exists() and (SHIPPED / f"{name_or_path}.toml").exists():
        path = SHIPPED / f"{name_or_path}.toml"
    if not path.exists():
        shipped = ", ".join(sorted(p.stem for p in SHIPPED.glob("*.toml")))
        raise UsageError(f"--target {name_or_path}: no such file, nor a shipped target ({shipped})")
    try:
        text = read_small_text(path, MAX_TOML, "a target cluster")
    except ValueError as exc:
        raise UsageError(f"--target {exc}") from None
    return parse_target(text, str(path))
