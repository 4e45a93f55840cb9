"""``project --backtest``: the scaling projection fitted on a family's smallest sizes (a workload on one system at
several node counts: a vendor's MLPerf results, a published table, one's own runs) predicts each larger size at its
own per-GPU batch, beside what was measured there.

The model of a GPU's step at ``N`` ranks on ``n`` nodes with a batch of ``b`` a GPU: compute ``k * b^p`` plus the
exchange (exchange_model.py: the gradient bytes over the links the system's description gives, by the algorithm NCCL
would pick). Compute is a power of the batch because a GPU's efficiency falls as its batch shrinks (kernels too small
to fill it); ``p`` is fitted where the fitted sizes ran different batches, else 1 (no batch measured but one: the
per-sample cost taken as constant, said in the row). A link the description does not give is fitted from fitted sizes
of one batch that cross it; a link that hides its exchange (the larger size no slower a GPU) is taken as free.

Each prediction's 95% interval holds the fitted figures' own spread and the model's error, which grows with how far
it reaches: ``per_doubling`` times the doublings beyond the largest fitted size, and ``per_batch_e`` times the natural
log of the batch's distance from the nearest fitted one; both calibrated on back-tests of published families
(track_record.json, benchmarks/projection_backtest.py)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from .exchange_model import (LINK_EFFICIENCY, PARAMETERS, SERVERS, Links, by_servers, chosen_algorithm, exchange_s,
                             exchange_terms, inter_alpha, intra_gbs, node_rate_gbs)

TRACK_RECORD = Path(__file__).with_name("track_record.json")
Z95 = 1.959964
BACKTEST_COLUMNS = ("system", "workload", "nodes", "gpus", "batch_per_gpu", "measured", "predicted", "low", "high",
                    "error", "algorithm", "network", "fitted_on", "note")


@dataclass(frozen=True)
class Point:
    """One measured size: ranks over nodes at a per-GPU batch, the job's throughput and its log spread (0: a
    published figure, or one run)."""

    nodes: int
    ranks: int
    batch: int
    throughput: float
    sigma: float = 0.0
    servers: int | None = None  # the nodes holding a parameter server where the figure says (None: every node)

    @property
    def step_s(self) -> float:
        """A GPU's step: its batch at the job's rate a GPU."""
        return self.ranks * self.batch / self.throughput


@dataclass(frozen=True)
class Family:
    """A workload on one system at several sizes, with what its description says of the exchange."""

    system: str
    workload: str
    model: str
    points: tuple[Point, ...]
    grad_bytes: float
    links: Links
    exchange: str = ""
    notes: tuple[str, ...] = ()


@dataclass
class Fit:
    """A family's model fitted on some of its points: compute ``k * b^p``, the links, what was assumed."""

    k: float
    p: float
    links: Links
    fitted: tuple[Point, ...]
    notes: list[str] = field(default_factory=list)

    def step_s(self, family: Family, point: Point, forced: str | None = None) -> tuple[float, str]:
        algorithm = chosen_algorithm(family.grad_bytes, point.ranks, point.nodes, self.links, family.exchange, forced)
        return (self.k * point.batch ** self.p
                + exchange_s(family.grad_bytes, point.ranks, point.nodes, self.links, algorithm, point.servers)), \
            algorithm


def _bytes_a_parameter(framework: str, precision: str) -> int:
    """MLPerf Training submissions on these accelerators all-reduce 16-bit gradients; a published table says its
    precision or was 32-bit (2017's tf_cnn_benchmarks)."""
    if framework == "mlperf" or precision.lower() in ("fp16", "bf16", "amp", "mixed"):
        return 2
    return 4


def _sizes(points: Sequence[Point]) -> list[tuple[int, int]]:
    """Each point's size: its node count, or its ranks where every point is on one node."""
    one_node = all(p.nodes == 1 for p in points)
    return [(p.ranks if one_node else p.nodes, p.ranks) for p in points]


def split(family: Family, fit_nodes: Sequence[int] | None = None) -> tuple[list[Point], list[Point]]:
    """The points fitted on (every point of the two smallest sizes, or of ``fit_nodes``) and those held out."""
    sizes = [size for size, _ in _sizes(family.points)]
    chosen = set(fit_nodes) if fit_nodes else set(sorted(set(sizes))[:2])
    fitted = [p for p, s in zip(family.points, sizes) if s in chosen]
    return fitted, [p for p, s in zip(family.points, sizes) if s not in chosen and s > max(chosen)]


