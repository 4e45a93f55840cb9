"""Collect: every run directory under the result roots into DataFrames with explicit schemas."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import pandas as pd

from hvdbench.core.catalog import BENCHMARKS
from hvdbench.core.collective_ops import TIMINGS
from hvdbench.core.metrics import Outcome, run_outcome
from hvdbench.core.records import rank_of_log
from hvdbench.core.run_table import RUNS_SCHEMA, RunFacts, mpi_text, run_row
from hvdbench.core.schema import HEADER, KINDS
from hvdbench.core.hca import active_rdma
from hvdbench.readers.nccl_log import read_nccl_log, run_fabric
from hvdbench.core.spec import RunFolder, RunSpec

from .copies import copied_runs
from .found import read_specs
from .rank_logs import MIN_STEP_S, PHASES, RankLog, read_all

PER_ITEM_UNITS = ("images", "samples", "utterances")  # units a step counts one of per batch item
MAX_CASE_BYTES = 1 << 50  # a collective case of more than a pebibyte was never measured
_DTYPES = {"str": "string", "int": "int64", "float": "float64", "bool": "boolean"}


def fields_of(kind: str, *names: str) -> dict[str, str]:
    """Columns that hold record fields of ``kind`` (or the header every record has) as they are: each name with its
    declared type's dtype, so that a name the schema does not declare stops the import (KeyError), not a report."""
    declared = {f.name: f.type for f in (*HEADER, *KINDS[kind].fields)}
    return {name: _DTYPES[declared[name]] for name in names}


RUN_ID = {"run_id": "string"}  # every record table's first column: the run the record came from
# Each rank's timed window, in seconds from the rank log's first record (as telemetry's t_s), and its samples.
WINDOWS_SCHEMA: dict[str, str] = {**RUN_ID, **fields_of("step", "rank"), "start_s": "float64", "end_s": "float64",
                                  "samples": "float64"}
STEPS_SCHEMA: dict[str, str] = {
    **RUN_ID, **fields_of("step", "rank"), **KINDS["step"].columns(), **{phase: "float64" for phase in PHASES},
}
# one row per timed iteration (a record's times, exploded)
COMM_SCHEMA: dict[str, str] = {
    **RUN_ID, **fields_of("comm", "rank", "op", "backend", "dtype", "bytes", "pattern", "like_workload"),
    "iteration": "int64", "time": "float64", **fields_of("comm", "timing"),
}
P2P_SCHEMA: dict[str, str] = {
    **RUN_ID, **fields_of("p2p", "src", "dst", "mode", "bytes", "link", "peer_access"), "iteration": "int64",
    "time": "float64",
}
TELEMETRY_FIELDS = tuple(KINDS["telemetry"].columns())
TELEMETRY_SCHEMA: dict[str, str] = {**RUN_ID, **fields_of("telemetry", "rank"), "t_s": "float64",
                                    **KINDS["telemetry"].columns()}
GPU_LIMITS = ("max_sm_clock_mhz", "max_memory_clock_mhz", "power_limit_w", "pcie_max_gen", "pcie_max_width",
              "ecc_uncorrected", "retired_pages")  # env.gpu facts that telemetry is judged against
# the env record's nested facts, flattened: its device and GPU, the framework's, Horovod's and MPI's versions
ENV_SCHEMA: dict[str, str] = {
    **RUN_ID, **fields_of("env", "rank", "host"), "device": "string", "gpu_name": "string",
    "gpu_bus_id": "string", **{name: "float64" for name in GPU_LIMITS},
    "framework_version": "string", "horovod": "string", "mpi": "string",
}
# one row per evaluation on the way to a quality target
EVALS_SCHEMA: dict[str, str] = {**RUN_ID, **fields_of("eval", "rank"), **KINDS["eval"].columns()}
# one row per operator of a profile record's top list
PROFILE_SCHEMA: dict[str, str] = {
    **RUN_ID, **fields_of("profile", "rank"), "operator": "string", "calls": "Int64", "self_cpu_us": "float64",
    "self_device_us": "float64", "cpu_total_us": "float64", **fields_of("profile", "trace"),
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
    evals: pd.DataFrame = field(default_factory=lambda: frame([], EVALS_SCHEMA))
    file_issues: list[FileIssue] = field(default_factory=list)
    spec_errors: list[str] = field(default_factory=list)
    comm_skipped: list[str] = field(default_factory=list)
    cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)  # what analysis derives once


