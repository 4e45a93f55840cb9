"""Training to a quality target, the way MLPerf Training times it: the clock starts once the model is built and
the data is in memory (MLPerf's ``run_start``), runs through every step and every evaluation, and stops at the
evaluation that reaches the target (``run_stop``, converged) or at the epoch cap (not converged: the best value
reached is said, never a time to target). Framework-neutral like timing.py: a framework supplies the step, the
evaluation of this rank's share of the held-out set and the learning rate's setter.

Each step is a ``step`` record as in a timed run (the first --warmup-steps marked warm-up), so the report's
throughput of a run to target is the same figure as any run's; each evaluation, gathered over the ranks, is an
``eval`` record (rank 0's); the summary's ``quality`` says the rest. A step whose loss is not finite stops the run
at the next check (every CHECK_EVERY steps and at each evaluation, all ranks together, so none waits in a
collective for a rank that left) with the first such step named."""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from hvdbench.core.errors import HvdbenchError
from hvdbench.core.mllog import Evaluation, RunLog, result_lines
from hvdbench.core.records import RecordWriter
from .timing import Runtime, Sampler, StepOutcome, _Steps

MLLOG_FILE = "mllog.txt"  # rank 0's run as MLPerf's MLLOG lines, beside its log
CHECK_EVERY = 50  # steps between the collective checks that every rank's loss is finite


class NotFinite(HvdbenchError):
    """A step's loss was NaN or infinite: the run stops, naming it."""


@dataclass(frozen=True)
class Held:
    """One evaluation's sums over this rank's share of the held-out set."""

    correct: float
    seen: float
    loss_sum: float


@dataclass
class Plan:
    """What a run to target needs to know: steps an epoch (every rank takes as many), the global batch, the target
    (accuracy at least, or loss at most), when to evaluate, the cap, and the learning rate's schedule."""

    steps_per_epoch: int
    global_batch: int
    metric: str  # "accuracy" or "loss"
    target: float
    eval_every: float  # epochs
    max_epochs: float
    base_lr: float
    base_batch: int
    lr_scaling: str = "none"
    warmup_epochs: float = 0.0
    warmup_steps: int = 0
    seed: int = 0
    name: str = ""  # the workload, as the MLLOG file's submission_benchmark says
    platform: str = ""  # the ranks and their device, as its submission_platform says (4x CPU)
    init_start: float = math.nan  # when the rank started (wall clock): the MLLOG file's init_start

    @property
    def lr(self) -> float:
        """The peak learning rate: --lr scaled from --base-batch to the global batch (linear: Goyal et al. 2017;
        sqrt: Krizhevsky 2014)."""
        ratio = self.global_batch / self.base_batch
        return self.base_lr * {"none": 1.0, "linear": ratio, "sqrt": math.sqrt(ratio)}[self.lr_scaling]

    def lr_at(self, step: int) -> float:
        """The rate at ``step``: ramped linearly from lr/steps-of-warm-up to lr over --warmup-epochs, then lr."""
        ramp = self.warmup_epochs * self.steps_per_epoch
        return self.lr * min(1.0, (step + 1) / ramp) if ramp > 0 else self.lr

    @property
    def eval_steps(self) -> int:
        return max(1, round(self.eval_every * self.steps_per_epoch))

    @property
    def last_step(self) -> int:
        return max(1, round(self.max_epochs * self.steps_per_epoch))

    def reached(self, accuracy: float, loss: float) -> bool:
        return accuracy >= self.target if self.metric == "accuracy" else loss <= self.target


@dataclass
class _State:
    """What the run has reached so far."""

    start: float = 0.0
    wall: float = 0.0  # the run's start on the wall clock (MLLOG's time)
    curve: list[Evaluation] = field(default_factory=list)  # each evaluation, its block's and its own times
    block_start: float = 0.0  # when the block of training before the next evaluation began (wall clock)
    eval_samples: int = 0  # the held-out set's samples, every rank's
    evals: int = 0
    eval_s: float = 0.0
    best: float = math.nan
    seconds: float = math.nan
    converged: bool = False
    last: dict[str, float] = field(default_factory=dict)


