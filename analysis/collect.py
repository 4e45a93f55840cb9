"""Collect: every run directory under the result roots into DataFrames with explicit schemas."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd

from hvdbench.suite.core.axes import read_axes
from hvdbench.suite.core.errors import ReportError, SpecError
from hvdbench.suite.core.catalog import BENCHMARKS
from hvdbench.suite.core.collective_ops import TIMINGS
from hvdbench.suite.core.metrics import Outcome, run_outcome
from hvdbench.suite.core.schema import KINDS, RUN_COLUMNS, RunColumn, mpi_text
from hvdbench.suite.core.spec import ATTEMPT_PREFIX, RUN_FILE, STATUS_FILE, RunSpec, RunStatus, earlier_attempts

from .rank_logs import MIN_STEP_S, PHASES, RankLog, read_all

PER_ITEM_UNITS = ("images", "samples", "utterances")  # units a step counts one of per batch item
MAX_CASE_BYTES = 1 << 50  # a collective case of more than a pebibyte was never measured

RUNS_SCHEMA: dict[str, str] = {
    "run_id": "string", "root": "string", "system": "string", "framework": "string",
    "benchmark": "string", "model": "string", "args": "string", "np": "int64", "nodes": "int64",
    "launcher": "string", "controller": "string", "placement": "string", "knobs": "string", "repeat": "int64",
    "unit": "string", "status": "string", "reason": "string", "ranks_logged": "int64",
    "batch_size": "Int64", "precision": "string", "independent": "bool", "base_args": "string",
    "channels_last": "bool", "compile": "bool", "data": "string", "fp16_allreduce": "bool", "threads": "Int64",
    "parameters": "Int64", "peak_device_bytes": "float64", "peak_rss_bytes": "float64", "wall_s": "float64",
    "setup_s": "float64", "timed_steps": "Int64", "target_ci_pct": "float64", "ci_reached_pct": "float64",
    "stopped_by": "string", "flops_per_sample": "float64", "flops_counted": "string", "device_name": "string",
    "tf32": "boolean",
    "attempts": "int64", "earlier_attempts": "string", "gradient_tensors": "Int64", "forward_share": "float64",
    "fusion_bytes": "float64", "cycle_s": "float64",
    **{column.name: column.dtype for column in RUN_COLUMNS},
}
ADAPTIVE_FIELDS = ("target_ci_pct", "ci_reached_pct", "stopped_by")  # rank 0's summary of an adaptive run
# Each rank's timed window, in seconds from the rank log's first record (as telemetry's t_s), and its samples.
WINDOWS_SCHEMA: dict[str, str] = {"run_id": "string", "rank": "int64", "start_s": "float64", "end_s": "float64",
                                  "samples": "float64"}
STEPS_SCHEMA: dict[str, str] = {
    "run_id": "string", "rank": "int64", **KINDS["step"].columns(), **{phase: "float64" for phase in PHASES},
}
COMM_SCHEMA: dict[str, str] = {
    "run_id": "string", "rank": "int64", "op": "string", "backend": "string", "dtype": "string",
    "bytes": "int64", "pattern": "string", "like_workload": "string", "iteration": "int64", "time": "float64",
    "timing": "string",
}
P2P_SCHEMA: dict[str, str] = {
    "run_id": "string", "src": "string", "dst": "string", "mode": "string", "bytes": "int64", "link": "string",
    "peer_access": "boolean", "iteration": "int64", "time": "float64",
}
TELEMETRY_FIELDS = tuple(KINDS["telemetry"].columns())
TELEMETRY_SCHEMA: dict[str, str] = {"run_id": "string", "rank": "int64", "t_s": "float64", **KINDS["telemetry"].columns()}
GPU_LIMITS = ("max_sm_clock_mhz", "max_memory_clock_mhz", "power_limit_w", "pcie_max_gen", "pcie_max_width",
              "ecc_uncorrected", "retired_pages")  # env.gpu facts that telemetry is judged against
ENV_SCHEMA: dict[str, str] = {
    "run_id": "string", "rank": "int64", "host": "string", "device": "string", "gpu_name": "string",
    "gpu_bus_id": "string", **{name: "float64" for name in GPU_LIMITS},
    "framework_version": "string", "horovod": "string", "mpi": "string",
}
PROFILE_SCHEMA: dict[str, str] = {
    "run_id": "string", "rank": "int64", "operator": "string", "calls": "Int64", "self_cpu_us": "float64",
    "self_device_us": "float64", "cpu_total_us": "float64", "trace": "string",
}


@dataclass
class FileIssue:
    """A rank log with lines that were not whole records."""

    path: str
    malformed: int
    examples: list[str]


@dataclass
class Collection:
    """Everything read from the roots."""

    runs: pd.DataFrame
    steps: pd.DataFrame
    comm: pd.DataFrame
    telemetry: pd.DataFrame = field(default_factory=lambda: frame([], TELEMETRY_SCHEMA))
    env: pd.DataFrame = field(default_factory=lambda: frame([], ENV_SCHEMA))
    profile: pd.DataFrame = field(default_factory=lambda: frame([], PROFILE_SCHEMA))
    p2p: pd.DataFrame = field(default_factory=lambda: frame([], P2P_SCHEMA))
    windows: pd.DataFrame = field(default_factory=lambda: frame([], WINDOWS_SCHEMA))
    file_issues: list[FileIssue] = field(default_factory=list)
    spec_errors: list[str] = field(default_factory=list)
    comm_skipped: list[str] = field(default_factory=list)
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)  # what analysis derives once


def frame(rows: list[dict[str, Any]], schema: dict[str, str]) -> pd.DataFrame:
    """A DataFrame with exactly the schema's columns and dtypes, also when there are no rows."""
    data = pd.DataFrame(rows, columns=list(schema))
    return data.astype(schema)


