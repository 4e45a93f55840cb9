"""What the step-time projection is fitted from, read from collected results: allreduce curves per link
class (the collectives benchmark through Horovod, within a node and across nodes) and, per workload, its
compute time (the --independent twin, or --breakdown phases), gradients and exchanging runs. A missing
input is a ReportError that names the run to add."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from numpy import ndarray  # field annotations beside a field named np
import pandas as pd

from hvdbench.core.collective_ops import slowest_per_iteration
from hvdbench.core.errors import ReportError
from hvdbench.core.exchanges import DEFAULT as DEFAULT_EXCHANGE
from hvdbench.core.exchanges import allreduce_names

from ..keys import BASELINE, PROJECTED
from .allreduce_model import DEFAULT_CYCLE_S, DEFAULT_FUSION_BYTES, Link, StepModel, curve_problem, fit_link
from ..collect import Collection
from ..tables.comm import iteration_times
from ..rank_logs import PHASES
from ..ratios import config_draws

DRAWS = 200          # bootstrap draws carried through the projection
BACKWARD_SHARE = 2 / 3  # of compute, where neither --breakdown nor a FLOP count says (backward ~ 2x forward)
WORKLOAD = PROJECTED
TWIN = BASELINE  # a twin of other launcher or knobs still counts


@dataclass(frozen=True)
class Curve:
    """One measured allreduce curve: per size, the slowest rank's time of every iteration."""

    run_id: str
    system: str
    controller: str
    nodes: int
    np: int
    sizes: ndarray
    times: tuple[ndarray, ...]
    cycle_s: float = DEFAULT_CYCLE_S
    like: str = ""  # a training pattern's: the workload (benchmark model batch N) whose gradients it issued
    nccl: bool = False  # NCCL carried it (the run's NCCL log, or Horovod built with NCCL on a GPU)
    nccl_algo: str = ""  # NCCL_ALGO as the run set it ("": NCCL chose by size)

    def tree_best_case(self) -> bool:
        """An NCCL curve across exactly two nodes with NCCL free to choose: tree's best case (a two-node tree is one
        hop, which no larger tree has), so a link fitted from it flatters every larger node count."""
        return self.nccl and self.nodes == 2 and self.nccl_algo.strip().lower() != "ring"

    @property
    def training(self) -> bool:
        """Measured the way training issues its exchange (collectives --pattern training)."""
        return bool(self.like)

    @property
    def kind(self) -> str:
        """``intra`` (one node) or ``inter`` (across nodes)."""
        return "intra" if self.nodes == 1 else "inter"

    def describe(self) -> str:
        how = f"training pattern of {self.like}" if self.training else "isolated calls"
        return (f"allreduce curve {self.run_id} ({how}): {self.np} ranks on {self.nodes} node(s), {self.controller}, "
                f"{len(self.sizes)} sizes {int(self.sizes.min()):,}-{int(self.sizes.max()):,} B")

    def op_times(self, times: Sequence[float]) -> list[float]:
        """Seconds of the allreduce itself, the cycle's wait taken off (leaving at least 1% of the time), since
        the projection models the cycle itself: isolated calls come right after a barrier, which the background
        thread ran in its cycle, so each waits about one cycle for the next; a training pattern's steps follow
        each other as training's do, and wait half a cycle on average, as the step model assumes."""
        wait = self.cycle_s / 2 if self.training else self.cycle_s
        return [max(t - wait, 0.01 * t) for t in times]

    def link(self) -> Link:
        """alpha and beta, and the curve, from the median time per size (a stray slow iteration of a
        shared machine does not move it); a curve no link could have given is a ReportError naming it."""
        problem = curve_problem(self.sizes, self.op_times([float(np.median(t)) for t in self.times]), self.np)
        if problem:
            raise ReportError(f"{self.describe()}: {problem}")
        return fit_link(self.sizes, self.op_times([float(np.median(t)) for t in self.times]), self.np, self.kind,
                        self.describe(), self.training)

    def draws(self, n: int = DRAWS) -> list[Link]:
        """``n`` fits of iteration resamples (each size's iterations drawn with replacement)."""
        rng = np.random.default_rng(zlib.crc32(self.run_id.encode()))
        out = []
        for _ in range(n):
            medians = [float(np.median(t[rng.integers(0, len(t), len(t))])) for t in self.times]
            out.append(fit_link(self.sizes, self.op_times(medians), self.np, self.kind, stream=self.training))
        return out


