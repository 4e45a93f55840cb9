"""MLPerf Training's results read as MLCommons checks and scores them, without a framework.

A result file holds ``:::MLLOG {json}`` lines (mlcommons logging's format): the submission's facts,
``global_batch_size``, ``run_start`` and ``run_stop`` (its metadata's ``status``: ``success`` or ``aborted``), an
``eval_accuracy`` after each evaluation, and per epoch ``tracked_stats`` with the job's throughput (``throughput`` or
``imgs_sec``, as the round names it). A run's time to train is ``run_stop`` less ``run_start`` (evaluation on the
clock). It converged where its status is success and an evaluation at or before ``run_stop`` met its benchmark's
target (core/time_to_train.py); a file that breaks a rule of MLCommons' checker (two runs in one file, an evaluation
after ``run_stop``, a success no evaluation bears out) is a run that did not converge, its ``why`` naming the rule, as
``result_summarizer`` drops it. A result folder as published: ``<submitter>/results/<system>/<benchmark>/result_N.txt``
with ``scaling.json`` beside them where the review scaled the score, and ``<submitter>/systems/<system>.json``."""

from __future__ import annotations

import hashlib
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from hvdbench.core.errors import UsageError
from hvdbench.core.time_to_train import LATEST, RESULT_COUNTS, Score, Target, score, targets_of
from hvdbench.core.validate import read_small_text, text_problem

from .mlperf_system import System, read_system

MLLOG = ":::MLLOG "
MOST_BYTES = 64 << 20  # a result file of MLPerf's is under a megabyte; more is no result file
MOST_RESULTS = 100  # result files of one benchmark: MLPerf asks 3 to 40
THROUGHPUT_KEYS = ("throughput", "imgs_sec", "samples_per_second", "samples_per_sec")  # tracked_stats, by round
STEP_KEYS = ("step_time", "step_time_s", "time_per_step")  # a step's seconds, where a round logs it
MOST_FACTOR = 2.0  # a scaling.json factor beyond [1/2, 2] is no normalisation the review would make


@dataclass(frozen=True)
class MlperfRun:
    """One result file: when its run started and stopped (ms since the epoch), its status, whether it converged by
    MLPerf's rule and why not, its global batch, the evaluations (epoch, value, ms), each epoch's logged throughput
    (ms, samples/s), its step time where logged, the submission's facts; ``digest`` what it measured (its events,
    not its bytes: a comment added makes no new run); ``device_batch`` the samples one device's step takes as the log
    counts them (``d_batch_size`` times ``gradient_accumulation_steps``, where logged)."""

    path: str
    benchmark: str
    start_ms: int
    stop_ms: int
    status: str
    global_batch: int | None
    evals: tuple[tuple[float | None, float, int], ...]
    facts: dict[str, str] = field(default_factory=dict)
    digest: str = ""
    converged: bool = False
    why: str = ""
    epochs_logged: tuple[tuple[int, float], ...] = ()
    step_s: float | None = None
    train_samples: int | None = None
    device_batch: int | None = None

    @property
    def seconds(self) -> float:
        """Time to train: run_stop less run_start, evaluation included."""
        return (self.stop_ms - self.start_ms) / 1000.0

    @property
    def epochs(self) -> float | None:
        """The epoch of the last evaluation at or before run_stop, where the log says it."""
        before = [e for e in self.evals if e[2] <= self.stop_ms]
        return before[-1][0] if before else None

    def throughput(self) -> float | None:
        """The steady-state median of the logged throughputs (the first epoch, warm-up, left out where there are
        three or more)."""
        values = [v for _, v in self.epochs_logged]
        steady = values[1:] if len(values) >= 3 else values
        return statistics.median(steady) if steady else None


def _events(text: str, path: Path) -> list[dict[str, Any]]:
    """The MLLOG events of a result file in their order (other lines, a launcher's own output, passed over)."""
    out = []
    for line in text.splitlines():
        start = line.find(MLLOG)
        if start < 0:
            continue
        try:
            event = json.loads(line[start + len(MLLOG):])
        except ValueError:
            raise UsageError(f"{path}: an MLLOG line that is no JSON: {line[:80]!r}") from None
        if isinstance(event, dict) and isinstance(event.get("key"), str) and _number(event.get("time_ms")):
            out.append(event)
    return out


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _value(value: Any, bounds: tuple[Target, ...] | None) -> float | None:
    """An evaluation's value as one number: a dict's first bound's key (maskrcnn's BBOX), else itself."""
    if isinstance(value, dict):
        key = bounds[0].key if bounds and bounds[0].key else next(iter(value), None)
        value = value.get(key) if key is not None else None
    return float(value) if _number(value) else None


def _why_not(events: list[dict[str, Any]], status: str, stop: dict[str, Any], bounds: tuple[Target, ...] | None,
             benchmark: str) -> str:
    """Why a run did not converge by MLPerf's rule ("" where it did)."""
    counts = {key: sum(e["key"] == key for e in events) for key in ("run_start", "run_stop")}
    several = [f"{key} {n} times" for key, n in counts.items() if n != 1]
    if several:
        return f"{' and '.join(several)}: a result file is one run (MLPerf's rules: exactly one of each)"
    at = events.index(stop)
    after = [e for e in events[at + 1:] if e["key"] == "eval_accuracy"]
    if after:
        return f"{len(after)} evaluation(s) after run_stop: its time does not hold the training that reached its target"
    if status != "success":
        return f"{status}: the run stopped before reaching its target"
    if bounds is None:
        return ""
    if not any(e["key"] == "eval_accuracy" and all(b.met(e.get("value")) for b in bounds) for e in events[:at]):
        return (f"its status says success but no evaluation reached {benchmark}'s target "
                f"({', '.join(b.text() for b in bounds)}) by run_stop (MLPerf's checker)")
    return ""


