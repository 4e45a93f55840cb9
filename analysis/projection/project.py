"""``hvdbench project``: each workload's throughput, speedup and efficiency at N nodes, projected from a
few measurements (compute from the --independent twin or --breakdown, gradients, Horovod's fusion and
cycle, allreduce alpha/beta fitted per link class, overlap fitted from the measured runs), for the measured
interconnect and each what-if link, with 95% intervals carried from the measurements' resamples."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from hvdbench.core.errors import ReportError

from .allreduce_model import CHOSEN, Fabric, Link, nccl_pick, parse_link, step_allreduce
from ..collect import Collection

from .backtest import Z95, calibration
from .at_batch import BatchAsked, ComputeCurve, at_batch, batch_cells, batch_of, families, shown
from .inputs import (DRAWS, Measured, FittedWorkload, allreduce_curves, other_curve, pick_curve,
                                workload_inputs)
from ..tables.scaling import run_stats_table, scaling_table
from .target import MAX_GPUS_PER_NODE, Target
from ..stats import percentile_interval

WITHIN = "within a node"
DEFAULT_NODES = (1, 2, 4, 8, 16, 32, 64)
EFFICIENCY_BELOW = 80.0  # % where no target says otherwise
PROJECTION_SCHEMA: dict[str, str] = {
    "system": "string", "workload": "string", "unit": "string", "link": "string", "algorithm": "string",
    "nodes": "int64", "gpus_per_node": "int64", "np": "int64", "exchange_ms": "float64", "step_ms": "float64",
    "step_low_ms": "float64", "step_high_ms": "float64", "step_overlapped_ms": "float64", "step_serial_ms": "float64",
    "overlap": "float64", **{f"{name}{end}": "float64" for name in ("throughput", "speedup", "efficiency")
                             for end in ("", "_low", "_high")},
    "measured_step_ms": "float64", "measured_throughput": "float64", "error_pct": "float64",
    "extrapolated_x": "float64", "compute_on": "string", "measured_gpus_per_node": "int64",
    "runs_as": "string", "link_note": "string", "simulated_x": "float64", "batch_per_gpu": "Int64",
    "batch_e": "float64",
}
# Beyond 65,536 nodes no system exists to check a projection against; asked for more is refused.
MAX_NODES = 65536
# The relative error of one doubling of the node count beyond what was measured, as docs/results/projection.md
# measured it (4 hosts projected from 2-host fits: median |error| 15% with each rank's CPU share fixed, 26%
# without, over 12 held-out cases each; the larger kept): each doubling
# beyond the largest measured node count widens a row's interval by this much more on each side.
ERROR_PER_DOUBLING = 0.25
LINKS_SCHEMA: dict[str, str] = {"system": "string", "link": "string", "kind": "string", "alpha_us": "float64",
                                "gbs": "float64", "source": "string"}


@dataclass
class Projection:
    """The projected table, the links it used and each workload's inputs and fitted overlap."""

    table: pd.DataFrame
    links: pd.DataFrame
    workloads: list[FittedWorkload]
    overlap: dict[str, tuple[float, float, float, str]] = field(default_factory=dict)
    target: Target | None = None
    overlap_draws: dict[str, np.ndarray] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what a second opinion said (analysis/projection/simulated.py)

    def fitted_overlap(self) -> dict[str, tuple[float, np.ndarray, str]]:
        """Each workload's overlap with its draws and source, as ``project(..., overlaps=)`` takes it."""
        return {label: (phi, self.overlap_draws[label], how) for label, (phi, _, _, how) in self.overlap.items()}