def allreduce_curves(collection: Collection) -> list[Curve]:
    """Every complete run's allreduce-through-Horovod curve (fp32 first: gradients' own dtype)."""
    comm = collection.comm
    comm = comm[(comm["op"] == "allreduce") & (comm["backend"] == "horovod")]
    runs = collection.runs.set_index("run_id")
    curves: list[Curve] = []
    for (run_id, pattern, dtype), group in comm.groupby(["run_id", "pattern", "dtype"], sort=True):
        like = str(group["like_workload"].iloc[0]) if pattern == "training" else ""
        if run_id not in runs.index or runs.loc[run_id, "status"] != "ok" or int(runs.loc[run_id, "np"]) < 2:
            continue
        sizes, times = [], []
        for nbytes, case in group.groupby("bytes", sort=True):
            per_rank = iteration_times(case)
            slowest = slowest_per_iteration(per_rank) if per_rank.size else np.array([])
            if len(slowest) and (slowest > 0).all():
                sizes.append(float(nbytes))
                times.append(slowest)
        if len(sizes) >= 2 and (dtype == "fp32" or not any(c.run_id == run_id for c in curves)):
            run = runs.loc[run_id]
            cycle = float(run["cycle_s"]) if pd.notna(run["cycle_s"]) else DEFAULT_CYCLE_S
            nccl = pd.notna(run["nccl_network"]) or (pd.notna(run["horovod_nccl"]) and pd.notna(run["driver"]))
            algo = str(run["nccl_algo"]) if pd.notna(run["nccl_algo"]) else ""
            curves.append(Curve(str(run_id), str(run["system"]), str(run["controller"]), int(run["nodes"]),
                                int(run["np"]), np.asarray(sizes), tuple(times), cycle, like, bool(nccl), algo))
    return curves


def pick_curve(curves: list[Curve], system: str, controller: str, kind: str, label: str = "") -> Curve | None:
    """The system's curve of a link class: measured the way training exchanges (the training pattern of the
    workload ``label`` itself first), then across the most nodes (a two-node NCCL curve is tree's best case),
    the same controller as the training runs, the most ranks (the most links in the ring) and the widest size
    range."""
    mine = [c for c in curves if c.system == system and c.kind == kind]
    return max(mine, key=lambda c: (c.training and label.startswith(c.like + " "), c.training, c.nodes,
                                    c.controller == controller, c.np, len(c.sizes)), default=None)


def other_curve(curves: list[Curve], chosen: Curve, controller: str) -> Curve | None:
    """Beside the chosen curve, the best of the other pattern for the same link class (shown, not used)."""
    other = [c for c in curves if c.system == chosen.system and c.kind == chosen.kind and c.training != chosen.training]
    return max(other, key=lambda c: (c.controller == controller, c.np, len(c.sizes)), default=None)


@dataclass
class Measured:
    """One exchanging configuration as measured: its layout, median step and its step's draws."""

    nodes: int
    np: int
    step_s: float
    step_draws: ndarray
    hierarchical: bool
    throughput: float


@dataclass
class FittedWorkload:
    """One workload's fitted inputs, with what each came from."""

    key: dict[str, Any]
    label: str
    unit: str
    model: StepModel
    compute_draws: np.ndarray
    rank_throughput: float  # the compute source's throughput per rank (no exchange)
    baseline: float         # 1-rank throughput the speedup is against
    baseline_draws: np.ndarray
    measured: list[Measured] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    per_node: int = 1  # ranks per node projected
    device: str = ""  # what the compute was measured on (a GPU's name, or a CPU's model)
    measured_per_node: int = 1  # the most ranks per node any of its runs had