def _tracked(events: list[dict[str, Any]], start_ms: int) -> tuple[tuple[tuple[int, float], ...], float | None]:
    """Each tracked_stats event's time and throughput, and the median logged step time (seconds)."""
    out, steps = [], []
    for e in events:
        value = e.get("value") if e["key"] == "tracked_stats" else None
        if not isinstance(value, dict):
            continue
        key = next((k for k in THROUGHPUT_KEYS if _number(value.get(k))), None)
        if key is not None and value[key] > 0 and int(e["time_ms"]) > start_ms:
            out.append((int(e["time_ms"]), float(value[key])))
        step = next((value[k] for k in STEP_KEYS if _number(value.get(k)) and value[k] > 0), None)
        if step is not None:
            steps.append(float(step))
    return tuple(out), (statistics.median(steps) if steps else None)


def read_result(path: Path, round_: str = LATEST) -> MlperfRun:
    """One result file, judged by round ``round_``'s targets; a UsageError of one line where it is no MLPerf Training
    result (no run_start or run_stop, a stop before its start, a status neither success nor aborted)."""
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
    facts = {k.removeprefix("submission_"): str(e.get("value"))[:120] for k, e in first.items()
             if k.startswith("submission_") and not text_problem(str(e.get("value")))}
    benchmark = facts.get("benchmark", Path(path).parent.name)
    bounds = targets_of(benchmark, round_)
    evals = tuple((_epoch(e), value, int(e["time_ms"])) for e in events if e["key"] == "eval_accuracy"
                  for value in [_value(e.get("value"), bounds)] if value is not None)
    why = _why_not(events, status, stop, bounds, benchmark)
    said = json.dumps([[e["key"], e.get("value"), e["time_ms"]] for e in events
                       if e["key"] in ("run_start", "run_stop", "eval_accuracy", "global_batch_size")], default=str)
    batch, samples = (first.get(k, {}).get("value") for k in ("global_batch_size", "train_samples"))
    logged, step = _tracked(events, int(start["time_ms"]))
    return MlperfRun(str(path), benchmark, int(start["time_ms"]), int(stop["time_ms"]), status,
                     batch if _whole(batch) else None, evals, facts, hashlib.sha256(said.encode()).hexdigest(),
                     not why, why, logged, step, samples if _whole(samples) else None, _device_batch(first))


def _device_batch(first: dict[str, dict[str, Any]]) -> int | None:
    """The samples one device's step takes as the log counts them: ``d_batch_size`` times the gradient accumulation
    steps (1 where not logged); None where it logs no whole ``d_batch_size``."""
    device, steps = (first.get(k, {}).get("value") for k in ("d_batch_size", "gradient_accumulation_steps"))
    if type(device) is not int or device <= 0:
        return None
    return device * (steps if type(steps) is int and steps > 0 else 1)


def _whole(value: Any) -> bool:
    return type(value) is int and value > 0


def _epoch(event: dict[str, Any]) -> float | None:
    value = (event.get("metadata") or {}).get("epoch_num")
    return float(value) if _number(value) else None


@dataclass(frozen=True)
class MlperfResult:
    """One system's runs of one benchmark, with the system as its description says (None where the folder holds
    none), scaling.json's factor (1 where there is none) and the runs MLPerf's rules ask of the benchmark."""

    system: str
    benchmark: str
    runs: tuple[MlperfRun, ...]
    description: dict[str, str]
    described: System | None = None
    factor: float = 1.0
    folder: str = ""

    @property
    def required(self) -> int | None:
        return RESULT_COUNTS.get(self.benchmark)

    def score(self) -> Score:
        """MLCommons' score: the olympic mean of the runs by MLPerf's rule, times the folder's scaling.json factor;
        void where the folder does not hold the runs its benchmark needs or too many did not converge."""
        return score([r.seconds for r in self.runs], [r.converged for r in self.runs], self.benchmark, self.factor,
                     self.required)


def scaling_factor(folder: Path) -> float:
    """A benchmark folder's scaling.json factor (1 where it has none); a UsageError where it is not one."""
    path = folder / "scaling.json"
    if not path.exists():
        return 1.0
    try:
        data = json.loads(read_small_text(path, 1 << 16, "an MLPerf scaling file"))
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}") from None
    factor = data.get("scaling_factor") if isinstance(data, dict) else None
    if not _number(factor) or not 1 / MOST_FACTOR <= factor <= MOST_FACTOR:
        raise UsageError(f"{path}: scaling_factor {str(factor)[:40]!r} is not a factor between {1 / MOST_FACTOR:g} "
                         f"and {MOST_FACTOR:g}")
    return float(factor)


def find_results(root: Path, round_: str = LATEST) -> list[MlperfResult]:
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
        raw, described = read_system(folder.parent.parent.parent / "systems" / f"{system}.json")
        runs = tuple(read_result(p, round_) for p in paths)
        out.append(MlperfResult(system, benchmark, runs, raw, described, scaling_factor(folder), str(folder)))
    return out