def _fit_overlap(w: FittedWorkload, intra: tuple[Link | None, list[Link | None]],
                 inter: tuple[Link | None, list[Link | None]]
                 ) -> tuple[float, np.ndarray, str]:
    """The overlap fraction each measured exchanging run implies (their median), per draw as well: from the
    runs whose exchange crosses nodes where there are any (overlap over shared memory does not carry to a
    network), else from those within a node; where no run can be judged, 0.5 with draws across [0, 1]
    (the interval then spans both bounds)."""
    usable = [m for m in w.measured if (intra[0] if m.nodes == 1 else inter[0]) is not None]
    usable = [m for m in usable if m.nodes > 1] or usable
    if not usable:
        rng = np.random.default_rng(0)
        return 0.5, rng.uniform(0.0, 1.0, DRAWS), "not fitted (no exchanging run of 2+ ranks with a curve for its link)"

    def fn(m: Measured, d: int | None) -> Callable[[float], float]:
        a = intra[0] if d is None else intra[1][d]
        e = inter[0] if d is None else inter[1][d]
        return step_allreduce("hierarchical" if m.hierarchical else "ring", m.nodes, m.np // m.nodes, a, e,
                              w.model.grad_bytes)

    point = float(np.median([w.model.overlap_of(fn(m, None), m.step_s) for m in usable]))
    draws = np.array([np.median([w.model.scaled(float(w.compute_draws[d])).overlap_of(fn(m, d), float(m.step_draws[d]))
                                 for m in usable]) for d in range(DRAWS)])
    where = "across nodes" if usable[0].nodes > 1 else "within one node (no exchanging run across nodes)"
    how = f"fitted {where} from " + ", ".join(f"{m.np} rank(s) on {m.nodes} node(s)" for m in usable)
    return point, draws, how


def _row(w: FittedWorkload, link: str, algorithm: str, nodes: int, per_node: int, overlap: float,
         overlap_draws: np.ndarray,
         fn: Callable[[float], float], fn_draws: list[Callable[[float], float]]) -> dict[str, Any]:
    ranks = nodes * per_node
    exchange, full, none = w.model.bounds(fn)
    step = none - overlap * (none - full)
    samples = w.rank_throughput * w.model.compute_s  # samples per step per rank
    steps = np.array([w.model.scaled(float(w.compute_draws[d])).step_s(fn_draws[d], float(overlap_draws[d]))
                      for d in range(DRAWS)])
    thr, thr_draws = ranks * samples / step, ranks * samples / steps
    speedup, speed_draws = thr / w.baseline, thr_draws / w.baseline_draws[:DRAWS]
    found = [m for m in w.measured if m.nodes == nodes and m.np == ranks
             and (m.hierarchical == (algorithm == "hierarchical") or nodes == 1)]
    measured = found[0] if found and link in (WITHIN, "measured") else None  # a what-if link was not measured
    cells = {"throughput": (thr, thr_draws), "speedup": (speedup, speed_draws),
             "efficiency": (speedup / ranks, speed_draws / ranks)}
    out: dict[str, Any] = {
        "compute_on": w.device, "measured_gpus_per_node": w.measured_per_node,
        "system": w.key["system"], "workload": w.label, "unit": w.unit, "link": link, "algorithm": algorithm,
        "nodes": nodes, "gpus_per_node": per_node, "np": ranks, "exchange_ms": exchange * 1e3, "step_ms": step * 1e3,
        **dict(zip(("step_low_ms", "step_high_ms"), (v * 1e3 for v in percentile_interval(steps)))),
        "step_overlapped_ms": full * 1e3, "step_serial_ms": none * 1e3, "overlap": overlap,
        "measured_step_ms": measured.step_s * 1e3 if measured else np.nan,
        "measured_throughput": measured.throughput if measured else np.nan,
        "error_pct": (step / measured.step_s - 1.0) * 100 if measured else np.nan,
    }
    for name, (value, values) in cells.items():
        low, high = percentile_interval(values)
        out.update({name: value, f"{name}_low": low, f"{name}_high": high})
    return out