def find_runs(roots: Iterable[Path]) -> list[tuple[Path, Path]]:
    """(root, run directory) for every run.json below the roots, each run once however many roots reach
    it (the same root given twice, or a root inside another); a bad root is a ReportError."""
    found: dict[Path, tuple[Path, Path]] = {}
    for root in roots:
        if not root.exists():
            raise ReportError(f"results directory {root} does not exist")
        if not root.is_dir():
            raise ReportError(f"{root} is not a directory")
        try:
            for path in sorted(root.rglob(RUN_FILE)):
                if not any(part.startswith(ATTEMPT_PREFIX) for part in path.relative_to(root).parts[:-1]):
                    found.setdefault(path.parent.resolve(), (root, path.parent))
        except PermissionError as exc:
            raise ReportError(f"cannot read {exc.filename}: permission denied") from None
    return list(found.values())


def arg_value(args: Iterable[str], name: str) -> str | None:
    """The value of ``--name V`` or ``--name=V`` in an argument list (the last one given)."""
    args, found = list(args), None
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith(name + "="):
            found = arg.split("=", 1)[1]
    return found


def _model(spec: RunSpec, env: dict[str, Any] | None) -> str:
    if env and env.get("model"):
        return str(env["model"])
    return arg_value(spec.args, "--model") or ""


def _compute(env: dict[str, Any] | None) -> dict[str, Any]:
    """What achieved FLOP/s is judged by: the FLOPs per sample rank 0 recorded, and the device that did the
    work (the GPU's NVML name, or on a CPU run the CPU's model name)."""
    env = env or {}
    flops = env.get("flops_per_sample")
    gpu, device = env.get("gpu") or {}, env.get("device") or {}
    on_gpu = device.get("type") in ("cuda", "GPU", "gpu") or bool(gpu)
    name = (gpu.get("name") or device.get("name")) if on_gpu else env.get("cpu_model")
    return {"flops_per_sample": flops if isinstance(flops, (int, float)) and not isinstance(flops, bool) else None,
            "flops_counted": env.get("flops_counted") if isinstance(env.get("flops_counted"), str) else None,
            "device_name": name if isinstance(name, str) else None, "tf32": _tf32(env)}


def _tf32(env: dict[str, Any]) -> bool | None:
    """Whether fp32 products could run as TF32: allowed (env.math, and NVIDIA_TF32_OVERRIDE not 0) on a GPU of
    compute capability 8.0 or newer, which has TF32 tensor cores; None where the run did not record it (a CPU
    run, an older log)."""
    math, device = env.get("math"), env.get("device") or {}
    variables = env.get("variables") if isinstance(env.get("variables"), dict) else {}
    if not isinstance(math, dict) or not isinstance(device, dict):
        return None
    try:
        major = int(str(device.get("capability", "")).split(".")[0])
    except ValueError:
        return None
    allowed = bool(math.get("tf32_matmul") or math.get("tf32_convolution"))
    return allowed and variables.get("NVIDIA_TF32_OVERRIDE") != "0" and major >= 8