def _fit_link(family: Family, links: Links, fitted: Sequence[Point], tier: str, notes: list[str]) -> Links:
    """A link the description does not give, from two fitted points of one batch on either side of it (one GPU and
    one node's; one node and several): the larger one's extra step is its exchange; none extra, the link hides it."""
    if getattr(links, tier) is not None:
        return links
    inside = [p for p in fitted if (p.nodes == 1) == (tier == "intra")]
    base = [p for p in fitted if (p.ranks == 1 if tier == "intra" else p.nodes == 1)]
    pairs = [(a, b) for a in base for b in inside if a.batch == b.batch and b.ranks > a.ranks]
    if not pairs:
        return links
    low, high = max(pairs, key=lambda ab: (ab[1].ranks, ab[0].ranks))
    # the bytes its predictions move over it: the servers' where the figures ran through them, else a ring's
    # (NCCL's tree at 2 nodes is its best case: flagged below)
    forced = None if by_servers(family.exchange) else "ring"
    by = [chosen_algorithm(family.grad_bytes, p.ranks, p.nodes, links, family.exchange, forced) for p in (low, high)]
    latency, moved = exchange_terms(family.grad_bytes, high.ranks, high.nodes, links.inter_alpha, by[1],
                                    servers=high.servers)
    before = exchange_s(family.grad_bytes, low.ranks, low.nodes, links, by[0], low.servers)
    exposed = high.step_s - low.step_s + (before if math.isfinite(before) else 0.0) - latency
    value = moved / exposed if exposed > 0 else math.inf
    word = "hides its exchange" if math.isinf(value) else f"{value / 1e9:,.2f} GB/s"
    notes.append(f"{'within a node' if tier == 'intra' else 'between nodes'}: fitted from {low.ranks} and "
                 f"{high.ranks} GPUs ({word})")
    if tier == "inter" and high.nodes == 2:
        notes.append("the link between nodes fitted on 2 nodes only: NCCL's 2-node all_reduce is its tree's best "
                     "case, unlike larger jobs' (fit on more nodes where the results have them: --fit-nodes)")
    return Links(**{**links.__dict__, tier: value, f"{tier}_source": "fitted"})


def fit(family: Family, fitted: Sequence[Point]) -> Fit:
    """The family's model on these points: links given or fitted, then compute's ``k`` and ``p``."""
    notes: list[str] = []
    links = _fit_link(family, _fit_link(family, family.links, fitted, "intra", notes), fitted, "inter", notes)
    compute = []
    for point in fitted:
        algorithm = chosen_algorithm(family.grad_bytes, point.ranks, point.nodes, links, family.exchange)
        exchange = exchange_s(family.grad_bytes, point.ranks, point.nodes, links, algorithm, point.servers)
        exchange = 0.0 if not math.isfinite(exchange) else exchange
        if exchange >= point.step_s:
            notes.append(f"{point.ranks} GPUs: the exchange the links allow exceeds the step: taken as hidden")
            exchange = 0.0
        compute.append(point.step_s - exchange)
    k, p = compute_power([p.batch for p in fitted], compute, notes)
    return Fit(k, p, links, tuple(fitted), notes)


def compute_power(batches: Sequence[float], compute: Sequence[float], notes: list[str]) -> tuple[float, float]:
    """A step's compute as ``k * b^p`` through (batch, seconds) points: ``p`` fitted where the batches differ by a
    tenth or more (held to 0.2-1: a GPU's step never costs more than linear in its batch, nor nothing), else 1 (the
    per-sample cost taken as constant; the caller says so where it predicts another batch)."""
    logs_b, logs_c = np.log(np.asarray(batches, float)), np.log(np.asarray(compute, float))
    if logs_b.max() - logs_b.min() >= math.log(1.1):
        slope = float(np.polyfit(logs_b, logs_c, 1)[0])
        p = min(max(slope, 0.2), 1.0)
        if p != slope:
            notes.append(f"compute's power of the batch fitted as {slope:.2f}, held to {p:.2f}")
    else:
        p = 1.0
    return float(np.exp(np.mean(logs_c - p * logs_b))), p


@dataclass(frozen=True)
class Calibration:
    """The model's own error: log-scale standard deviation per doubling beyond the fitted sizes and per e-fold of
    the batch beyond the fitted batches, and what they were calibrated on."""

    per_doubling: float
    per_batch_e: float
    source: str = ""