def frame(rows: list[dict[str, Any]], schema: dict[str, str]) -> pd.DataFrame:
    """A DataFrame with exactly the schema's columns and dtypes, also when there are no rows."""
    data = pd.DataFrame(rows, columns=list(schema))
    return data.astype(schema)


def _trains(benchmark: str) -> bool:
    """Whether a run of that benchmark times training steps (collectives and p2p time other things)."""
    info = BENCHMARKS.get(benchmark)
    return info is None or info.trains


def _env_row(run_id: str, rec: dict[str, Any]) -> dict[str, Any]:
    device, gpu = rec.get("device") or {}, rec.get("gpu") or {}
    mpi = rec.get("mpi") or {}
    return {"run_id": run_id, "rank": rec["rank"], "host": rec.get("host"), "device": device.get("type"),
            "gpu_name": gpu.get("name") or device.get("name"),
            "gpu_bus_id": gpu.get("pci_bus_id") or device.get("pci_bus_id"),
            **{name: gpu.get(name) for name in GPU_LIMITS},
            "framework_version": device.get("torch") or device.get("tensorflow"),
            "horovod": (rec.get("horovod") or {}).get("version"),
            "mpi": mpi_text(mpi)}




def _timings(others: list[dict[str, Any]]) -> list[np.ndarray]:
    """A log's measurements besides its steps: every collective's and copy's times, and when each evaluation of a
    run to a target came (what tells a copy of a run, and what the history knows a run by)."""
    return [np.asarray(rec["times"], dtype=float) for rec in others
            if rec["kind"] in ("comm", "p2p") and isinstance(rec.get("times"), list)
            and all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in rec["times"])] + \
        [np.asarray([_number(rec.get("elapsed_s")) for rec in others if rec["kind"] == "eval"], dtype=float)]


def _cell(value: Any) -> Any:
    """A record value as a table cell: a list (clock events) as its items joined by commas."""
    return ",".join(map(str, value)) if isinstance(value, list) else value