_COLUMN_TYPES = {"boolean": (bool,), "Int64": (int,), "float64": (int, float), "string": (str,)}


def _trains(benchmark: str) -> bool:
    """Whether a run of that benchmark times training steps (collectives and p2p time other things)."""
    info = BENCHMARKS.get(benchmark)
    return info is None or info.trains


def _recorded(column: RunColumn, first: dict[str, dict[str, Any]]) -> Any:
    """A RUN_COLUMNS value from rank 0's first record of its kind: null where absent or of another type."""
    value: Any = first.get(column.kind)
    for key in column.path:
        value = value.get(key) if isinstance(value, dict) else None
    if column.render is not None:
        value = column.render(value)
    ok = isinstance(value, _COLUMN_TYPES[column.dtype]) and (column.dtype == "boolean" or not isinstance(value, bool))
    return value if ok else None


def _float(text: Any) -> float | None:
    """A recorded variable as a number (None where it is not one)."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _exchange(env: dict[str, Any] | None) -> dict[str, Any]:
    """What the step-time projection needs of a run's exchange: gradient tensors, the forward pass's share of
    the FLOPs, and the fusion threshold and cycle time its ranks ran with (None: Horovod's default)."""
    env = env or {}
    variables = env.get("variables") if isinstance(env.get("variables"), dict) else {}
    tensors, total, forward = env.get("gradient_tensors"), env.get("flops_per_sample"), env.get("flops_forward_per_sample")
    share = forward / total if all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
                                   for v in (total, forward)) else None
    cycle_ms = _float(variables.get("HOROVOD_CYCLE_TIME"))
    return {"gradient_tensors": tensors if isinstance(tensors, int) and not isinstance(tensors, bool) else None,
            "forward_share": share, "fusion_bytes": _float(variables.get("HOROVOD_FUSION_THRESHOLD")),
            "cycle_s": None if cycle_ms is None else cycle_ms / 1e3}


def _axes(spec: RunSpec, env: dict[str, Any] | None) -> dict[str, Any]:
    """The swept axes the report groups by (suite/core/axes.py: batch size, precision, layout, compiler, data,
    fp16 exchange, threads), exchange or not, and the arguments without --independent (which pairs an
    exchanging run with its independent twin)."""
    flags = (env or {}).get("flags") or {}
    values = read_axes(flags, spec.args, spec.framework)
    return {**values, "precision": str(values["precision"]), "independent": "--independent" in spec.args,
            "base_args": " ".join(a for a in spec.args if a != "--independent")}


def _env_row(run_id: str, rec: dict[str, Any]) -> dict[str, Any]:
    device, gpu = rec.get("device") or {}, rec.get("gpu") or {}
    mpi = rec.get("mpi") or {}
    return {"run_id": run_id, "rank": rec["rank"], "host": rec.get("host"), "device": device.get("type"),
            "gpu_name": gpu.get("name") or device.get("name"), "gpu_bus_id": gpu.get("pci_bus_id") or device.get("pci_bus_id"),
            **{name: gpu.get(name) for name in GPU_LIMITS},
            "framework_version": device.get("torch") or device.get("tensorflow"),
            "horovod": (rec.get("horovod") or {}).get("version"),
            "mpi": mpi_text(mpi)}




def _cell(value: Any) -> Any:
    """A record value as a table cell: a list (clock events) as its items joined by commas."""
    return ",".join(map(str, value)) if isinstance(value, list) else value


