"""A second opinion on the exchange across nodes where a formula cannot see contention: a ring across the job's
nodes simulated with SimGrid on the target's leaf-and-spine fabric (its ``[fabric]``: nodes a leaf switch, the
uplinks' taper, the job's nodes packed or scattered), set against the alpha-beta formula of the same ring on the
same links. On a non-blocking fabric they agree (the calibration printed with every second opinion); on a tapered
one with scattered nodes the simulation sees the leaves' uplinks shared, which no alpha-beta formula shows, and a row
where the two disagree by more than DISAGREE is flagged. Each simulation runs in a process of its own
(simulate_ring.py: SimGrid's engine is one a process), bounded by TIMEOUT_S.

SimGrid's Python module is a test extra: pip's ``simgrid``, or Debian's ``python3-simgrid`` where it was built for
this Python (its extension's ABI tag); where neither is here, the second opinion says so in one line."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import math
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from hvdbench.core.bounded import run_bounded
from hvdbench.core.errors import ReportError

DISAGREE = 0.15  # simulator and formula further apart than this: the row says so
TIMEOUT_S = 600.0  # one simulation (1,024 nodes take seconds)
STEPS = 2  # ring steps simulated: every step moves the same chunks between the same neighbours
SYSTEM_DIRS = ("/usr/lib/python3/dist-packages",)  # where Debian's python3-simgrid puts its extension
PLACEMENTS = ("packed", "scattered")


class SimulationUnavailable(ReportError):
    """No SimGrid here, or a simulation that did not finish."""


def simgrid_module() -> ModuleType:
    """SimGrid's Python module: installed for this Python, else Debian's extension where its ABI tag is this
    Python's; SimulationUnavailable where neither is here."""
    try:
        import simgrid

        return simgrid
    except ImportError:
        pass
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ""
    for folder in SYSTEM_DIRS:
        path = Path(folder) / f"simgrid{suffix}"
        if path.is_file():
            loader = importlib.machinery.ExtensionFileLoader("simgrid", str(path))
            spec = importlib.util.spec_from_file_location("simgrid", path, loader=loader)
            if spec is not None:
                module = importlib.util.module_from_spec(spec)
                loader.exec_module(module)
                sys.modules["simgrid"] = module
                return module
    raise SimulationUnavailable(MISSING)


MISSING = "SimGrid's Python module is not installed for this Python (pip install simgrid, or Debian's python3-simgrid)"


def available() -> bool:
    """Whether simgrid_module would find SimGrid, without loading it (loading it logs a line of its own)."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ""
    return importlib.util.find_spec("simgrid") is not None or any(
        (Path(folder) / f"simgrid{suffix}").is_file() for folder in SYSTEM_DIRS)


@dataclass(frozen=True)
class Tree:
    """A target's leaf-and-spine fabric: nodes a leaf switch, the uplinks' taper (4: a leaf's uplinks carry a
    quarter of its nodes' links together; 1: non-blocking), and where the job's nodes sit (packed: ring neighbours
    share leaves; scattered: the ring's order owes nothing to the leaves, as a scheduler's node list may)."""

    nodes_per_leaf: int
    taper: float
    placement: str = "scattered"

    def describe(self) -> str:
        return (f"{self.nodes_per_leaf} nodes a leaf switch, uplinks {self.taper:g}:1, the job's nodes "
                f"{self.placement}")


@dataclass(frozen=True)
class Simulated:
    """One ring across ``nodes`` simulated and its formula: seconds a step, and the simulation's own cost."""

    nodes: int
    step_s: float
    formula_step_s: float
    wall_s: float
    version: str

    @property
    def ratio(self) -> float:
        """The simulated ring over the formula's: contention the formula cannot see (1: none)."""
        return self.step_s / self.formula_step_s if self.formula_step_s > 0 else math.nan


def simulate_ring(nodes: int, nbytes: float, gbs: float, alpha_s: float, tree: Tree, seed: int = 0) -> Simulated:
    """A ring allreduce of ``nbytes`` across ``nodes`` (each node's link ``gbs`` GB/s, ``alpha_s`` a step) on the
    tree, simulated, beside its formula's step (``alpha + bytes/nodes / bandwidth``)."""
    chunk = nbytes / nodes
    args = {"nodes": nodes, "chunk_bytes": chunk, "gbs": gbs, "alpha_s": alpha_s, "nodes_per_leaf": tree.nodes_per_leaf,
            "taper": tree.taper, "placement": tree.placement, "steps": STEPS, "seed": seed}
    try:
        done = run_bounded([sys.executable, "-m", "hvdbench.analysis.projection.simulate_ring", json.dumps(args)],
                           capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise SimulationUnavailable(f"the simulation of {nodes:,} nodes did not finish in {TIMEOUT_S:g} s") from None
    said = (done.stdout or "").strip().splitlines()
    if done.returncode != 0 or not said:
        why = ((done.stderr or "").strip().splitlines() or ["no output"])[-1][:200]
        raise SimulationUnavailable(f"the simulation of {nodes:,} nodes failed: {why}")
    got = json.loads(said[-1])
    return Simulated(nodes, float(got["step_s"]), alpha_s + chunk / (gbs * 1e9), float(got["wall_s"]),
                     str(got.get("version") or ""))


def second_opinion(counts: list[int], nbytes: float, gbs: float, alpha_s: float,
                   tree: Tree) -> tuple[dict[int, Simulated], list[str]]:
    """Each node count's simulated ring, and the lines that say what was simulated, its calibration (the largest
    count on a non-blocking tree of the same leaves, which must agree with the formula) and each count's ratio;
    one line saying why where it cannot run."""
    try:
        if not available():
            raise SimulationUnavailable(MISSING)
        found = {n: simulate_ring(n, nbytes, gbs, alpha_s, tree) for n in counts if n > 1}
        check = simulate_ring(max(counts), nbytes, gbs, alpha_s, Tree(tree.nodes_per_leaf, 1.0, tree.placement)) \
            if found else None
    except SimulationUnavailable as exc:
        return {}, [f"second opinion (SimGrid) not run: {exc}"]
    if check is None:
        return {}, []
    version = next((s.version for s in found.values() if s.version), "")
    lines = [f"second opinion: a ring of {nbytes / 1e6:,.1f} MB across the nodes simulated with SimGrid {version} "
             f"on {tree.describe()} ({gbs:g} GB/s a node, {alpha_s * 1e6:g} µs a step), against the formula's ring: "
             + ", ".join(f"×{s.ratio:.2f} at {n:,} nodes" for n, s in found.items())
             + f"; calibration: on a non-blocking tree of the same leaves at {check.nodes:,} nodes, ×{check.ratio:.3f} "
             f"(simulated in {sum(s.wall_s for s in found.values()) + check.wall_s:.1f} s)"]
    return found, lines