ALLREDUCE_EXCHANGES = allreduce_names()  # what the step model's allreduce describes (core/exchanges.py)


def label_of(row: pd.Series) -> str:
    """``cifar10 resnet20 batch 32 fp32`` plus any knobs."""
    parts = [row["benchmark"], row["model"]]
    if pd.notna(row["batch_size"]):
        parts.append(f"batch {int(row['batch_size'])}")
    parts.append(str(row["precision"]))
    if bool(row["fp16_allreduce"]):
        parts.append("fp16 allreduce")
    if isinstance(row.get("exchange"), str) and row["exchange"] != DEFAULT_EXCHANGE:
        parts.append(f"exchange {row['exchange']}")
    if row["knobs"]:
        parts.append(str(row["knobs"]))
    return " ".join(str(p) for p in parts if p)


def _thr_draws(row: pd.Series, draws: dict[str, np.ndarray]) -> np.ndarray:
    """A scaling row's throughput resamples (its value alone where its runs have none)."""
    thr = config_draws(str(row["runs"]).split(","), draws)
    return np.full(DRAWS, float(row["throughput"])) if thr is None or not len(thr.draws) else \
        np.asarray(thr.draws[:DRAWS], float)


def _step_draws(row: pd.Series, draws: dict[str, np.ndarray]) -> np.ndarray:
    """The median step's resamples, scaled from the configuration's throughput resamples."""
    return float(row["median_step_ms"]) / 1e3 * float(row["throughput"]) / _thr_draws(row, draws)


def _breakdown(collection: Collection, run_ids: list[str]) -> dict[str, float] | None:
    """Median seconds of each --breakdown phase over the runs' timed steps (None where none has phases)."""
    steps = collection.steps
    steps = steps[steps["run_id"].isin(run_ids) & ~steps["warmup"].astype(bool)]
    phases = {p: float(steps[p].median()) for p in PHASES if p in steps and steps[p].notna().any()}
    return phases or None


def _first(runs: pd.DataFrame, column: str) -> Any:
    values = runs[column].dropna()
    return values.iloc[0] if len(values) else None


def workload_inputs(collection: Collection, scaling: pd.DataFrame, draws: dict[str, np.ndarray],
                    gpus_per_node: int | None = None) -> list[FittedWorkload]:
    """Every exchanging workload with its compute, gradients, fusion, cycle and measured runs, at
    ``gpus_per_node`` ranks per node (default: the most measured on one node); a workload without a compute
    source is a ReportError naming the run to add."""
    exchanging = scaling[~scaling["independent"].astype(bool)]
    if exchanging.empty:
        raise ReportError("no complete training run with gradient exchange to project from")
    modelled = exchanging[exchanging["exchange"].fillna(DEFAULT_EXCHANGE).isin(ALLREDUCE_EXCHANGES)]
    if modelled.empty:
        raise ReportError(f"exchange(s) {', '.join(sorted(set(exchanging['exchange'].dropna())))} cannot be projected: "
                          f"the projection models an allreduce of the gradients ({', '.join(ALLREDUCE_EXCHANGES)}), "
                          "not a sharded "
                          "exchange's all-gathers and reduce-scatters, a parameter server's reduce and broadcast, or "
                          "TensorFlow's strategy (its all-reduce inside the optimizer's step, after backward)")
    twins = scaling[scaling["independent"].astype(bool)]
    runs = collection.runs.set_index("run_id")
    out = []
    for key, group in modelled.groupby(WORKLOAD, sort=True, dropna=False):
        key_of = dict(zip(WORKLOAD, key))
        first = group.iloc[0]
        label = label_of(first)
        members = [r for ids in group["runs"] for r in str(ids).split(",")]
        facts = runs.loc[[r for r in members if r in runs.index]]
        inputs: list[str] = _left_out(exchanging, key_of)
        phases = _breakdown(collection, members)
        twin = _twin(twins, key_of)
        one_node = [int(n) for n in pd.concat([group, twin])[lambda t: t["nodes"] == 1]["np"]]
        per_node = gpus_per_node or max([n for n in group[group["nodes"] == 1]["np"]] or [1])
        compute, compute_draws, rank_thr = _compute(group, twin, phases, draws, label, inputs, int(per_node))
        model = _step_model(facts, first, compute, _backward_share(phases, facts, inputs), label, inputs)
        one = group[(group["np"] == 1) & (group["nodes"] == 1)]
        if len(one):
            baseline, baseline_draws = float(one.iloc[0]["throughput"]), _thr_draws(one.iloc[0], draws)
            inputs.append(f"speedup against the measured 1-rank run ({one.iloc[0]['runs']})")
        else:
            baseline, baseline_draws = rank_thr, np.full(DRAWS, rank_thr)
            inputs.append("speedup against the compute source's throughput per rank (no 1-rank run)")
        measured = [Measured(int(r["nodes"]), int(r["np"]), float(r["median_step_ms"]) / 1e3, _step_draws(r, draws),
                             "HOROVOD_HIERARCHICAL_ALLREDUCE=1" in str(r["knobs"]), float(r["throughput"]))
                    for _, r in group.iterrows() if int(r["np"]) >= 2]
        device = next((str(d) for d in group["device_name"] if isinstance(d, str) and d), "an unrecorded device")
        out.append(FittedWorkload(key_of, label, str(first["unit"]), model, compute_draws, rank_thr, baseline,
                                  baseline_draws, measured, inputs, int(per_node), device, max(one_node or [1])))
    return out