class _Run:
    """What one run's rank logs add to the tables, and what its outcome is judged from."""

    def __init__(self, spec: RunSpec, tables: dict[str, list[dict[str, Any]]], skipped: set[str]) -> None:
        self.spec, self.tables, self.skipped = spec, tables, skipped
        self.env: dict[str, Any] | None = None
        self.summary_ranks: set[int] = set()
        self.errors: list[str] = []
        self.start: float | None = None  # the current log's first monotonic time
        self.peaks: dict[str, float] = {}
        self.adaptive: dict[str, Any] = {}
        self.foreign: list[str] = []
        self.timed: dict[int, float] = {}  # rank -> seconds from its log's start to its timed phase
        self.first: dict[str, dict[str, Any]] = {}  # rank 0's first record of each kind (RUN_COLUMNS)
        self.timed_steps = 0  # valid timed step records read, every rank
        self.last: float = 0.0             # the latest record, seconds from its log's start (any rank)

    def _t(self, rec: dict[str, Any]) -> float | None:
        """A record's time from its rank log's first record, in seconds."""
        t = rec.get("mono")
        return t - self.start if isinstance(t, (int, float)) and self.start is not None else None

    def check_ranks(self, path: Path, ranks: set[tuple[int, int]]) -> None:
        """Records of a file must be of its own rank and of this run's size: anything else came from
        another run (a copied log) and makes the run inconsistent."""
        name = path.name.removeprefix("rank-").removesuffix(".jsonl")
        own = int(name) if name.isdigit() else None
        alien = sorted((r, n) for r, n in ranks if r != own or n != self.spec.np)
        if alien or own is None or own >= self.spec.np:
            self.foreign.append(f"{path.name} holds records of rank {alien[0][0]} of {alien[0][1]}" if alien
                                else f"{path.name} is not a rank of this {self.spec.np}-rank run")

    def check_steps(self, path: Path, log: RankLog) -> None:
        """Steps that cannot be true make the run inconsistent, said with the rank: a step index repeated (a
        log written twice or copied into itself), a step shorter than any real one, or a timed step counting
        other than its batch where the unit is one sample per batch item (images, samples, utterances)."""
        if log.repeated:
            self.foreign.append(f"{path.name} repeats step numbers ({log.repeated} record(s)): a log written twice")
        if log.too_short:
            self.foreign.append(f"{path.name} has {log.too_short} step(s) shorter than {MIN_STEP_S * 1e6:g} us, "
                                "which no training step is")
        warmup = log.steps.get("warmup")
        if warmup is None:
            return
        timed = ~warmup
        self.timed_steps += int(timed.sum())
        env = self.env or {}
        batch = (env.get("flags") or {}).get("batch_size") if isinstance(env.get("flags"), dict) else None
        if env.get("unit") in PER_ITEM_UNITS and isinstance(batch, int) and not isinstance(batch, bool):
            wrong = np.flatnonzero(timed & (log.steps["samples"] != batch))
            if len(wrong):
                i = wrong[0]
                self.foreign.append(f"{path.name}: step {int(log.steps['step'][i])} counts "
                                    f"{log.steps['samples'][i]:g} {env['unit']} but its batch is {batch}")

    def on_env(self, rec: dict[str, Any]) -> None:
        if rec.get("run_id") not in (None, self.spec.id):
            self.foreign.append(f"rank {rec['rank']}'s log was written by run {rec['run_id']}")
        self.env = self.env or rec
        self.tables["env"].append(_env_row(self.spec.id, rec))

    def on_telemetry(self, rec: dict[str, Any]) -> None:
        self.tables["telemetry"].append({"run_id": self.spec.id, "rank": rec["rank"], "t_s": self._t(rec),
                                         **{f: _cell(rec.get(f)) for f in TELEMETRY_FIELDS}})

    def on_summary(self, rec: dict[str, Any]) -> None:
        self.summary_ranks.add(rec["rank"])
        if rec["rank"] == 0:
            self.adaptive = {"timed_steps": rec.get("steps"), **{name: rec.get(name) for name in ADAPTIVE_FIELDS}}
        for key in ("peak_device_bytes", "peak_rss_bytes"):
            if isinstance(rec.get(key), (int, float)):
                self.peaks[key] = max(self.peaks.get(key, 0.0), float(rec[key]))
        end, start = self._t(rec), self.timed.get(rec["rank"])
        if end is not None and start is not None:
            self.tables["windows"].append({"run_id": self.spec.id, "rank": rec["rank"], "start_s": start, "end_s": end,
                                           "samples": rec.get("samples")})

    def on_comm(self, rec: dict[str, Any]) -> None:
        if rec.get("skipped"):
            self.skipped.add(f"{rec.get('op')} via {rec.get('backend')}, {rec.get('dtype')}: {rec['skipped']}")
            return
        nbytes, times = rec.get("bytes"), rec.get("times") or []
        if not (isinstance(nbytes, int) and 0 < nbytes <= MAX_CASE_BYTES) or not all(
                isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t > 0 for t in times):
            self.foreign.append(f"rank {rec['rank']}: a {rec.get('op')} record of {nbytes!r} bytes or with times "
                                "that are not positive seconds")
            return
        trained = rec.get("pattern") == "training"
        pattern = "training" if trained else "isolated"
        # how the times were taken: a training pattern's steps back to back; batches of calls; calls one by one
        timing = "steps" if trained else rec.get("timing") if rec.get("timing") in TIMINGS else "each"
        self.tables["comm"] += [{"run_id": self.spec.id, "rank": rec["rank"], "op": rec.get("op"),
                                 "backend": rec.get("backend"), "dtype": rec.get("dtype"), "bytes": rec.get("bytes"),
                                 "pattern": pattern, "like_workload": rec.get("like_workload") if trained else None,
                                 "iteration": i, "time": t, "timing": timing} for i, t in enumerate(rec.get("times") or [])]

    def on_p2p(self, rec: dict[str, Any]) -> None:
        self.tables["p2p"] += [{"run_id": self.spec.id, **{k: rec.get(k) for k in ("src", "dst", "mode", "bytes", "link",
                                                                                 "peer_access")},
                                "iteration": i, "time": t} for i, t in enumerate(rec.get("times") or [])]

    def on_error(self, rec: dict[str, Any]) -> None:
        self.errors.append(f"rank {rec['rank']}: {rec.get('message', '')}")

    def on_profile(self, rec: dict[str, Any]) -> None:
        self.tables["profile"] += [
            {"run_id": self.spec.id, "rank": rec["rank"], "operator": op.get("name"), "calls": op.get("calls"),
             "self_cpu_us": op.get("self_cpu_us"), "self_device_us": op.get("self_device_us"),
             "cpu_total_us": op.get("cpu_total_us"), "trace": rec.get("trace")}
            for op in rec.get("top") or [] if isinstance(op, dict)]

    def on_phase(self, rec: dict[str, Any]) -> None:
        if rec.get("phase") == "timed" and (t := self._t(rec)) is not None:
            self.timed[rec["rank"]] = t

    def details(self, recorded: RunStatus | None) -> dict[str, Any]:
        """Per-run facts beyond the steps: parameters, peak memory, wall time and its set-up part (from the
        first record to the timed steps, rank 0)."""
        parameters = (self.env or {}).get("parameters")
        wall = recorded.seconds if recorded is not None and recorded.seconds else (self.last or None)
        return {"parameters": parameters if isinstance(parameters, int) else None,
                "peak_device_bytes": self.peaks.get("peak_device_bytes"), "peak_rss_bytes": self.peaks.get("peak_rss_bytes"),
                "wall_s": wall, "setup_s": self.timed.get(0), **self.adaptive}