def _number(value: Any) -> float:
    """A record's number as a float; NaN where it is none (a bool, text, infinite)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else math.nan


class _Run:
    """What one run's rank logs add to the tables, and what its outcome is judged from."""

    def __init__(self, spec: RunSpec, tables: dict[str, list[dict[str, Any]]], skipped: set[str],
                 row_id: str | None = None) -> None:
        self.spec, self.tables, self.skipped = spec, tables, skipped
        self.id = row_id or spec.id  # the run's row: its spec's id, or that id and its root where roots share it
        self.env: dict[str, Any] | None = None
        self.summary_ranks: set[int] = set()
        self.errors: list[str] = []
        self.start: float | None = None  # the current log's first monotonic time
        self.foreign: list[str] = []
        self.timed: dict[int, float] = {}  # rank -> seconds from its log's start to its timed phase
        self.records: dict[str, dict[int, dict[str, Any]]] = {}  # kind -> rank -> its first record (run_table)
        self.timed_steps = 0  # valid timed step records read, every rank
        self.last: float = 0.0             # the latest record, seconds from its log's start (any rank)

    def _t(self, rec: dict[str, Any]) -> float | None:
        """A record's time from its rank log's first record, in seconds."""
        t = rec.get("mono")
        return t - self.start if isinstance(t, (int, float)) and self.start is not None else None

    def check_ranks(self, path: Path, ranks: set[tuple[int, int]]) -> None:
        """Records of a file must be of its own rank and of this run's size: anything else came from
        another run (a copied log) and makes the run inconsistent."""
        own = rank_of_log(path)
        alien = sorted((r, n) for r, n in ranks if r != own or n != self.spec.np)
        if alien or own is None or own >= self.spec.np:
            self.foreign.append(f"{path.name} holds records of rank {alien[0][0]} of {alien[0][1]}" if alien
                                else f"{path.name} is not a rank of this {self.spec.np}-rank run")

    def check_steps(self, path: Path, log: RankLog) -> None:
        """Steps that cannot be true make the run inconsistent, said with the rank: a step index repeated (a
        log written twice or copied into itself), a step shorter than any real one, or a timed step counting
        other than its batch where the unit is one sample per batch item (images, samples, utterances; not an imported
        run's, whose steps are its logged epochs)."""
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
        if env.get("unit") in PER_ITEM_UNITS and type(batch) is int and not env.get("imported"):
            wrong = np.flatnonzero(timed & (log.steps["samples"] != batch))
            if len(wrong):
                i = wrong[0]
                self.foreign.append(f"{path.name}: step {int(log.steps['step'][i])} counts "
                                    f"{log.steps['samples'][i]:g} {env['unit']} but its batch is {batch}")

    def on_env(self, rec: dict[str, Any]) -> None:
        if rec.get("run_id") not in (None, self.spec.id):
            self.foreign.append(f"rank {rec['rank']}'s log was written by run {rec['run_id']}")
        self.env = self.env or rec
        self.tables["env"].append(_env_row(self.id, rec))

    def on_telemetry(self, rec: dict[str, Any]) -> None:
        self.tables["telemetry"].append({"run_id": self.id, "rank": rec["rank"], "t_s": self._t(rec),
                                         **{f: _cell(rec.get(f)) for f in TELEMETRY_FIELDS}})

    def on_summary(self, rec: dict[str, Any]) -> None:
        self.summary_ranks.add(rec["rank"])
        end, start = self._t(rec), self.timed.get(rec["rank"])
        if end is not None and start is not None:
            self.tables["windows"].append({"run_id": self.id, "rank": rec["rank"], "start_s": start, "end_s": end,
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
        self.tables["comm"] += [{"run_id": self.id, "rank": rec["rank"], "op": rec.get("op"),
                                 "backend": rec.get("backend"), "dtype": rec.get("dtype"), "bytes": rec.get("bytes"),
                                 "pattern": pattern, "like_workload": rec.get("like_workload") if trained else None,
                                 "iteration": i, "time": t, "timing": timing}
                                for i, t in enumerate(rec.get("times") or [])]

    def on_p2p(self, rec: dict[str, Any]) -> None:
        self.tables["p2p"] += [{"run_id": self.id,
                                **{k: rec.get(k) for k in ("src", "dst", "mode", "bytes", "link",
                                                                                 "peer_access")},
                                "iteration": i, "time": t} for i, t in enumerate(rec.get("times") or [])]

    def on_eval(self, rec: dict[str, Any]) -> None:
        if rec["rank"] == 0:  # every rank evaluates its shard; rank 0 records the gathered figure
            self.tables["evals"].append({"run_id": self.id, "rank": rec["rank"],
                                         **{name: _number(rec.get(name)) for name in KINDS["eval"].columns()}})

    def on_error(self, rec: dict[str, Any]) -> None:
        self.errors.append(f"rank {rec['rank']}: {rec.get('message', '')}")

    def on_profile(self, rec: dict[str, Any]) -> None:
        self.tables["profile"] += [
            {"run_id": self.id, "rank": rec["rank"], "operator": op.get("name"), "calls": op.get("calls"),
             "self_cpu_us": op.get("self_cpu_us"), "self_device_us": op.get("self_device_us"),
             "cpu_total_us": op.get("cpu_total_us"), "trace": rec.get("trace")}
            for op in rec.get("top") or [] if isinstance(op, dict)]

    def on_phase(self, rec: dict[str, Any]) -> None:
        if rec.get("phase") in ("timed", "run_start") and (t := self._t(rec)) is not None:
            self.timed[rec["rank"]] = t

# Each record kind (schema.KINDS) and what the collector does with it; steps are read column-wise in read_log.
PARSERS: dict[str, Callable[[_Run, dict[str, Any]], None]] = {
    "env": _Run.on_env, "telemetry": _Run.on_telemetry, "summary": _Run.on_summary, "comm": _Run.on_comm,
    "error": _Run.on_error, "profile": _Run.on_profile, "phase": _Run.on_phase, "p2p": _Run.on_p2p,
    "eval": _Run.on_eval,
}


def _run_ids(run_ids: list[str], lengths: list[int]) -> Any:
    """The run_id column: each log's run id repeated over its steps, built by Arrow from one copy of each id
    (a Python string per step costs seconds at 10M records)."""
    if pd.StringDtype().storage != "pyarrow":
        return pd.array(np.repeat(np.array(run_ids, dtype=object), lengths), dtype="string")
    import pyarrow as pa

    codes = pa.array(np.repeat(np.arange(len(run_ids), dtype=np.int32), lengths))
    column = pa.DictionaryArray.from_arrays(codes, pa.array(run_ids, pa.large_string())).cast(pa.large_string())
    return pd.arrays.ArrowStringArray(pa.chunked_array([column]))


def _part_rows(parts: list[tuple[str, dict[str, np.ndarray]]]) -> dict[str, np.ndarray]:
    """Each run's rows of the steps frame that ``parts`` make (its logs' steps lie in one block each)."""
    blocks: dict[str, list[np.ndarray]] = {}
    start = 0
    for run_id, columns in parts:
        count = len(columns["step"])
        blocks.setdefault(run_id, []).append(np.arange(start, start + count))
        start += count
    return {run_id: np.concatenate(found) for run_id, found in blocks.items()}


def step_rows(collection: Collection) -> dict[str, np.ndarray]:
    """Each run's rows of ``collection.steps`` (positions), grouped once per collection."""
    if "step_rows" not in collection.cache:
        steps = collection.steps
        collection.cache["step_rows"] = {str(run_id): rows for run_id, rows in
                                         steps.groupby("run_id", sort=False).indices.items()} if len(steps) else {}
    return collection.cache["step_rows"]


def _steps_frame(parts: list[tuple[str, dict[str, np.ndarray]]]) -> pd.DataFrame:
    """The steps DataFrame (STEPS_SCHEMA) of every log's step columns, each column concatenated once (a
    DataFrame per log and a concat of them cost seconds and twice the memory at 10M records)."""
    lengths = [len(columns["step"]) for _, columns in parts]
    data: dict[str, Any] = {"run_id": _run_ids([run_id for run_id, _ in parts], lengths)}
    for name, dtype in list(STEPS_SCHEMA.items())[1:]:
        arrays = [columns.get(name) for _, columns in parts]
        if any(a is not None for a in arrays):
            data[name] = np.concatenate([np.full(n, np.nan) if a is None else a for a, n in zip(arrays, lengths)]
                                        ).astype(dtype, copy=False)
        else:
            data[name] = np.full(sum(lengths), np.nan, dtype=dtype)
    return pd.DataFrame(data, copy=False)


def _attempts(folder: RunFolder) -> dict[str, Any]:
    """How many times the run was started (its earlier attempts are kept in attempt-N/) and how each
    earlier one ended, by its own status.json: ``attempt-1: failed (reason); ...``."""
    earlier = folder.attempts()
    said = [f"{attempt.path.name}: " + ("no status recorded" if attempt.status is None else attempt.status.status
                                        + (f" ({attempt.status.message})" if attempt.status.message else ""))
            for attempt in earlier]
    return {"attempts": len(earlier) + 1, "earlier_attempts": "; ".join(said)}


def _fabric(folder: RunFolder, nodes: int, env: dict[str, Any]) -> dict[str, Any] | None:
    """What the run's NCCL logs (a GPU run's nccl-rank-N.log) say NCCL used, beside what rank 0's record says of
    its node (active RDMA ports, the NICs its GPU shares a PCIe switch with); None where it has none. A log that
    cannot be read is passed over: the fabric is what the readable ones say."""
    fabrics = []
    for path in folder.nccl_logs():
        try:
            fabrics.append(read_nccl_log(path))
        except ValueError:
            continue
    near = env.get("gpu_nics")
    near_text = [f"{n.get('nic')} ({n.get('link')})" for n in near if isinstance(n, dict)] if isinstance(near, list) \
        else []
    fabric = run_fabric(fabrics, nodes, active_rdma(env.get("node_fabric")), near_text)
    return fabric.as_dict() if fabric is not None else None


def _run_row(root: Path, folder: RunFolder, run: _Run, logged: int) -> dict[str, Any]:
    """One row of the run table (core/run_table.py): the spec, how the run ended, and what its records say."""
    spec, recorded = run.spec, folder.status
    outcome = run_outcome(spec.np, run.summary_ranks, run.errors, recorded, run.foreign)
    to_quality = isinstance((run.records.get("summary", {}).get(0) or {}).get("quality"), dict)
    if outcome.ok and run.timed_steps == 0 and _trains(spec.benchmark) and not to_quality:
        outcome = Outcome("incomplete", "incomplete: no valid timed step in its logs (see Malformed log lines)")
    wall = recorded.seconds if recorded is not None and recorded.seconds else (run.last or None)
    fabric = _fabric(folder, spec.nodes, run.env or {})
    judged = {"root": str(root), "folder": str(folder.path), "row_id": run.id, "status": outcome.status,
              "reason": outcome.reason, "ranks_logged": logged,
              "wall_s": wall, "setup_s": run.timed.get(0), "fabric": fabric, "position": folder.order() or None,
              **_attempts(folder)}
    return run_row(RunFacts(spec, run.records, judged))


def collect(roots: Iterable[Path]) -> Collection:
    """Read every run under the roots: specs, rank logs, statuses. Never fails on a bad line."""
    roots = [Path(r) for r in roots]
    runs: list[dict[str, Any]] = []
    step_parts: list[tuple[str, dict[str, np.ndarray]]] = []
    tables: dict[str, list[dict[str, Any]]] = {"comm": [], "telemetry": [], "env": [], "profile": [], "p2p": [],
                                               "windows": [], "evals": []}
    skipped: set[str] = set()
    issues: list[FileIssue] = []
    specs, spec_errors = read_specs(roots)
    folders = {found.run_dir: RunFolder(found.run_dir) for found in specs}
    logs_of = {run_dir: folders[run_dir].rank_logs() for run_dir in folders}
    read = iter(read_all([log for found in specs for log in logs_of[found.run_dir]]))
    measured: list[np.ndarray] = []  # each run's step and collective times: a copy of another run is told
    for found in specs:
        run_dir, spec = found.run_dir, found.spec
        run = _Run(spec, tables, skipped, found.row_id)
        logged = 0
        seen: list[np.ndarray] = []
        for path in logs_of[run_dir]:
            log = next(read)
            run.check_ranks(path, log.ranks)
            if log.unreadable:
                issues.append(FileIssue(log.path, 0, [log.unreadable]))
                continue
            logged += 1
            if len(log.steps.get("step", ())):
                step_parts.append((run.id, log.steps))
                timed = ~np.asarray(log.steps["warmup"], dtype=bool)  # warm-up steps say nothing of a run's own
                seen.append(np.asarray(log.steps["duration"], dtype=float)[timed])
            run.start = log.start
            seen += _timings(log.others)
            for rec in log.others:
                run.records.setdefault(rec["kind"], {}).setdefault(rec["rank"], rec)
                PARSERS[rec["kind"]](run, rec)
            run.check_steps(path, log)
            if log.end is not None and log.start is not None:
                run.last = max(run.last, log.end - log.start)
            if log.malformed:
                issues.append(FileIssue(log.path, log.malformed, log.examples))
        folder = folders[run_dir]
        if folder.status is None and folder.status_file.exists():
            issues.append(FileIssue(str(folder.status_file), 1, ["unreadable status.json: the run is judged by "
                                                                  "its rank logs"]))
        runs.append(_run_row(found.root, folder, run, logged))
        values = np.concatenate(seen) if seen else np.empty(0)
        measured.append(values[np.isfinite(values)])
    copied_runs(runs, measured)
    steps = _steps_frame(step_parts)
    collection = Collection(frame(runs, RUNS_SCHEMA), steps, frame(tables["comm"], COMM_SCHEMA),
                      frame(tables["telemetry"], TELEMETRY_SCHEMA), frame(tables["env"], ENV_SCHEMA),
                      frame(tables["profile"], PROFILE_SCHEMA), frame(tables["p2p"], P2P_SCHEMA),
                      frame(tables["windows"], WINDOWS_SCHEMA), frame(tables["evals"], EVALS_SCHEMA), issues,
                      spec_errors, sorted(skipped))
    collection.cache["step_rows"] = _part_rows(step_parts)
    collection.cache["measured"] = {row["run_id"]: values for row, values in zip(runs, measured)}  # history digests
    return collection