def _left_out(exchanging: pd.DataFrame, key_of: dict[str, Any]) -> list[str]:
    """The note on a workload whose runs with a sharded exchange or a parameter server are not projected."""
    same = exchanging[np.logical_and.reduce([(exchanging[k].isna() if pd.isna(v) else exchanging[k].eq(v).fillna(False))
                                             .to_numpy(bool) for k, v in key_of.items() if k != "exchange"])]
    other = sorted(set(same["exchange"].dropna()) - set(ALLREDUCE_EXCHANGES))
    return [f"runs with exchange {', '.join(other)} left out: the step model is an allreduce's"] if other else []


def _twin(twins: pd.DataFrame, key_of: dict[str, Any]) -> pd.DataFrame:
    """The workload's --independent twins: the same key as far as one exists (TWIN's columns must match), on
    one node where measured there."""
    twin = twins
    for column in WORKLOAD:
        same = twin[twin[column].astype(str) == str(key_of[column])]
        if same.empty and column not in TWIN:
            break
        twin = same
    one_node = twin[twin["nodes"] == 1]
    return one_node if len(one_node) else twin


def _compute_row(group: pd.DataFrame, twin: pd.DataFrame, per_node: int) -> pd.Series | None:
    """The run a step's compute comes from: an --independent twin on one node (at one rank per node, the 1-rank
    run too: one rank exchanges nothing), at exactly the ranks per node projected where measured (a node's
    ranks share its CPU, memory and power), else at the most ranks below it, else the fewest above; a twin
    across nodes where none ran on one; None where neither exists."""
    single = group[(group["np"] == 1) & (group["nodes"] == 1)] if per_node == 1 else group.iloc[0:0]
    candidates = pd.concat([twin[twin["nodes"] == 1] if len(twin) else twin, single])
    if candidates.empty:
        return twin.sort_values("np").iloc[-1] if len(twin) else None
    for pick in (candidates[candidates["np"] == per_node], candidates[candidates["np"] < per_node]):
        if len(pick):
            return pick.sort_values(["np", "independent"]).iloc[-1]
    return candidates.sort_values(["np", "independent"]).iloc[0]