# Each record kind (schema.KINDS) and what the collector does with it; steps are read column-wise in read_log.
PARSERS: dict[str, Callable[[_Run, dict[str, Any]], None]] = {
    "env": _Run.on_env, "telemetry": _Run.on_telemetry, "summary": _Run.on_summary, "comm": _Run.on_comm,
    "error": _Run.on_error, "profile": _Run.on_profile, "phase": _Run.on_phase, "p2p": _Run.on_p2p,
}


def _steps_frame(parts: list[tuple[str, dict[str, np.ndarray]]]) -> pd.DataFrame:
    """The steps DataFrame (STEPS_SCHEMA) of every log's step columns, each column concatenated once (a
    DataFrame per log and a concat of them cost seconds and twice the memory at 10M records)."""
    lengths = [len(columns["step"]) for _, columns in parts]
    data: dict[str, Any] = {"run_id": pd.array(np.repeat(np.array([run_id for run_id, _ in parts], dtype=object),
                                                         lengths), dtype="string")}
    for name, dtype in list(STEPS_SCHEMA.items())[1:]:
        arrays = [columns.get(name) for _, columns in parts]
        if any(a is not None for a in arrays):
            data[name] = np.concatenate([np.full(n, np.nan) if a is None else a for a, n in zip(arrays, lengths)]
                                        ).astype(dtype, copy=False)
        else:
            data[name] = np.full(sum(lengths), np.nan, dtype=dtype)
    return pd.DataFrame(data, copy=False)


