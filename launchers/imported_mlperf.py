"""MLPerf Training result folders taken into a results root (``hvdbench import mlperf DIR``): each result file becomes
a run whose rank record holds its evaluations, its time to train (``run_stop`` less ``run_start``, evaluation on the
clock), converged or not by MLPerf's rule (readers/mlperf.py: why not, where not), the score's scaling factor and the
runs its benchmark needs (core/time_to_train.py: the report scores them by that rule beside one's own runs); each epoch
its throughput logged, as step records the report's throughput reads like any run's; its system as the submitter
described it (nodes, accelerators a node, accelerator, network) and the per-GPU batch. The systems of one submitter
that differ only in node count are one system (their family's label, or ``--system``), so a vendor's results read as a
scaling table. A run whose logged throughput does not fit its siblings' is kept for its time to train and left out of
the throughput, with its reason. A result is known by what it measured (its events, not its bytes): one taken again
is refused in one line; each run is written aside and moved in whole."""

from __future__ import annotations

import shutil
import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

from hvdbench.core.errors import UsageError
from hvdbench.core.records import RecordWriter
from hvdbench.core.spec import RunSpec, RunStatus
from hvdbench.core.time_to_train import LATEST, ROUNDS, targets_of
from hvdbench.readers.mlperf import MlperfResult, MlperfRun, find_results
from hvdbench.readers.mlperf_system import family_labels
from .imported import free_repeat, taken_digests

LOG = "rank-0.jsonl"
SOURCE = "mlperf"
MISFIT = 1.5  # a run's logged throughput this many times its siblings' median (or more) is no measurement of theirs


@dataclass(frozen=True)
class TakenIn:
    """One result file taken in: its run, the result it belongs to, and why its throughput was left out ("" where
    it counts)."""

    spec: RunSpec
    run: MlperfRun
    result: MlperfResult
    left_out: str = ""


def label_of(result: MlperfResult) -> str:
    """A system's label from its description: the submitter and the system's name (``NVIDIA Eos``)."""
    said = " ".join(filter(None, (result.description.get("submitter"), result.description.get("system_name"))))
    return said or result.system


def spec_of(result: MlperfResult, system: str, repeat: int) -> RunSpec:
    """The run a result file stands for: the benchmark on every accelerator of the system's nodes (one, where the
    folder describes no system)."""
    nodes = result.described.nodes if result.described else 1
    per_node = result.described.per_node if result.described else 1
    return RunSpec(benchmark=SOURCE, framework=SOURCE, args=("--from", SOURCE, result.benchmark), np=nodes * per_node,
                   nodes=nodes, launcher="external", controller="mpi", system=system, repeat=repeat)


def misfits(result: MlperfResult) -> dict[int, str]:
    """The runs whose logged throughput is MISFIT times their siblings' median or more, with the reason (runs of one
    result measure one system: one far above the others measured something else)."""
    figures = {i: run.throughput() for i, run in enumerate(result.runs)}
    out = {}
    for i, value in figures.items():
        others = [v for j, v in figures.items() if j != i and v is not None]
        if value is None or len(others) < 2:
            continue
        middle = statistics.median(others)
        if value >= MISFIT * middle:
            out[i] = (f"its logged throughput ({value:,.0f} samples/s) is {value / middle:.2f}x its {len(others)} "
                      f"siblings' median ({middle:,.0f}): left out of the throughput, kept for its time to train")
    return out


def _per_gpu(run: MlperfRun, spec: RunSpec) -> int | None:
    """The per-GPU batch: the global batch over the accelerators, where it divides."""
    return run.global_batch // spec.np if run.global_batch and run.global_batch % spec.np == 0 else None


def _env(writer: RecordWriter, spec: RunSpec, taken: TakenIn, round_: str) -> None:
    run, result = taken.run, taken.result
    described = result.described
    batch = _per_gpu(run, spec)
    writer.write("env", benchmark=SOURCE, framework=SOURCE, model=result.benchmark, unit="samples", run_id=spec.id,
                 host=None, time=run.start_ms / 1000.0, flags={"batch_size": batch} if batch else None,
                 gpu={"name": described.accelerator} if described and described.accelerator else None,
                 imported={"from": SOURCE, "file": Path(run.path).name, "system": result.system,
                           "content_sha256": run.digest, "submission": run.facts, "round": round_,
                           "framework": described.framework if described else None,
                           "network": described.network if described else None,
                           "nodes": spec.nodes, "accelerators_per_node": spec.ranks_per_node,
                           "global_batch": run.global_batch, "batch_per_gpu": batch, "left_out": taken.left_out or None,
                           "step_s": run.step_s, "device_batch": run.device_batch})


