"""MLPerf Training's results read and scored as MLPerf scores them, without a framework.

A result file holds ``:::MLLOG {json}`` lines (mlcommons logging's format): the submission's facts,
``global_batch_size``, ``run_start`` and ``run_stop`` (its metadata's ``status``: ``success`` where the run reached
the benchmark's quality target, ``aborted`` where it did not), and an ``eval_accuracy`` point after each evaluation
(its metadata's ``epoch_num``). A run's time to train is ``run_stop`` less ``run_start`` (evaluation on the clock,
as MLPerf keeps it). A benchmark's score over its N runs (5 for ResNet-50 in v4.0) is the olympic mean: the fastest
and the slowest dropped, the others averaged; a run that did not converge counts as the slowest, and two that did
not make the result invalid (MLPerf Training rules, "Results" and "Run results"). A result folder as published:
``<submitter>/results/<system>/<benchmark>/result_N.txt`` beside ``<submitter>/systems/<system>.json``."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from .errors import UsageError
from .validate import read_small_text, text_problem

MLLOG = ":::MLLOG "
MOST_BYTES = 64 << 20  # a result file of MLPerf's is under a megabyte; more is no result file
MOST_RESULTS = 100  # result files of one benchmark: MLPerf asks 5 to 10
FAILURES_ALLOWED = 1  # runs that did not converge a result may hold and stand (the slowest, dropped)


@dataclass(frozen=True)
class MlperfRun:
    """One result file: when its run started and stopped (ms since the epoch), whether it converged, its global batch,
    the evaluations (epoch, accuracy, ms), the submission's facts; ``digest`` what it measured (its events, not its
    bytes: a comment added makes no new run)."""

    path: str
    benchmark: str
    start_ms: int
    stop_ms: int
    status: str
    global_batch: int | None
    evals: tuple[tuple[float | None, float, int], ...]
    facts: dict[str, str] = field(default_factory=dict)
    digest: str = ""

    @property
    def seconds(self) -> float:
        """Time to train: run_stop less run_start, evaluation included."""
        return (self.stop_ms - self.start_ms) / 1000.0

    @property
    def converged(self) -> bool:
        return self.status == "success"

    @property
    def epochs(self) -> float | None:
        """The epoch of the last evaluation, where the log says it."""
        return self.evals[-1][0] if self.evals else None


def mllog_line(key: str, time_s: float, value: Any = None, event_type: str = "POINT_IN_TIME",
               **metadata: Any) -> str:
    """One event as mlcommons logging writes it: ``:::MLLOG {"namespace": "", "time_ms": ..., "event_type": ...,
    "key": ..., "value": ..., "metadata": {...}}``."""
    event = {"namespace": "", "time_ms": int(round(time_s * 1000)), "event_type": event_type, "key": key,
             "value": value, "metadata": metadata}
    return MLLOG + json.dumps(event, allow_nan=False)


def mllog_lines(benchmark: str, global_batch: int, start_s: float, stop_s: float, converged: bool,
                evals: Sequence[tuple[float, float, float]], seed: int, target: float) -> list[str]:
    """A run to a target as an MLPerf Training result file's events: the submission's benchmark, the seed and
    global batch, run_start, each evaluation (``evals``: epoch, accuracy, when) and run_stop with its status
    (success where it converged, aborted where not); what ``read_result`` reads back to the same time to train."""
    return [mllog_line("submission_benchmark", start_s, benchmark), mllog_line("seed", start_s, seed),
            mllog_line("global_batch_size", start_s, global_batch),
            mllog_line("eval_target", start_s, target),
            mllog_line("run_start", start_s, event_type="INTERVAL_START"),
            *(mllog_line("eval_accuracy", at, accuracy, epoch_num=epoch) for epoch, accuracy, at in evals),
            mllog_line("run_stop", stop_s, event_type="INTERVAL_END", status="success" if converged else "aborted")]


def _events(text: str, path: Path) -> list[dict[str, Any]]:
    """The MLLOG events of a result file (other lines, a launcher's own output, passed over)."""
    out = []
    for line in text.splitlines():
        start = line.find(MLLOG)
        if start < 0:
            continue
        try:
            event = json.loads(line[start + len(MLLOG):])
        except ValueError:
            raise UsageError(f"{path}: an MLLOG line that is no JSON: {line[:80]!r}") from None
        if isinstance(event, dict) and isinstance(event.get("key"), str) and type(event.get("time_ms")) in (int, float):
            out.append(event)
    return out


def read_result(path: Path) -> MlperfRun:
    """One result file; a UsageError of one line where it is no MLPerf Training result (no run_start or run_stop, a
    stop before its start, a status neither success nor aborted)."""
    try:
        text = read_small_text(Path(path), MOST_BYTES, "an MLPerf result file")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    events = _events(text, path)
    first = {e["key"]: e for e in reversed(events)}  # each key's first event
    start, stop = first.get("run_start"), first.get("run_stop")
    if start is None or stop is None:
        raise UsageError(f"{path}: no run_start and run_stop MLLOG events: not an MLPerf Training result")
    status = str((stop.get("metadata") or {}).get("status", ""))
    if status not in ("success", "aborted"):
        raise UsageError(f"{path}: run_stop's status {status[:40]!r}: MLPerf writes success or aborted")
    if int(stop["time_ms"]) < int(start["time_ms"]):
        raise UsageError(f"{path}: run_stop is before run_start: a damaged result")
    batch = first.get("global_batch_size", {}).get("value")
    evals = tuple((_epoch(e), float(e["value"]), int(e["time_ms"])) for e in events
                  if e["key"] == "eval_accuracy" and type(e.get("value")) in (int, float)
                  and math.isfinite(e["value"]))
    facts = {k.removeprefix("submission_"): str(e.get("value"))[:120] for k, e in first.items()
             if k.startswith("submission_") and not text_problem(str(e.get("value")))}
    said = json.dumps([[e["key"], e.get("value"), e["time_ms"]] for e in events
                       if e["key"] in ("run_start", "run_stop", "eval_accuracy", "global_batch_size")], default=str)
    return MlperfRun(str(path), facts.get("benchmark", Path(path).parent.name), int(start["time_ms"]),
                     int(stop["time_ms"]), status, batch if type(batch) is int and batch > 0 else None, evals, facts,
                     hashlib.sha256(said.encode()).hexdigest())


def _epoch(event: dict[str, Any]) -> float | None:
    value = (event.get("metadata") or {}).get("epoch_num")
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        else None


@dataclass(frozen=True)
class Olympic:
    """A benchmark's score over its runs, as MLPerf scores it: the mean of the runs left once the fastest and the
    slowest are dropped (None where the runs cannot give one, ``why`` saying so); which were dropped; the runs that
    did not converge."""

    score_s: float | None
    used: tuple[int, ...]
    dropped: tuple[int, ...]
    failed: tuple[int, ...]
    why: str = ""


def olympic(seconds: Sequence[float], converged: Sequence[bool]) -> Olympic:
    """The olympic mean of runs' times to train (indices into the runs): a run that did not converge counts as
    the slowest; more than FAILURES_ALLOWED such runs, or fewer than three runs, give no score."""
    failed = tuple(i for i, ok in enumerate(converged) if not ok)
    if len(seconds) < 3:
        return Olympic(None, (), (), failed, f"{len(seconds)} run(s): the olympic mean drops two, three at least")
    if len(failed) > FAILURES_ALLOWED:
        return Olympic(None, (), (), failed, f"{len(failed)} runs did not converge: MLPerf invalidates the result "
                                             f"(at most {FAILURES_ALLOWED})")
    order = sorted(range(len(seconds)), key=lambda i: (not converged[i], seconds[i]))  # a failure: the slowest
    used = tuple(sorted(order[1:-1]))
    return Olympic(sum(seconds[i] for i in used) / len(used), used, (order[0], order[-1]), failed)


@dataclass(frozen=True)
class MlperfResult:
    """One system's runs of one benchmark, with the system's description where the folder holds it."""

    system: str
    benchmark: str
    runs: tuple[MlperfRun, ...]
    description: dict[str, str]

    def score(self) -> Olympic:
        return olympic([r.seconds for r in self.runs], [r.converged for r in self.runs])


def find_results(root: Path) -> list[MlperfResult]:
    """Every ``results/<system>/<benchmark>/result_N.txt`` set below ``root`` (a submitter's folder, its results
    folder, or one benchmark's), each with ``systems/<system>.json`` where the submitter's folder has it; a UsageError
    where there is none."""
    root = Path(root)
    files = sorted(root.rglob("result_*.txt")) if root.is_dir() else []
    groups: dict[tuple[Path, str, str], list[Path]] = {}
    for path in files:
        groups.setdefault((path.parent, path.parent.parent.name, path.parent.name), []).append(path)
    if not groups:
        raise UsageError(f"{root}: no MLPerf result files (results/<system>/<benchmark>/result_N.txt) in it")
    out = []
    for (folder, system, benchmark), paths in sorted(groups.items()):
        if len(paths) > MOST_RESULTS:
            raise UsageError(f"{folder}: {len(paths)} result files, more than MLPerf asks ({MOST_RESULTS} at most)")
        described = folder.parent.parent.parent / "systems" / f"{system}.json"
        out.append(MlperfResult(system, benchmark, tuple(read_result(p) for p in paths), _description(described)))
    return out


def _description(path: Path) -> dict[str, str]:
    """A system's description (``systems/<system>.json``): its fields as text, {} where there is none."""
    try:
        data = json.loads(read_small_text(path, 1 << 20, "an MLPerf system description"))
    except (ValueError, OSError):
        return {}
    return {str(k)[:60]: str(v)[:200] for k, v in data.items() if isinstance(data, dict) and v not in ("", None)
            and not text_problem(str(v))} if isinstance(data, dict) else {}