def _attempts(run_dir: Path) -> dict[str, Any]:
    """How many times the run was started (its earlier attempts are kept in attempt-N/) and how each
    earlier one ended, by its own status.json: ``attempt-1: failed (reason); ...``."""
    earlier = earlier_attempts(run_dir)
    said = []
    for folder in earlier:
        status = RunStatus.read(folder)
        said.append(f"{folder.name}: " + ("no status recorded" if status is None else
                                          status.status + (f" ({status.message})" if status.message else "")))
    return {"attempts": len(earlier) + 1, "earlier_attempts": "; ".join(said)}


def _read_specs(roots: list[Path]) -> tuple[list[tuple[Path, Path, RunSpec]], list[str]]:
    """Every run directory's RunSpec under the roots, and one line for each rank-log folder without a readable
    run.json (left out)."""
    found = find_runs(roots)
    described = {run_dir.resolve() for _, run_dir in found}
    errors: list[str] = []
    for root in roots:
        orphans = sorted({log.parent for log in root.rglob("rank-*.jsonl")
                          if log.parent.resolve() not in described
                          and not any(part.startswith(ATTEMPT_PREFIX) for part in log.relative_to(root).parts)})
        errors += [f"{orphan}: rank logs without a {RUN_FILE} (not a run hvdbench or its scripts wrote "
                   "completely); left out" for orphan in orphans]
    specs: list[tuple[Path, Path, RunSpec]] = []
    for root, run_dir in found:
        try:
            specs.append((root, run_dir, RunSpec.read(run_dir / RUN_FILE)))
        except SpecError as exc:
            errors.append(str(exc))
    return _one_copy_each(specs, errors)


def _one_copy_each(specs: list[tuple[Path, Path, RunSpec]],
                   errors: list[str]) -> tuple[list[tuple[Path, Path, RunSpec]], list[str]]:
    """A run is its id: where two folders hold the same run (a backup copy, a copied run.json), one is read
    and each other one is left out with a line saying which copy was used and why; never a second repeat."""
    by_id: dict[str, list[tuple[Path, Path, RunSpec]]] = {}
    for item in specs:
        by_id.setdefault(item[2].id, []).append(item)
    kept = []
    for run_id, copies in by_id.items():
        ranked = sorted(copies, key=lambda c: _copy_rank(c[1], run_id))
        kept.append(ranked[0])
        why = _copy_why(ranked[0][1], run_id)
        errors += [f"{other[1]}: a copy of run {run_id} (the same run id); {ranked[0][1]} is used ({why})"
                   for other in ranked[1:]]
    return kept, errors


def _copy_rank(run_dir: Path, run_id: str) -> tuple[int, int, int, str]:
    """How good a copy of a run is, best first: the folder the executors name it by, complete by its own
    status, with the most rank logs, then by path (stable)."""
    status = RunStatus.read(run_dir)
    return (run_dir.name != run_id, not (status is not None and status.status == "ok"),
            -len(list(run_dir.glob("rank-*.jsonl"))), str(run_dir))


def _copy_why(run_dir: Path, run_id: str) -> str:
    status = RunStatus.read(run_dir)
    reasons = ["its folder is named by the run id"] if run_dir.name == run_id else []
    if status is not None and status.status == "ok":
        reasons.append("it recorded its end as ok")
    reasons.append(f"it holds {len(list(run_dir.glob('rank-*.jsonl')))} rank log(s)")
    return ", ".join(reasons)


def _run_row(root: Path, run_dir: Path, run: _Run, recorded: RunStatus | None, logged: int) -> dict[str, Any]:
    """One row of the run table (RUNS_SCHEMA): the spec, how the run ended, and what its records say."""
    spec = run.spec
    outcome = run_outcome(spec.np, run.summary_ranks, run.errors, recorded, run.foreign)
    if outcome.ok and run.timed_steps == 0 and _trains(spec.benchmark):
        outcome = Outcome("incomplete", "incomplete: no valid timed step in its logs (see Malformed log lines)")
    return {
        "run_id": spec.id, "root": str(root), "system": spec.system, "framework": spec.framework,
        "benchmark": spec.benchmark, "model": _model(spec, run.env), "args": " ".join(spec.args),
        "np": spec.np, "nodes": spec.nodes, "launcher": spec.launcher, "controller": spec.controller,
        "placement": spec.placement or "", "knobs": " ".join(f"{k}={v}" for k, v in spec.env),
        "repeat": spec.repeat,
        "unit": (run.env or {}).get("unit", "samples"), "status": outcome.status, "reason": outcome.reason,
        "ranks_logged": logged, **_axes(spec, run.env), **run.details(recorded), **_compute(run.env),
        **_exchange(run.env),
        **_attempts(run_dir), **{column.name: _recorded(column, run.first) for column in RUN_COLUMNS},
    }


