"""Collect: every run directory under the result roots into DataFrames with explicit schemas."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from hvdbench.suite.errors import ReportError, SpecError
from hvdbench.suite.records import ParseStats, read_records
from hvdbench.suite.spec import RUN_FILE, RunSpec, RunStatus

RUNS_SCHEMA: dict[str, str] = {
    "run_id": "string", "root": "string", "system": "string", "framework": "string",
    "benchmark": "string", "model": "string", "args": "string", "np": "int64", "nodes": "int64",
    "launcher": "string", "controller": "string", "placement": "string", "repeat": "int64",
    "unit": "string", "status": "string", "reason": "string", "ranks_logged": "int64",
}
PHASES = ("forward", "backward", "exchange", "optimizer")
STEPS_SCHEMA: dict[str, str] = {
    "run_id": "string", "rank": "int64", "step": "int64", "warmup": "bool",
    "duration": "float64", "samples": "float64", "loss": "float64",
    **{phase: "float64" for phase in PHASES},
}
COMM_SCHEMA: dict[str, str] = {
    "run_id": "string", "rank": "int64", "op": "string", "backend": "string", "dtype": "string",
    "bytes": "int64", "iteration": "int64", "time": "float64",
}
SUMMARIES_SCHEMA: dict[str, str] = {
    "run_id": "string", "rank": "int64", "host": "string", "steps": "Int64", "samples": "float64",
    "window_s": "float64", "median_step_s": "float64", "throughput": "float64",
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
    summaries: pd.DataFrame
    comm: pd.DataFrame
    file_issues: list[FileIssue] = field(default_factory=list)
    spec_errors: list[str] = field(default_factory=list)
    comm_skipped: list[str] = field(default_factory=list)


def frame(rows: list[dict[str, Any]], schema: dict[str, str]) -> pd.DataFrame:
    """A DataFrame with exactly the schema's columns and dtypes, also when there are no rows."""
    data = pd.DataFrame(rows, columns=list(schema))
    return data.astype(schema)


def find_runs(roots: Iterable[Path]) -> list[tuple[Path, Path]]:
    """(root, run directory) for every run.json below the roots; a bad root is a ReportError."""
    found = []
    for root in roots:
        if not root.exists():
            raise ReportError(f"results directory {root} does not exist")
        if not root.is_dir():
            raise ReportError(f"{root} is not a directory")
        try:
            found += [(root, path.parent) for path in sorted(root.rglob(RUN_FILE))]
        except PermissionError as exc:
            raise ReportError(f"cannot read {exc.filename}: permission denied") from None
    return found


def _model(spec: RunSpec, env: dict[str, Any] | None) -> str:
    if env and env.get("model"):
        return str(env["model"])
    args = list(spec.args)
    for i, arg in enumerate(args):
        if arg == "--model" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--model="):
            return arg.split("=", 1)[1]
    return ""


def _valid_step(rec: dict[str, Any]) -> bool:
    step, duration, samples = rec.get("step"), rec.get("duration"), rec.get("samples")
    return (isinstance(step, int) and isinstance(duration, (int, float)) and duration > 0
            and isinstance(samples, (int, float)))


def collect(roots: Iterable[Path]) -> Collection:
    """Read every run under the roots: specs, rank logs, statuses. Never fails on a bad line."""
    roots = [Path(r) for r in roots]
    runs: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    summaries: list[dict[str, Any]] = []
    comm: list[dict[str, Any]] = []
    skipped: set[str] = set()
    issues: list[FileIssue] = []
    spec_errors: list[str] = []
    for root, run_dir in find_runs(roots):
        try:
            spec = RunSpec.read(run_dir / RUN_FILE)
        except SpecError as exc:
            spec_errors.append(str(exc))
            continue
        summary_ranks: set[int] = set()
        errors: list[str] = []
        env: dict[str, Any] | None = None
        logged = 0
        for log in sorted(run_dir.glob("rank-*.jsonl")):
            stats = ParseStats()
            try:
                records = read_records(log, stats)
            except OSError as exc:
                issues.append(FileIssue(str(log), 0, [f"unreadable: {exc.strerror}"]))
                continue
            logged += 1
            seen_steps: set[int] = set()
            for rec in records:
                kind = rec["kind"]
                if kind == "env" and env is None:
                    env = rec
                elif kind == "step" and not _valid_step(rec):
                    stats.malformed += 1
                    if len(stats.examples) < 3:
                        stats.examples.append("step record without an integer step and a positive duration")
                elif kind == "step" and rec.get("step") not in seen_steps:
                    seen_steps.add(rec.get("step"))
                    phases = rec.get("phases") or {}
                    steps.append({"run_id": spec.id, "rank": rec["rank"], "step": rec.get("step"),
                                  "warmup": bool(rec.get("warmup")), "duration": rec.get("duration"),
                                  "samples": rec.get("samples"), "loss": rec.get("loss"),
                                  **{phase: phases.get(phase) for phase in PHASES}})
                elif kind == "summary" and rec["rank"] not in summary_ranks:
                    summary_ranks.add(rec["rank"])
                    summaries.append({"run_id": spec.id, "rank": rec["rank"], "host": rec.get("host"),
                                      **{k: rec.get(k) for k in ("steps", "samples", "window_s",
                                                                 "median_step_s", "throughput")}})
                elif kind == "comm" and rec.get("skipped"):
                    skipped.add(f"{rec.get('op')} via {rec.get('backend')}, {rec.get('dtype')}: {rec['skipped']}")
                elif kind == "comm":
                    comm += [{"run_id": spec.id, "rank": rec["rank"], "op": rec.get("op"), "backend": rec.get("backend"),
                              "dtype": rec.get("dtype"), "bytes": rec.get("bytes"), "iteration": i, "time": t}
                             for i, t in enumerate(rec.get("times") or [])]
                elif kind == "error":
                    errors.append(f"rank {rec['rank']}: {rec.get('message', '')}")
            if stats.malformed:
                issues.append(FileIssue(str(log), stats.malformed, stats.examples))
        recorded = RunStatus.read(run_dir)
        status = recorded.status if recorded is not None else None
        missing = sorted(set(range(spec.np)) - summary_ranks)
        if recorded is not None and status != "ok":
            reason = f"{status}: {recorded.message}" if recorded.message else recorded.status
        elif errors:
            reason, status = errors[0], "failed"
        elif missing:
            reason, status = f"incomplete: no summary from rank(s) {missing}", "incomplete"
        else:
            reason, status = "", "ok"
        runs.append({
            "run_id": spec.id, "root": str(root), "system": spec.system, "framework": spec.framework,
            "benchmark": spec.benchmark, "model": _model(spec, env), "args": " ".join(spec.args),
            "np": spec.np, "nodes": spec.nodes, "launcher": spec.launcher, "controller": spec.controller,
            "placement": spec.placement or "", "repeat": spec.repeat,
            "unit": (env or {}).get("unit", "samples"), "status": status, "reason": reason,
            "ranks_logged": logged,
        })
    return Collection(frame(runs, RUNS_SCHEMA), frame(steps, STEPS_SCHEMA), frame(summaries, SUMMARIES_SCHEMA),
                      frame(comm, COMM_SCHEMA), issues, spec_errors, sorted(skipped))