def _steps(writer: RecordWriter, run: MlperfRun) -> None:
    """Each logged epoch as a step at its throughput: an epoch's samples (train_samples) over it, where the log says
    them, else the seconds since the event before (run_start for the first); the first of three or more warm-up."""
    before = run.start_ms
    logged = run.epochs_logged
    for index, (at_ms, rate) in enumerate(logged):
        seconds = run.train_samples / rate if run.train_samples else (at_ms - before) / 1000.0
        before = at_ms
        if seconds > 0:
            writer.write("step", step=index, warmup=index == 0 and len(logged) >= 3, duration=seconds,
                         samples=rate * seconds, host=None, time=at_ms / 1000.0)


def write_run(root: Path, spec: RunSpec, taken: TakenIn, round_: str = LATEST) -> None:
    """The run folder, written aside and moved in whole: run.json, rank 0's record (env, each logged epoch as a step,
    each evaluation, its summary with the quality reached), the other ranks' summaries, status ok."""
    run, result = taken.run, taken.result
    folder = root / f".importing-{spec.id}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    spec.write(folder)
    writer = RecordWriter(folder / LOG, rank=0, local_rank=0, size=spec.np)
    _env(writer, spec, taken, round_)
    if not taken.left_out:
        _steps(writer, run)
    for epoch, accuracy, at_ms in run.evals:
        writer.write("eval", epoch=epoch, elapsed_s=(at_ms - run.start_ms) / 1000.0, accuracy=accuracy, host=None,
                     time=at_ms / 1000.0)
    bounds = targets_of(result.benchmark, round_)
    higher = bounds is None or bounds[0].higher
    best = (max if higher else min)((accuracy for _, accuracy, _ in run.evals), default=None)
    writer.write("summary", unit="samples", host=None, time=run.stop_ms / 1000.0, quality={
        "metric": "eval_accuracy" if higher else "loss", "target": bounds[0].bound if bounds else None,
        "seconds": run.seconds, "converged": run.converged, "why": run.why or None, "epochs": run.epochs,
        "best": best, "global_batch": run.global_batch, "scaling_factor": result.factor,
        "required_runs": result.required, "source": f"MLPerf result {result.system}/{result.benchmark}/"
                                                    f"{Path(run.path).name}"})
    writer.close()
    for rank in range(1, spec.np):
        other = RecordWriter(folder / f"rank-{rank}.jsonl", rank=rank, local_rank=rank % max(1, spec.ranks_per_node),
                             size=spec.np)
        other.write("summary", unit="samples", host=None, time=run.stop_ms / 1000.0)
        other.close()
    RunStatus("ok", 0, run.seconds, f"imported from an MLPerf Training result ({run.status})").write(folder)
    folder.rename(root / spec.id)


def import_results(paths: Iterable[Path], root: Path, system: str | None, round_: str = LATEST) -> list[TakenIn]:
    """Every result file under each path as a run under ``root`` (``system``: the label, else each result's family's
    or its own), judged by round ``round_``'s targets; a UsageError in one line, before anything is written, for a
    folder without results, a damaged result, or one taken in already (here or twice among ``paths``)."""
    if round_ not in ROUNDS:
        raise UsageError(f"--round {round_[:20]!r}: MLPerf Training rounds known here are {', '.join(ROUNDS)}")
    results = [result for path in paths for result in find_results(path, round_)]
    labels = family_labels([r.described for r in results])
    seen = taken_digests(root) if root.exists() else set()
    planned: list[TakenIn] = []
    for result, family in zip(results, labels):
        left = misfits(result)
        for index, run in enumerate(result.runs):
            if run.digest in seen:
                raise UsageError(f"{run.path}: already taken into {root} or given twice (the same run: its "
                                 "events, whatever its text): one measurement, counted once")
            seen.add(run.digest)
            label = system or family or label_of(result)
            planned.append(TakenIn(spec_of(result, label, 0), run, result, left.get(index, "")))
    done: list[TakenIn] = []
    for taken in planned:
        spec = free_repeat(root, taken.spec)
        taken = replace(taken, spec=spec)
        write_run(root, spec, taken, round_)
        done.append(taken)
    return done