def _copied_repeats(runs: list[dict[str, Any]], prints: list[str | None]) -> None:
    """Repeats of one configuration whose step times are identical to the last digit (no two measurements are: a
    folder copied under a new repeat number) are left out as inconsistent, naming the run they copy: they would
    narrow the interval over repeats to nothing."""
    first: dict[str, str] = {}
    for row, fingerprint in sorted(zip(runs, prints), key=lambda pair: (pair[0]["repeat"], pair[0]["run_id"])):
        if fingerprint is None or row["status"] != "ok":
            continue
        if fingerprint in first:
            row["status"] = "inconsistent"
            row["reason"] = (f"inconsistent: its step times are those of run {first[fingerprint]} to the last digit: "
                             "a copy under another repeat number, not a measurement of its own")
        else:
            first[fingerprint] = row["run_id"]


def collect(roots: Iterable[Path]) -> Collection:
    """Read every run under the roots: specs, rank logs, statuses. Never fails on a bad line."""
    roots = [Path(r) for r in roots]
    runs: list[dict[str, Any]] = []
    step_parts: list[tuple[str, dict[str, np.ndarray]]] = []
    tables: dict[str, list[dict[str, Any]]] = {"comm": [], "telemetry": [], "env": [], "profile": [], "p2p": [],
                                               "windows": []}
    skipped: set[str] = set()
    issues: list[FileIssue] = []
    specs, spec_errors = _read_specs(roots)
    logs_of = {run_dir: sorted(run_dir.glob("rank-*.jsonl")) for _, run_dir, _ in specs}
    read = iter(read_all([log for _, run_dir, _ in specs for log in logs_of[run_dir]]))
    prints: list[str | None] = []  # each run's step times, fingerprinted: a repeat copied from another is told
    for root, run_dir, spec in specs:
        run = _Run(spec, tables, skipped)
        logged = 0
        steps_seen = hashlib.sha256(replace(spec, repeat=0).id.encode())
        for path in logs_of[run_dir]:
            log = next(read)
            run.check_ranks(path, log.ranks)
            if log.unreadable:
                issues.append(FileIssue(log.path, 0, [log.unreadable]))
                continue
            logged += 1
            if len(log.steps.get("step", ())):
                step_parts.append((spec.id, log.steps))
                steps_seen.update(np.ascontiguousarray(log.steps["duration"], dtype=float).tobytes())
            run.start = log.start
            for rec in log.others:
                if rec.get("rank") == 0:
                    run.first.setdefault(rec["kind"], rec)
                PARSERS[rec["kind"]](run, rec)
            run.check_steps(path, log)
            if log.end is not None and log.start is not None:
                run.last = max(run.last, log.end - log.start)
            if log.malformed:
                issues.append(FileIssue(log.path, log.malformed, log.examples))
        recorded = RunStatus.read(run_dir)
        if recorded is None and (run_dir / STATUS_FILE).exists():
            issues.append(FileIssue(str(run_dir / STATUS_FILE), 1, ["unreadable status.json: the run is judged by "
                                                                     "its rank logs"]))
        runs.append(_run_row(root, run_dir, run, recorded, logged))
        prints.append(steps_seen.hexdigest() if run.timed_steps >= 2 else None)
    _copied_repeats(runs, prints)
    steps = _steps_frame(step_parts)
    return Collection(frame(runs, RUNS_SCHEMA), steps, frame(tables["comm"], COMM_SCHEMA),
                      frame(tables["telemetry"], TELEMETRY_SCHEMA), frame(tables["env"], ENV_SCHEMA),
                      frame(tables["profile"], PROFILE_SCHEMA), frame(tables["p2p"], P2P_SCHEMA),
                      frame(tables["windows"], WINDOWS_SCHEMA), issues, spec_errors, sorted(skipped))