def _check_request(scaling: pd.DataFrame, nodes: Sequence[int], gpus_per_node: int | None,
                   links: Sequence[str]) -> None:
    """Refuse node counts below the measured ones, more GPUs per node than any node holds, a link named twice."""
    exchanging = scaling[~scaling["independent"].astype(bool)]
    smallest = int(exchanging["nodes"].min()) if len(exchanging) else 1
    below = [n for n in nodes if n < smallest]
    if below:
        raise ReportError(f"--nodes {','.join(map(str, below))}: below the {smallest} node(s) the runs were measured "
                          "on; the report has what was measured")
    check_nodes(nodes)
    if gpus_per_node is not None and gpus_per_node > MAX_GPUS_PER_NODE:
        raise ReportError(f"--gpus-per-node {gpus_per_node:,}: no node holds more than {MAX_GPUS_PER_NODE:,} GPUs")
    names = [parse_link(text).name for text in links]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ReportError(f"--link {', '.join(twice)} given twice: each link needs its own name")


def project(collection: Collection, nodes: Sequence[int], gpus_per_node: int | None = None,
            links: Sequence[str] = (), algorithms: Sequence[str] | None = ("ring", "hierarchical"),
            warmup: int | None = None, intra_link: str | None = None,
            stats: pd.DataFrame | None = None,
            overlaps: Mapping[str, tuple[float, np.ndarray, str]] | None = None,
            fabric: Fabric = Fabric(), batch: BatchAsked | None = None) -> Projection:
    """The projection of every exchanging workload in the collection at each node count; ``intra_link`` (a
    target's bus, as a link spec) replaces the measured link within a node once the overlap is fitted;
    ``stats``: the collection's run statistics where the caller has them already (the report); ``overlaps``:
    per workload label, an overlap fitted elsewhere (another projection's ``fitted_overlap()``: runs at one
    link rate projecting another) used instead of fitting one from this collection; ``fabric``: what the
    target's fabric offers NCCL beyond ring and tree (the ``nccl`` algorithm chooses among them); ``algorithms``
    None: NCCL's pick and hierarchical where NCCL carried the measured curves, else ring and hierarchical;
    ``batch``: each workload family at the batch a GPU has at each node count (at_batch.py), not the measured."""
    stats = run_stats_table(collection, warmup) if stats is None else stats
    scaling = scaling_table(collection, stats)
    if scaling.empty:
        raise ReportError("no complete training run to project from")
    _check_request(scaling, nodes, gpus_per_node, links)
    workloads = workload_inputs(collection, scaling, stats.attrs.get("draws", {}), gpus_per_node)
    curves = allreduce_curves(collection)
    if algorithms is None:  # NCCL's pick where NCCL carried the measured exchange, else the ring Gloo and MPI run
        algorithms = (CHOSEN if any(c.nccl for c in curves) else "ring", "hierarchical")
    units: list[tuple[FittedWorkload, ComputeCurve | None]] = \
        [(w, None) for w in workloads] if batch is None else list(families(workloads))
    out = Projection(pd.DataFrame(), pd.DataFrame(), [])
    rows: list[dict[str, Any]] = []
    link_rows: list[dict[str, Any]] = []
    fits: dict[str, tuple[Link, list[Link]]] = {}  # each curve fitted once, whichever workloads use it
    measured_nodes: dict[str, int] = {}
    for w, curve in units:
        fitted, inter_curve = _fitted_links(w, w.per_node, nodes, bool(links), curves, fits, link_rows)
        shown_as = w if curve is None or batch is None else shown(w, curve, batch)
        given = (overlaps or {}).get(shown_as.label)
        phi, phi_draws, how = given if given else _fit_overlap(w, fitted["intra"], fitted["inter"])
        low, high = percentile_interval(phi_draws)
        out.overlap[shown_as.label], out.overlap_draws[shown_as.label] = (phi, low, high, how), phi_draws
        out.workloads.append(shown_as)
        measured_nodes[shown_as.label] = max(m.nodes for m in w.measured) if w.measured else 1
        between = _between(w, fitted, inter_curve is not None, links, link_rows)
        intra, note = _within(w, fitted, intra_link, link_rows), _link_note(inter_curve)
        for count in nodes:
            here = w if curve is None or batch is None else _at(w, curve, batch, count, out.notes)
            if here is not None:
                rows += _count_rows(here, count, algorithms, between, intra, (phi, phi_draws), fabric,
                                    bool(intra_link), note, curve)
    table = pd.DataFrame(rows, columns=list(PROJECTION_SCHEMA)).astype(PROJECTION_SCHEMA)
    out.table = widened(table, measured_nodes)
    out.links = pd.DataFrame(link_rows, columns=list(LINKS_SCHEMA)).drop_duplicates().astype(LINKS_SCHEMA)
    return out