def plan_of(flags: argparse.Namespace, steps_per_epoch: int, size: int) -> Plan:
    """The plan the flags ask for (--target-accuracy or --target-loss, --eval-every, --max-epochs, --lr,
    --lr-scaling, --base-batch, --warmup-epochs) on ``size`` ranks of --batch-size each."""
    metric = "accuracy" if flags.target_accuracy is not None else "loss"
    target = flags.target_accuracy if metric == "accuracy" else flags.target_loss
    return Plan(steps_per_epoch, flags.batch_size * size, metric, float(target), flags.eval_every, flags.max_epochs,
                flags.lr, flags.base_batch or flags.batch_size, flags.lr_scaling, flags.warmup_epochs,
                flags.warmup_steps, flags.seed)


def _evaluate(runtime: Runtime, evaluate: Callable[[], Held]) -> tuple[float, float, float, float]:
    """The held-out set's accuracy and mean loss over every rank's share, the seconds it took (all ranks) and the
    samples it evaluated."""
    start = time.perf_counter()
    mine = evaluate()
    sums = [sum(values) for values in zip(*((h.correct, h.seen, h.loss_sum)
                                             for h in runtime.allgather_object(mine)))]
    runtime.sync()
    seen = max(sums[1], 1.0)
    return sums[0] / seen, sums[2] / seen, time.perf_counter() - start, sums[1]


def _check_finite(runtime: Runtime, ran: _Steps, first_bad: list[int]) -> None:
    """Collective: a NotFinite naming the first step (and rank) whose loss was not finite, on every rank alike."""
    mine = first_bad[0] if first_bad else None
    said = [(step, rank) for rank, step in enumerate(runtime.allgather_object(mine)) if step is not None]
    if said:
        step, rank = min(said)
        raise NotFinite(f"the loss was not finite at step {step} (rank {rank}): the run stopped there; lower --lr or "
                        "raise --warmup-epochs")


def train_to_target(runtime: Runtime, writer: RecordWriter, step: Callable[[], StepOutcome],
                    loss_value: Callable[[Any], float], evaluate: Callable[[], Held],
                    set_lr: Callable[[float], None], plan: Plan) -> dict[str, Any]:
    """Train until the plan's target or its cap; every record written; this rank's summary fields returned (the
    timed loop's, over the steps after warm-up, with ``quality``). Raises NotFinite (after its records) where a
    loss was not finite."""
    ran = _Steps(runtime, writer, step, loss_value)
    state, first_bad = _State(), list[int]()
    runtime.barrier()
    runtime.sync()
    writer.write("phase", phase="run_start", steps=plan.last_step)
    state.start, state.wall = time.perf_counter(), time.time()
    state.block_start = state.wall
    index = 0
    while index < plan.last_step and not state.converged:
        set_lr(plan.lr_at(index))
        ran.one(index, index < plan.warmup_steps)
        if not math.isfinite(ran.losses[-1]) and not first_bad:
            first_bad.append(index)
        index += 1
        at_eval = index % plan.eval_steps == 0 or index == plan.last_step
        if at_eval or index % CHECK_EVERY == 0:
            _check_finite(runtime, ran, first_bad)
        if at_eval:
            _one_eval(runtime, writer, evaluate, plan, state, index)
    runtime.sync()
    window = time.perf_counter() - state.start
    runtime.barrier()
    if not state.converged:
        state.seconds = window
    summary = ran.summary(min(plan.warmup_steps, index), window) if ran.durations else {}
    quality = _quality(plan, state, index)
    if runtime.rank == 0:
        _write_mllog(writer.path.parent / MLLOG_FILE, plan, state, quality)
    return {**summary, "quality": quality}


def _write_mllog(path: Path, plan: Plan, state: _State, quality: dict[str, Any]) -> None:
    """The run as MLPerf's result file beside its log (``hvdbench import mlperf`` reads it back; mlperf-logging's
    checker passes it but for its benchmark's name: core/mllog.py), written aside."""
    started = plan.init_start if math.isfinite(plan.init_start) else state.wall
    log = RunLog(plan.name, plan.platform or "hvdbench", plan.global_batch, plan.seed, plan.metric, plan.target,
                 plan.steps_per_epoch * plan.global_batch, state.eval_samples, min(started, state.wall), state.wall,
                 state.wall + quality["seconds"], state.converged)
    lines = result_lines(log, state.curve)
    aside = path.with_name(f".{path.name}.part")
    aside.write_text("\n".join(lines) + "\n", encoding="utf-8")
    aside.rename(path)


