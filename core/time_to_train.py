"""Runs to a quality target as MLPerf Training scores them: the one rule every table, verdict, history check and
importer of hvdbench applies (MLPerf Training rules, "Benchmark results"; mlperf-logging's ``result_summarizer``,
``compliance_checker`` and ``benchmark_meta`` are the owner's tools, and the tests hold this module to them).

- A run converged where an evaluation reached the target at or before its ``run_stop`` (for hvdbench's own runs: at
  the evaluation that reached it); a run that ended any other way (the epoch cap, a timeout, a failure, a lost node,
  a cancellation) is a run that did not converge and counts among the runs. Runs still under way are not runs yet.
- The score of a benchmark's N runs is the olympic mean: the times of the converged runs sorted, the fastest
  ``dropped(benchmark)`` dropped (one; four for unet3d's forty) and as many slowest, a run that did not converge
  taking the place of a slowest; more runs that did not converge than that leave no valid score.
- An MLPerf result folder must hold exactly the runs its benchmark needs (``RESULT_COUNTS``); any other number leaves
  it unscored. hvdbench's own runs need at least ``2 × dropped + 1``.
- MLCommons' published score is the olympic mean times the folder's ``scaling.json`` factor (the normalisation of a
  result that converged in fewer epochs than the reference: ``result_summarizer``); the raw mean stands beside it.
- Between two systems: each side's converged share is said; times are judged only where both have a valid score;
  a side with no valid score is never called faster (nor slower): not judged, with why."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .spec import UNDER_WAY

# Runs a result needs, by benchmark (the rules' table; mlperf-logging's benchmark_meta, 'training', v4.1.68).
RESULT_COUNTS: dict[str, int] = {
    "bert": 10, "dlrm": 5, "dlrm_dcnv2": 10, "gnmt": 10, "gpt3": 3, "maskrcnn": 5, "minigo": 10, "resnet": 5,
    "ssd": 5, "retinanet": 5, "stable_diffusion": 10, "transformer": 10, "ncf": 10, "rnnt": 10, "unet3d": 40,
    "gnn": 10, "rgat": 10, "llama2_70b_lora": 10, "llama31_405b": 3, "llama31_8b": 10, "flux1": 10,
    "gpt_oss_20b": 10, "deepseekv3_671b": 3,
}
DROPPED = {"unet3d": 4}  # runs dropped from each end of the sorted times (result_summarizer); every other: 1
# states that are no ended run (another run's records, a run left out of the selection by time: no run)
NOT_RUNS = (*UNDER_WAY, "not run", "inconsistent", "left out")
ROUNDS = ("0.7", "1.0", "1.1", "2.0", "2.1", "3.0", "3.1", "4.0", "4.1", "5.0", "5.1", "6.0", "6.1")
LATEST = ROUNDS[-1]


@dataclass(frozen=True)
class Target:
    """One bound an evaluation must meet: ``key`` into its value where the value is a dict (maskrcnn's BBOX),
    at least ``bound`` where ``higher``, else at most."""

    bound: float
    higher: bool = True
    key: str | None = None

    def met(self, value: object) -> bool:
        if self.key is not None:
            value = value.get(self.key) if isinstance(value, dict) else None
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            return False
        return value >= self.bound if self.higher else value <= self.bound

    def text(self) -> str:
        return f"{self.key + ' ' if self.key else ''}{'≥' if self.higher else '≤'} {self.bound:g}"


_LOW = False  # a bound to stay under (an error rate, a perplexity, a loss)
# The quality targets of MLPerf Training's closed division (each benchmark's closed_<name>.yaml in mlperf-logging's
# compliance checker): (the first round they apply to, the bounds every one of which an evaluation must meet).
TARGETS: dict[str, tuple[tuple[str, tuple[Target, ...]], ...]] = {
    "resnet": (("0.7", (Target(0.759),)),),
    "bert": (("0.7", (Target(0.712),)), ("1.0", (Target(0.72),))),
    "ssd": (("0.7", (Target(0.23),)), ("2.0", (Target(0.34),))),
    "retinanet": (("5.0", (Target(0.34),)),),
    "maskrcnn": (("0.7", (Target(0.377, key="BBOX"), Target(0.339, key="SEGM"))),),
    "unet3d": (("1.0", (Target(0.908),)),),
    "rnnt": (("1.0", (Target(0.058, _LOW),)),),
    "dlrm": (("0.7", (Target(0.8025),)),),
    "dlrm_dcnv2": (("3.0", (Target(0.80275),)),),
    "minigo": (("0.7", (Target(0.5),)),),
    "gnmt": (("0.7", (Target(0.24),)),),
    "transformer": (("0.7", (Target(0.25),)),),
    "gpt3": (("3.0", (Target(2.69, _LOW),)),),
    "stable_diffusion": (("3.1", (Target(90.0, _LOW, "FID"), Target(0.15, key="CLIP"))),),
    "llama2_70b_lora": (("4.0", (Target(0.925, _LOW),)),),
    "gnn": (("4.0", (Target(0.72),)),),
    "rgat": (("5.0", (Target(0.72),)),),
    "llama31_405b": (("5.0", (Target(5.6, _LOW),)),),
    "llama31_8b": (("5.1", (Target(3.3, _LOW),)),),
    "flux1": (("5.1", (Target(0.586, _LOW),)),),
    "gpt_oss_20b": (("6.0", (Target(3.34, _LOW),)),),
    "deepseekv3_671b": (("6.0", (Target(3.6, _LOW),)),),
}


def _order(round_: str) -> tuple[int, ...]:
    return tuple(int(part) for part in round_.split("."))


def targets_of(benchmark: str, round_: str = LATEST) -> tuple[Target, ...] | None:
    """The bounds an evaluation of ``benchmark`` must meet under round ``round_``'s rules; None where the rules
    name no such benchmark (then a run's own status says whether it converged)."""
    rows = TARGETS.get(benchmark, ())
    known = [bounds for first, bounds in rows if _order(first) <= _order(round_)]
    return known[-1] if known else (rows[0][1] if rows else None)


def dropped(benchmark: str | None) -> int:
    """Runs dropped from each end of a benchmark's sorted times."""
    return DROPPED.get(benchmark or "", 1)


def counts_as_run(status: object) -> bool:
    """Whether a run with this status has ended, so that it counts among the runs to its target (converged or not)."""
    return isinstance(status, str) and status not in NOT_RUNS


@dataclass(frozen=True)
class Score:
    """A configuration's runs to a target as MLPerf scores them. ``seconds`` MLCommons' score (the olympic mean times
    ``factor``, scaling.json's), ``raw`` the olympic mean; ``used`` and ``dropped`` index the runs, ``failed`` those
    that did not converge; ``void`` where a rule leaves no valid score (too many runs that did not converge, a result
    folder of the wrong size), ``why`` says which (also where the runs are too few for an olympic mean)."""

    seconds: float | None
    raw: float | None
    factor: float
    runs: int
    used: tuple[int, ...] = ()
    dropped: tuple[int, ...] = ()
    failed: tuple[int, ...] = ()
    void: bool = False
    why: str = ""

    @property
    def valid(self) -> bool:
        return self.seconds is not None

    @property
    def converged(self) -> int:
        return self.runs - len(self.failed)

    def share(self) -> str:
        """``4 of 5 runs converged``."""
        return f"{self.converged} of {self.runs} run{'s' if self.runs != 1 else ''} converged"


def score(seconds: Sequence[float], converged: Sequence[bool], benchmark: str | None = None, factor: float = 1.0,
          required: int | None = None) -> Score:
    """The olympic mean of runs' times to train (a run that did not converge takes a slowest's place), times
    ``factor``; ``required`` the runs an MLPerf result of ``benchmark`` must hold (None: hvdbench's own runs, at least
    2 × dropped + 1)."""
    failed = tuple(i for i, ok in enumerate(converged) if not ok)
    drop, runs = dropped(benchmark), len(converged)
    if required is not None and runs != required:
        return Score(None, None, factor, runs, failed=failed, void=True,
                     why=f"{runs} result file(s): MLPerf's {benchmark} result is {required} runs, no more, no fewer")
    if len(failed) > drop:
        return Score(None, None, factor, runs, failed=failed, void=True,
                     why=f"{len(failed)} of {runs} runs did not converge: MLPerf voids a result with more than {drop}")
    if runs < 2 * drop + 1:
        return Score(None, None, factor, runs, failed=failed,
                     why=f"{runs} run(s): the olympic mean drops {2 * drop}, {2 * drop + 1} at least")
    order = sorted((i for i in range(runs) if converged[i]), key=lambda i: (seconds[i], i))
    used = tuple(sorted(order[drop:len(order) - (drop - len(failed))]))
    raw = sum(seconds[i] for i in used) / len(used)
    gone = tuple(sorted(set(range(runs)) - set(used)))
    return Score(raw * factor, raw, factor, runs, used, gone, failed)


def not_comparable(mine: Score, theirs: Score, names: tuple[str, str]) -> str:
    """Why two configurations' times to train cannot be judged against each other (a side with no valid score by
    MLPerf's rule), each side's converged share said; "" where both are valid."""
    void = [(name, s) for name, s in zip(names, (mine, theirs)) if s.void]
    if not void:
        return ""
    shares = "; ".join(f"{name}: {s.share()}" for name, s in zip(names, (mine, theirs)))
    if len(void) == 2:
        return f"no valid score on either side ({shares}; {void[0][1].why})"
    name, s = void[0]
    return f"no valid score for {name}: {s.why} ({shares})"