def _at(w: FittedWorkload, curve: ComputeCurve, batch: BatchAsked, count: int, notes: list[str]
        ) -> FittedWorkload | None:
    """The workload at the batch a GPU has on ``count`` nodes (None, said in ``notes``, where a global batch gives
    less than one sample a GPU); a global batch the GPUs do not divide is said with what a GPU takes. Each line
    is said once, however many workloads it holds for."""
    ranks = count * w.per_node
    each = batch.at(ranks)
    line = ""
    if each < 1:
        line = (f"{batch.describe()}: less than one sample a GPU at {count:,} node(s) ({ranks:,} GPUs): not "
                "projected there")
    elif batch.global_batch and each * ranks != batch.global_batch:
        line = f"{batch.describe()} over {ranks:,} GPUs ({count:,} node(s)): {each:,} a GPU, {each * ranks:,} in all"
    if line and line not in notes:
        notes.append(line)
    return at_batch(w, curve, batch, each) if each >= 1 else None


def _count_rows(w: FittedWorkload, count: int, algorithms: Sequence[str], between: list[tuple[str, Link, list[Link]]],
                intra: tuple[Link | None, list[Link | None]], overlap: tuple[float, np.ndarray], fabric: Fabric,
                target_bus: bool, note: str, curve: ComputeCurve | None) -> list[dict[str, Any]]:
    """A workload's rows at one node count: on one node NCCL's pick where it was asked for (else the ring) over
    the link within it; across nodes each algorithm over each link between them."""
    per_node, (link_in, link_in_draws) = w.per_node, intra
    one_node = [(f"{link_in.name} ({WITHIN})" if target_bus and link_in else WITHIN, None, [None] * DRAWS)]
    largest, rows = min(w.model.grad_bytes, w.model.fusion_bytes), []
    for name, link, link_draws in one_node if count == 1 else between:
        for algorithm in ([CHOSEN if CHOSEN in algorithms else "ring"] if count == 1 else algorithms):
            if algorithm == "hierarchical" and per_node == 1:
                continue  # the same as a ring with one rank per node
            fn = step_allreduce(algorithm, count, per_node, link_in, link, w.model.grad_bytes, fabric)
            fns = [step_allreduce(algorithm, count, per_node, a, e, w.model.grad_bytes, fabric)
                   for a, e in zip(link_in_draws, link_draws)]
            rows.append({**_row(w, name, algorithm, count, per_node, overlap[0], overlap[1], fn, fns),
                         "runs_as": nccl_pick(largest, count, per_node, link_in, link, fabric)
                         if algorithm == CHOSEN else algorithm,
                         "link_note": note if name == "measured" else "",
                         **batch_cells(curve, batch_of(w))})
    return rows


Fitted = dict[str, tuple[Link | None, list[Link | None]]]


def _link_note(curve: Any) -> str:
    """What a row over the measured link between nodes must say of where that link was fitted: from NCCL across two
    nodes with its algorithm free (tree's best case, which flatters every larger node count)."""
    if curve is None or not curve.tree_best_case():
        return ""
    return (f"link fitted on 2 nodes ({curve.run_id}) without NCCL_ALGO=Ring: tree's best case, which no larger node "
            "count has; measure across more nodes, or with NCCL_ALGO=Ring")