def _one_eval(runtime: Runtime, writer: RecordWriter, evaluate: Callable[[], Held], plan: Plan, state: _State,
              index: int) -> None:
    """Evaluate (on the clock), record it and judge the target."""
    accuracy, loss, took, seen = _evaluate(runtime, evaluate)
    elapsed = time.perf_counter() - state.start
    state.eval_samples = state.eval_samples or int(seen)
    state.evals += 1
    state.eval_s += took
    value = accuracy if plan.metric == "accuracy" else loss
    better = max if plan.metric == "accuracy" else min
    state.best = value if math.isnan(state.best) else better(state.best, value)
    epoch = index / plan.steps_per_epoch
    writer.write("eval", epoch=epoch, samples=float(index * plan.global_batch), elapsed_s=elapsed,
                 accuracy=accuracy, loss=loss, eval_s=took)
    state.curve.append(Evaluation(epoch, value, state.block_start, state.wall + elapsed - took, state.wall + elapsed))
    state.block_start = state.wall + elapsed
    state.last = {"epoch": epoch, "samples": float(index * plan.global_batch), "steps": float(index)}
    if plan.reached(accuracy, loss):
        state.converged, state.seconds = True, elapsed


def _quality(plan: Plan, state: _State, steps: int) -> dict[str, Any]:
    """The summary's ``quality``: the target and how the run came to it."""
    return {"metric": plan.metric, "target": plan.target, "seconds": state.seconds, "converged": state.converged,
            "epochs": state.last.get("epoch"), "samples": state.last.get("samples"), "steps": steps,
            "best": state.best, "global_batch": plan.global_batch, "evaluations": state.evals,
            "eval_s": state.eval_s, "lr": plan.lr, "lr_scaling": plan.lr_scaling, "base_batch": plan.base_batch,
            "warmup_epochs": plan.warmup_epochs, "max_epochs": plan.max_epochs, "seed": plan.seed,
            "source": "hvdbench"}


def result_line(label: str, quality: dict[str, Any]) -> str:
    """Rank 0's line: the time to target, or that the run did not converge and the best it reached."""
    said = f"{quality['metric']} {quality['target']:g}"
    epochs = quality.get("epochs") or 0.0
    if quality["converged"]:
        return (f"hvdbench {label}: reached {said} in {quality['seconds']:,.1f} s ({epochs:.2f} epochs, "
                f"{quality['evaluations']} evaluation(s) on the clock, global batch {quality['global_batch']})")
    return (f"hvdbench {label}: not converged: best {quality['metric']} {quality['best']:.4g} after {epochs:.2f} "
            f"epochs (target {quality['target']:g}, cap {quality['max_epochs']:g} epochs)")


def measure_to_target(runtime: Runtime, writer: RecordWriter, trainer: Any, loss_value: Callable[[Any], float], *,
                      flags: argparse.Namespace, unit: str, label: str, sampler: Sampler,
                      final: Callable[[], dict[str, Any]], init_start: float = math.nan, platform: str = "") -> int:
    """Train to the flags' target with the sampler running, write this rank's summary (its ``quality`` with the
    run's seed) and print rank 0's line (``init_start``: when the rank started; ``platform``: its ranks and device,
    both for the MLLOG file). Returns the exit status: 0 whether or not the run converged (a run that did not is a
    result); NotFinite raises."""
    plan = replace(plan_of(flags, trainer.steps_per_epoch, runtime.size), name=label, init_start=init_start,
                   platform=platform)
    sampler.start()
    try:
        summary = train_to_target(runtime, writer, trainer.step, loss_value, trainer.evaluate, trainer.set_lr, plan)
    finally:
        sampler.stop()
    summary.update(final())
    writer.write("summary", unit=unit, **summary)
    if runtime.rank == 0:
        print(result_line(label, summary["quality"]), flush=True)
    return 0