def calibration(path: Path = TRACK_RECORD) -> Calibration:
    """The calibration the track record holds (none yet: zero, said)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Calibration(float(data["per_doubling"]), float(data["per_batch_e"]), str(data.get("source", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return Calibration(0.0, 0.0, "no track record: the measurements' spread only")


def reach(fitted: Sequence[Point], point: Point, family: Family) -> tuple[float, float]:
    """How far a prediction reaches: doublings beyond the largest fitted size, and the log distance of its batch from
    the nearest fitted batch."""
    sizes = dict(zip(family.points, [s for s, _ in _sizes(family.points)]))
    top = max(sizes[p] for p in fitted)
    return max(math.log2(sizes[point] / top), 0.0), min(abs(math.log(point.batch / p.batch)) for p in fitted)


def predict(family: Family, fit_nodes: Sequence[int] | None = None, calibrated: Calibration | None = None,
            forced: str | None = None, links: Links | None = None, network: str = "as measured"
            ) -> list[dict[str, Any]]:
    """Rows of backtest.csv: each held-out point measured and predicted with its interval and error; ``links``: the
    same node counts over another interconnect (what-if: ``measured`` and ``error`` are then the measured network's)."""
    fitted, held = split(family, fit_nodes)
    if not held or len(fitted) < 2:
        return []
    model = fit(family, fitted)
    if links is not None:
        model.links = Links(model.links.intra, links.inter, links.inter_alpha, model.links.intra_source,
                            links.inter_source)
    cal = calibrated or calibration()
    spread = float(np.sqrt(np.mean([p.sigma ** 2 for p in fitted])))
    if len({p.batch for p in fitted}) == 1 and any(p.batch != fitted[0].batch for p in held):
        model.notes.append(f"one batch fitted ({fitted[0].batch} a GPU): compute at another batch taken as linear "
                           "in it (measure a batch sweep, axes: batch_size, to fit its shape)")
    rows = []
    for point in held:
        step, algorithm = model.step_s(family, point, forced)
        predicted = point.ranks * point.batch / step
        doublings, batch_e = reach(fitted, point, family)
        base = spread ** 2 + point.sigma ** 2
        sigma = math.sqrt(base + (cal.per_doubling * doublings) ** 2 + (cal.per_batch_e * batch_e) ** 2)
        rows.append({"system": family.system, "workload": family.workload, "nodes": point.nodes, "gpus": point.ranks,
                     "batch_per_gpu": point.batch, "measured": point.throughput, "predicted": predicted,
                     "low": predicted * math.exp(-Z95 * sigma), "high": predicted * math.exp(Z95 * sigma),
                     "error": predicted / point.throughput - 1.0, "algorithm": algorithm, "network": network,
                     "fitted_on": ", ".join(f"{p.ranks} GPUs/{p.nodes} node(s) at {p.batch}" for p in fitted),
                     "note": "; ".join([*family.notes, *model.notes, *_servers_note(point, algorithm)]),
                     "_base_var": base,
                     "_doublings": doublings, "_batch_e": batch_e})
    return rows


def _servers_note(point: Point, algorithm: str) -> list[str]:
    """A line where a size ran fewer parameter servers than nodes (the figure says so): what a server's node moves."""
    if algorithm != SERVERS or not point.servers or point.nodes <= 1 or point.servers >= point.nodes:
        return []
    n, p = point.nodes, point.servers
    return [f"{n} nodes: {p} parameter servers, as the figure ran: a server's node moves {(n + p - 2) / p:.3g} x the "
            f"gradients each way, not the {2 * (n - 1) / n:.3g} x of a server on every node"]


def family_links(network: str, accelerator: str) -> tuple[Links, list[str]]:
    """The links a system's description gives, and what it does not."""
    rate = node_rate_gbs(network)
    within = intra_gbs(accelerator)
    notes = [] if rate else ["no NIC rate in the system's description"]
    return Links(within * 1e9 if within else None, rate * LINK_EFFICIENCY * 1e9 if rate else None,
                 inter_alpha(network), "accelerator" if within else "", "NICs' line rate" if rate else ""), notes


def gradient_bytes(model: str, framework: str, precision: str) -> float | None:
    """The bytes a step all-reduces, where the model's size is known."""
    params = PARAMETERS.get(model.lower())
    return params * _bytes_a_parameter(framework, precision) if params else None


def family_notes(rows: Sequence[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """What each family's fit assumed, once a family: (system, workload, its rows' notes, each said once), sorted."""
    said: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        parts = said.setdefault((str(row["system"]), str(row["workload"])), [])
        parts += [part for part in str(row["note"] or "").split("; ") if part and part not in parts]
    return [(system, workload, "; ".join(parts)) for (system, workload), parts in sorted(said.items()) if parts]


def backtest_table(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """backtest.csv's table (what a row keeps for calibration left out)."""
    return pd.DataFrame(list(rows), columns=list(BACKTEST_COLUMNS))


def _variances(rows: Sequence[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each back-tested row's log error, its measurement variance (the row's interval without the model's error)
    and its reach (doublings, batch e-folds), as the rows recorded them."""
    error = np.log([r["predicted"] / r["measured"] for r in rows])
    base = np.array([r["_base_var"] for r in rows])
    return error, base, np.array([r["_doublings"] for r in rows]), np.array([r["_batch_e"] for r in rows])


def calibrate(rows: Sequence[dict[str, Any]], source: str = "") -> Calibration:
    """The model's error per doubling and per batch e-fold that makes the back-tested errors most likely (normal on
    the log scale, each row's variance its measurement's plus the model's at its reach): a grid to 0.005."""
    error, base, doublings, batch_e = _variances(rows)
    grid = np.arange(0.0, 0.6001, 0.005)
    best, chosen = -math.inf, (0.0, 0.0)
    for a in grid:
        for c in grid:
            var = base + (a * doublings) ** 2 + (c * batch_e) ** 2 + 1e-8
            score = float(np.sum(-0.5 * np.log(var) - error ** 2 / (2 * var)))
            if score > best:
                best, chosen = score, (float(a), float(c))
    return Calibration(chosen[0], chosen[1], source)


def held(rows: Sequence[dict[str, Any]], cal: Calibration) -> np.ndarray:
    """Whether each row's 95% interval at this calibration holds its measured figure."""
    error, base, doublings, batch_e = _variances(rows)
    sigma = np.sqrt(base + (cal.per_doubling * doublings) ** 2 + (cal.per_batch_e * batch_e) ** 2)
    return np.abs(error) <= Z95 * sigma