def check_nodes(nodes: Sequence[int]) -> None:
    """A ReportError for node counts no projection can speak for (beyond MAX_NODES)."""
    huge = [n for n in nodes if n > MAX_NODES]
    if huge:
        raise ReportError(f"--nodes {','.join(f'{n:,}' for n in huge)}: beyond {MAX_NODES:,} nodes there is no "
                          "system to check a projection against; project at most that")


def widened(table: pd.DataFrame, measured_nodes: dict[str, int]) -> pd.DataFrame:
    """Rows beyond the most nodes a workload's exchanging runs were measured on: ``extrapolated_x`` (how many
    times beyond) and intervals widened by ERROR_PER_DOUBLING per doubling, on each side; rows at a batch a GPU
    other than those measured widened further by the model's own error per e-fold of the batch, as its back-test
    on published results calibrated it (track_record.json)."""
    out = table.copy()
    most = out["workload"].map(measured_nodes).astype("float64")
    factor = (out["nodes"] / most).where(out["nodes"] > most)
    out["extrapolated_x"] = factor
    batch_e = out["batch_e"].astype("float64").fillna(0.0).to_numpy()
    spread = (1 + (ERROR_PER_DOUBLING * np.log2(factor)).fillna(0.0)) * np.exp(Z95 * calibration().per_batch_e
                                                                               * batch_e) - 1
    for name in ("throughput", "speedup", "efficiency"):
        out[f"{name}_low"] = out[f"{name}_low"] / (1 + spread)
        out[f"{name}_high"] = out[f"{name}_high"] * (1 + spread)
    out["step_low_ms"] = out["step_low_ms"] / (1 + spread)
    out["step_high_ms"] = out["step_high_ms"] * (1 + spread)
    return out


def _fitted_links(w: FittedWorkload, per_node: int, nodes: Sequence[int], what_if: bool, curves: list[Any],
                  fits: dict[str, tuple[Link, list[Link]]], link_rows: list[dict[str, Any]]) -> tuple[Fitted, Any]:
    """The workload's system's links within and between nodes, fitted from its allreduce curves (each curve
    once, in ``fits``; each a row of ``link_rows``); a curve the projection needs and lacks is one line."""
    system, controller = str(w.key["system"]), str(w.key["controller"])
    intra_curve = pick_curve(curves, system, controller, "intra", w.label)
    inter_curve = pick_curve(curves, system, controller, "inter", w.label)
    if (per_node > 1 or any(m.nodes == 1 for m in w.measured)) and intra_curve is None:
        raise ReportError(f"{w.label}: no allreduce curve within a node on system {system}: add "
                          f"`hvdbench run collectives --np {max(per_node, 2)} --system {system} -- --ops allreduce "
                          "--backends horovod`")
    if max(nodes) > 1 and inter_curve is None and not what_if:
        raise ReportError(f"{w.label}: no allreduce curve across nodes on system {system}: add a collectives run "
                          "over 2 nodes (sweep: benchmark collectives, axes nodes: [2], gpus_per_node: [1]; args "
                          "--ops allreduce --backends horovod), or give a what-if --link NAME=GB/s,latency")
    fitted: Fitted = {}
    for kind, curve in (("intra", intra_curve), ("inter", inter_curve)):
        if curve and curve.run_id not in fits:
            fits[curve.run_id] = (curve.link(), curve.draws())
        fitted[kind] = fits[curve.run_id] if curve else (None, [None] * DRAWS)  # type: ignore[assignment]
        if curve:
            link = fitted[kind][0]
            assert link is not None
            name = "measured " + ("within a node" if kind == "intra" else "between nodes")
            link_rows.append(_link_row(system, name, kind, link, curve.describe()))
            link_rows += _shown_beside(curves, curve, controller, name)
    return fitted, inter_curve


