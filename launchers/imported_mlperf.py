"""MLPerf Training result folders taken into a results root (``hvdbench import mlperf DIR``): each result file
becomes a run whose rank record holds its evaluations and its time to train (``run_stop`` less ``run_start``,
evaluation on the clock), converged or not, on its system as the submitter described it, so the report scores them by
MLPerf's own rule (the olympic mean: analysis/tables/quality.py) beside one's own runs. A result is known by what it
measured (its events, not its bytes): one taken again is refused in one line; each run is written aside and moved in
whole."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

from hvdbench.core.errors import UsageError
from hvdbench.core.mlperf import MlperfResult, MlperfRun, find_results
from hvdbench.core.records import RecordWriter
from hvdbench.core.spec import RUN_FILE, RunSpec, RunStatus

LOG = "rank-0.jsonl"
SOURCE = "mlperf"
MOST_RANKS = 65536  # accelerators of one result: more than any machine has
# MLPerf Training's quality targets by benchmark (the rules' table), where the result file does not say its own
TARGETS = {"resnet": 0.759, "bert": 0.72, "unet3d": 0.908, "retinanet": 0.34, "rnnt": 0.058, "maskrcnn": 0.377}


@dataclass(frozen=True)
class TakenIn:
    """One result file taken in: its run and the result it belongs to."""

    spec: RunSpec
    run: MlperfRun
    result: MlperfResult


def _count(description: dict[str, str], key: str) -> int:
    text = description.get(key, "")
    return int(text) if text.isdigit() and 0 < int(text) <= MOST_RANKS else 1


def label_of(result: MlperfResult) -> str:
    """A system's label from its description: the submitter and the system's name (``NVIDIA Eos``)."""
    said = " ".join(filter(None, (result.description.get("submitter"), result.description.get("system_name"))))
    return said or result.system


def spec_of(result: MlperfResult, system: str, repeat: int) -> RunSpec:
    """The run a result file stands for: the benchmark on every accelerator of the system's nodes."""
    nodes = _count(result.description, "number_of_nodes")
    per_node = _count(result.description, "accelerators_per_node")
    if nodes * per_node > MOST_RANKS:
        raise UsageError(f"{result.system}: {nodes} nodes x {per_node} accelerators: more than any machine has")
    return RunSpec(benchmark=SOURCE, framework=SOURCE, args=("--from", SOURCE, result.benchmark), np=nodes * per_node,
                   nodes=nodes, launcher="external", controller="mpi", system=system, repeat=repeat)


def _digests(root: Path) -> set[str]:
    """What the results already taken in under ``root`` measured."""
    found = set()
    for log in root.glob(f"*/{LOG}"):
        try:
            first = json.loads(log.read_text(encoding="utf-8").splitlines()[0])
        except (OSError, ValueError, IndexError):
            continue
        digest = ((first.get("imported") or {}) if isinstance(first, dict) else {}).get("content_sha256")
        if isinstance(digest, str):
            found.add(digest)
    return found


def write_run(root: Path, spec: RunSpec, run: MlperfRun, result: MlperfResult) -> None:
    """The run folder, written aside and moved in whole: run.json, rank 0's record (env, each evaluation, its
    summary with the quality reached), the other ranks' summaries, status ok."""
    folder = root / f".importing-{spec.id}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    spec.write(folder)
    described = result.description
    start, stop = run.start_ms / 1000.0, run.stop_ms / 1000.0  # the submission's clock; its hosts unknown
    writer = RecordWriter(folder / LOG, rank=0, local_rank=0, size=spec.np)
    writer.write("env", benchmark=SOURCE, framework=SOURCE, model=result.benchmark, unit="samples", run_id=spec.id,
                 host=None, time=start,
                 gpu={"name": described["accelerator_model_name"]} if "accelerator_model_name" in described else None,
                 imported={"from": SOURCE, "file": Path(run.path).name, "system": result.system,
                           "content_sha256": run.digest, "submission": run.facts,
                           "framework": described.get("framework")})
    for epoch, accuracy, at_ms in run.evals:
        writer.write("eval", epoch=epoch, elapsed_s=(at_ms - run.start_ms) / 1000.0, accuracy=accuracy, host=None,
                     time=at_ms / 1000.0)
    best = max((accuracy for _, accuracy, _ in run.evals), default=None)
    writer.write("summary", unit="samples", host=None, time=stop, quality={
        "metric": "eval_accuracy", "target": TARGETS.get(result.benchmark), "seconds": run.seconds,
        "converged": run.converged, "epochs": run.epochs, "best": best, "global_batch": run.global_batch,
        "source": f"MLPerf result {result.system}/{result.benchmark}/{Path(run.path).name}"})
    writer.close()
    for rank in range(1, spec.np):
        other = RecordWriter(folder / f"rank-{rank}.jsonl", rank=rank, local_rank=rank % max(1, spec.ranks_per_node),
                             size=spec.np)
        other.write("summary", unit="samples", host=None, time=stop)
        other.close()
    RunStatus("ok", 0, run.seconds, f"imported from an MLPerf Training result ({run.status})").write(folder)
    folder.rename(root / spec.id)


def import_results(paths: Iterable[Path], root: Path, system: str | None) -> list[TakenIn]:
    """Every result file under each path as a run under ``root`` (``system``: the label, else each result's own);
    a UsageError in one line, before anything is written, for a folder without results, a damaged result, or one
    taken in already (here or twice among ``paths``)."""
    planned: list[tuple[MlperfResult, MlperfRun, str]] = []
    seen = _digests(root) if root.exists() else set()
    for path in paths:
        for result in find_results(path):
            for run in result.runs:
                if run.digest in seen:
                    raise UsageError(f"{run.path}: already taken into {root} or given twice (the same run: its "
                                     "events, whatever its text): one measurement, counted once")
                seen.add(run.digest)
                planned.append((result, run, system or label_of(result)))
    done: list[TakenIn] = []
    for result, run, label in planned:
        spec = spec_of(result, label, 0)
        while (root / spec.id / RUN_FILE).exists():
            spec = replace(spec, repeat=spec.repeat + 1)
        write_run(root, spec, run, result)
        done.append(TakenIn(spec, run, result))
    return done