def _compute(group: pd.DataFrame, twin: pd.DataFrame, phases: dict[str, float] | None, draws: dict[str, np.ndarray],
             label: str, inputs: list[str], per_node: int) -> tuple[float, np.ndarray, float]:
    """A step's compute time (s), its draws and the compute source's throughput per rank: from the run
    ``_compute_row`` picks for ``per_node`` ranks per node, else from --breakdown; a ReportError where neither
    exists."""
    row = _compute_row(group, twin, per_node)
    if row is not None:
        compute = float(row["median_step_ms"]) / 1e3
        source = "--independent twin" if bool(row["independent"]) else "1-rank run (no exchange)"
        note = "" if int(row["np"]) == per_node else f"; {per_node} per node projected, its compute not measured"
        inputs.append(f"compute {compute * 1e3:.1f} ms per step from the {source} at {int(row['np'])} rank(s) on "
                      f"{int(row['nodes'])} node(s) ({row['runs']}){note}")
        return compute, _step_draws(row, draws), float(row["throughput"]) / int(row["np"])
    if phases and ("compute" in phases or {"forward", "backward"} <= phases.keys()):
        compute = phases.get("compute") or sum(phases.get(p, 0.0) for p in ("forward", "backward", "optimizer"))
        row = group.sort_values("np").iloc[-1]
        inputs.append(f"compute {compute * 1e3:.1f} ms per step from --breakdown (forward + backward + optimizer)")
        return (compute, np.full(DRAWS, compute),
                float(row["throughput"]) / int(row["np"]) * float(row["median_step_ms"]) / 1e3 / compute)
    raise ReportError(f"{label}: no compute time to project from: add its --independent twin (sweep axis "
                      "independent: [false, true], or hvdbench run ... --independent) or run it with --breakdown")


def _backward_share(phases: dict[str, float] | None, facts: pd.DataFrame, inputs: list[str]) -> float:
    """Backward's share of compute: from --breakdown, else the FLOP count's forward share, else assumed."""
    if phases and "backward" in phases and "forward" in phases:
        share = phases["backward"] / sum(phases.get(p, 0.0) for p in ("forward", "backward", "optimizer"))
        inputs.append(f"backward {share:.0%} of compute (--breakdown)")
    elif pd.notna(forward := _first(facts, "forward_share")):
        share = (1.0 - float(forward))
        inputs.append(f"backward {share:.0%} of compute (FLOP count: forward {float(forward):.0%})")
    else:
        share = BACKWARD_SHARE
        inputs.append(f"backward {share:.0%} of compute (assumed: no --breakdown, no FLOP count)")
    return share


def _step_model(facts: pd.DataFrame, first: pd.Series, compute: float, share: float, label: str,
                inputs: list[str]) -> StepModel:
    """The step model of a workload: compute, backward, gradient bytes and tensors, fusion and cycle."""
    parameters = _first(facts, "parameters")
    if parameters is None:
        raise ReportError(f"{label}: its runs recorded no parameter count (rank 0's env record): run it again")
    grad_bytes = int(parameters) * (2 if bool(first["fp16_allreduce"]) else 4)
    tensors = _first(facts, "gradient_tensors")
    if tensors is None:
        inputs.append("gradient tensors not recorded (older results): the gradients treated as one tensor")
    fusion, cycle = _first(facts, "fusion_bytes"), _first(facts, "cycle_s")
    model = StepModel(compute, compute * share, grad_bytes, int(tensors or 1),
                      float(fusion) if fusion is not None else DEFAULT_FUSION_BYTES,
                      float(cycle) if cycle is not None else DEFAULT_CYCLE_S,
                      overlaps=first["framework"] == "pytorch")
    inputs.append(f"gradients {grad_bytes / 1e6:.2f} MB per step ({int(parameters):,} parameters x "
                  f"{grad_bytes // int(parameters)} B) in {tensors or '?'} tensors; fusion threshold "
                  f"{model.fusion_bytes / 2**20:g} MiB, cycle {model.cycle_s * 1e3:g} ms"
                  + ("" if fusion is not None or cycle is not None else " (Horovod's defaults)")
                  + ("; allreduces start during backward" if model.overlaps
                     else "; one grouped allreduce after backward (TensorFlow)"))
    return model