def _shown_beside(curves: list[Any], chosen: Any, controller: str, name: str) -> list[dict[str, Any]]:
    """The link the other pattern's curve gives (isolated calls beside a training pattern, or the reverse),
    as a row marked not used: both curves stay in the report."""
    other = other_curve(curves, chosen, controller)
    if other is None:
        return []
    try:
        link, source = other.link(), other.describe()
    except ReportError as exc:
        link, source = None, str(exc)
    return [_link_row(chosen.system, f"{name} (not used)", chosen.kind, link, source)]


def _link_row(system: str, name: str, kind: str, link: Link | None, source: str) -> dict[str, Any]:
    """One row of the links table (LINKS_SCHEMA); a link that could not be fitted has no terms."""
    return {"system": system, "link": name, "kind": kind, "alpha_us": link.alpha_s * 1e6 if link else np.nan,
            "gbs": link.gbs if link else np.nan, "source": source}


def _between(w: FittedWorkload, fitted: Fitted, measured: bool, links: Sequence[str],
             link_rows: list[dict[str, Any]]) -> list[tuple[str, Link, list[Link]]]:
    """The links between nodes a workload is projected over: the measured one, then each what-if --link (with
    the software latency of the measured links)."""
    between: list[tuple[str, Link, list[Link]]] = []
    if measured:
        between.append(("measured", fitted["inter"][0], fitted["inter"][1]))  # type: ignore[arg-type]
    software = fitted["intra"][0] or fitted["inter"][0]
    for text in links:
        spec = parse_link(text, software)
        base = fitted["intra"][1] if fitted["intra"][0] else fitted["inter"][1]
        between.append((spec.name, spec, [parse_link(text, b) for b in base]))
        link_rows.append(_link_row(str(w.key["system"]), spec.name, "what-if", spec, spec.source))
    return between


def _within(w: FittedWorkload, fitted: Fitted, spec: str | None,
            link_rows: list[dict[str, Any]]) -> tuple[Link | None, list[Link | None]]:
    """The link within a node the rows use: the measured one, or the target's bus (``spec``) with the
    measured software latency added, as for a what-if link between nodes."""
    if spec is None:
        return fitted["intra"]
    point, draws = fitted["intra"]
    link = parse_link(spec, point)
    link_rows.append(_link_row(str(w.key["system"]), link.name, "what-if within a node", link, link.source))
    return link, [parse_link(spec, d) for d in draws]


def efficiency_holds(table: pd.DataFrame, below: float) -> list[str]:
    """Per workload, link and algorithm across nodes: the most nodes at which projected efficiency stays at or
    above ``below`` % (point, and by the 95% interval's low and high ends), or that it never falls below in the
    node counts projected."""
    lines = []
    across = table[table["nodes"] > 1]
    for (workload, link, algorithm), group in across.groupby(["workload", "link", "algorithm"], sort=False):
        group = group.sort_values("nodes")
        ends = [_last_holding(group, column, below / 100) for column in ("efficiency", "efficiency_low",
                                                                          "efficiency_high")]
        point, pessimistic, optimistic = (f"up to {n:,} node(s)" if n else "below it already at 2 nodes" for n in ends)
        never = ends[0] == int(group["nodes"].max())
        unknown = group[["efficiency_low", "efficiency_high"]].isna().any().any()
        said = f"stays at or above {below:g}% through all {ends[0]:,} nodes projected" if never else \
            (f"stays at or above {below:g}% {point}" if ends[0] else f"falls below {below:g}% already at 2 nodes")
        lines.append(f"{workload} on {link} ({algorithm}): efficiency {said}"
                     + (" (95% interval: not computed: too few steady steps in a measurement it rests on)" if unknown
                        else f" (95% interval: from {pessimistic} to {optimistic})"))
    return lines


def _last_holding(group: pd.DataFrame, column: str, floor: float) -> int:
    """The largest node count before the first one whose ``column`` falls below ``floor`` (0: the first does)."""
    last = 0
    for nodes, value in zip(group["nodes"], group[column]):
        if value < floor:
            break
        last = int(nodes)
    return last
