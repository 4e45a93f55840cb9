"""The sequential rule of ``--until-decided`` calibrated: simulated sequences of runs looked at after every run, through
the code the command runs (analysis/verdicts/sequential.py's design and look, analysis/findings.py's findings).

Each sequence: a reference of ``reference`` runs (another system's results, fixed), and this side's runs added one at a
time, a look after each from the first (3 runs) to the budget, stopping when decided. Runs are synthetic (30 steps, 4%
noise a step, each run at its own level: log-normal spread between runs), this side's throughput ``planted`` times the
reference's. Counted: how often a tie is called faster or slower (the target: at most 5% however many looks), how
often a planted difference is called right, called equivalent (a false tie) or left undecided, and the runs a sequence
took; beside it, the fixed design (one look at n runs, the ordinary 95% interval) that reaches the same power, and its
n. Also the fixed 95% interval looked at after every run (what the rule replaces): its false calls.

    .venv/bin/python benchmarks/sequential.py --trials 1000      # a few minutes on 2 cores

Prints Markdown (docs/results/calibration.md, section (e), holds one)."""

from __future__ import annotations

import argparse
import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from hvdbench.analysis.findings import judge
from hvdbench.analysis.ratios import Resampled, config_draws, ratio_draws
from hvdbench.analysis.verdicts.sequential import ALONGSIDE, design, look_ratio
from hvdbench.core.metrics import throughput_resamples

MARGIN = 0.02
FIRST = 3


def synthetic_run(rng: np.random.Generator, spread: float, scale: float) -> tuple[np.ndarray, float]:
    """One run's resamples and throughput: 30 steps of 4% noise around its own level (log-normal ``spread``), its
    throughput ``scale`` times the nominal."""
    level = 0.1 * rng.lognormal(0.0, spread) / scale
    durations = rng.lognormal(np.log(level), 0.04, size=(30, 1))
    draws = throughput_resamples(durations, np.full_like(durations, 32.0), 300, int(rng.integers(2 ** 31)))
    return draws, 32.0 * 30 / float(durations.sum())


def synthetic_side(rng: np.random.Generator, runs: int, spread: float, scale: float) -> Resampled:
    """A configuration of ``runs`` synthetic runs, resampled as compare resamples it."""
    made = [synthetic_run(rng, spread, scale) for _ in range(runs)]
    draws = {f"r{i}": d for i, (d, _) in enumerate(made)}
    found = config_draws(list(draws), draws, points={f"r{i}": p for i, (_, p) in enumerate(made)})
    assert found is not None
    return found


@dataclass
class Tally:
    """What a scenario's sequences ended on, and the runs they took."""

    findings: dict[str, int]
    runs: list[int]

    def share(self, *names: str) -> float:
        return sum(self.findings.get(n, 0) for n in names) / max(sum(self.findings.values()), 1)


def sequences(trials: int, spread: float, planted: float, reference: int, budget: int, seed: int,
              naive: bool = False) -> Tally:
    """``trials`` sequences under the rule (``naive``: the fixed 95% interval at every look instead); ``reference``:
    its fixed runs, or ALONGSIDE (a reference run a round beside this side's)."""
    rng = np.random.default_rng(seed)
    rule = design(FIRST, budget, reference)
    findings: dict[str, int] = {}
    took = []
    for _ in range(trials):
        fixed_side = synthetic_side(rng, reference, spread, 1.0) if reference != ALONGSIDE else None
        made: dict[str, np.ndarray] = {}
        points: dict[str, float] = {}
        found = "undecided"
        for n in range(1, budget + 1):
            made[f"r{n}"], points[f"r{n}"] = synthetic_run(rng, spread, planted)
            made[f"s{n}"], points[f"s{n}"] = synthetic_run(rng, spread, 1.0)
            if n < FIRST:
                continue
            mine = [f"r{i}" for i in range(1, n + 1)]
            theirs = fixed_side or config_draws([f"s{i}" for i in range(1, n + 1)], made, points=points)
            ratio = ratio_draws(config_draws(mine, made, points=points), theirs)
            looked = ratio if naive else look_ratio(ratio, rule, n)
            found = judge(looked, MARGIN, advise=False).finding
            if found != "undecided":
                break
        findings[found] = findings.get(found, 0) + 1
        took.append(n)
    return Tally(findings, took)


def fixed(trials: int, spread: float, planted: float, reference: int, runs: int, seed: int) -> Tally:
    """``trials`` fixed designs: ``runs`` runs (a side, where the reference runs alongside), one look, the ordinary
    95% interval."""
    rng = np.random.default_rng(seed)
    findings: dict[str, int] = {}
    other = runs if reference == ALONGSIDE else reference
    for _ in range(trials):
        ratio = ratio_draws(synthetic_side(rng, runs, spread, planted), synthetic_side(rng, other, spread, 1.0))
        found = judge(ratio, MARGIN, advise=False).finding
        findings[found] = findings.get(found, 0) + 1
    return Tally(findings, [runs] * trials)


def same_power(trials: int, spread: float, planted: float, reference: int, power: float, most: int,
               seed: int) -> tuple[int | None, float]:
    """The fewest runs of a fixed design that calls ``planted`` right at least as often as ``power``, and its power
    (None where no design up to ``most`` runs does)."""
    right = "faster" if planted > 1 else "slower"
    for runs in range(FIRST, most + 1):
        got = fixed(trials, spread, planted, reference, runs, seed + runs).share(right)
        if got >= power:
            return runs, got
    return None, math.nan


def scenarios(trials: int, budget: int, reference: int) -> list[dict[str, Any]]:
    """Every spread and planted ratio: the rule's findings and runs, the fixed design of the same power."""
    rows = []
    for i, (spread, planted) in enumerate(itertools.product((0.01, 0.03, 0.05, 0.10), (1.0, 1 / 1.15))):
        tally = sequences(trials, spread, planted, reference, budget, 100 + i)
        row: dict[str, Any] = {"spread": spread, "planted": planted, "tally": tally}
        if planted == 1.0:
            row["naive"] = sequences(trials, spread, planted, reference, budget, 200 + i, naive=True)
        else:
            row["fixed"] = same_power(trials, spread, planted, reference, tally.share("slower"), 4 * budget, 300 + i)
        rows.append(row)
    return rows


def sequential_page(trials: int = 1000, budget: int = 10, reference: int = ALONGSIDE, part: str = "e") -> str:
    """Section (e) of the calibration page (``reference``: a fixed reference's runs, or ALONGSIDE)."""
    rule = design(FIRST, budget, reference)
    how = ("the reference run alongside, a run of each a round (`--against ROOT` where ROOT's runs were made on this "
           "machine)" if reference == ALONGSIDE else
           f"a reference of {reference} runs fixed (`--against ROOT` of another machine's results)")
    lines = [f"## ({part}) Run until decided: the sequential rule, {how.split(' (')[0]}", "",
             f"{trials:,} simulated sequences a row: {how}, this "
             f"side's runs added one at a time, a look after each from {FIRST} to {budget} runs (`--budget "
             f"{budget}`), stopping when decided, at a {MARGIN:.0%} margin. The rule: {rule.describe()}. "
             "Runs are synthetic (30 steps, 4% noise a step, each at its own level), judged through the code "
             "`--until-decided` runs. A tie: how often called faster or slower (false calls, the target at most 5% "
             "over every look together; beside it the ordinary 95% interval looked at after every run), equivalent, "
             "or undecided at the budget. A planted 15% (this side slower): called slower, equivalent (a false tie) "
             "or undecided; the mean runs a sequence took, and the fixed design (one look, the ordinary interval) "
             "that calls it as often: its runs.", "",
             "| spread between runs | true ratio | false calls (every look: ordinary interval) | slower | equivalent | "
             "undecided | mean runs taken | fixed design of the same power |", "|---|---|---|---|---|---|---|---|"]
    for row in scenarios(trials, budget, reference):
        tally: Tally = row["tally"]
        mean = float(np.mean(tally.runs))
        if row["planted"] == 1.0:
            naive: Tally = row["naive"]
            lines.append(f"| {row['spread']:.0%} | 1.00 | {tally.share('faster', 'slower'):.1%} "
                         f"({naive.share('faster', 'slower'):.1%}) | - | {tally.share('equivalent'):.1%} | "
                         f"{tally.share('undecided'):.1%} | {mean:.1f} | - |")
            continue
        runs, power = row["fixed"]
        fixed_said = f"{runs} runs ({power:.1%})" if runs is not None else f"none up to {4 * budget} runs"
        lines.append(f"| {row['spread']:.0%} | {row['planted']:.3f} | {tally.share('faster'):.1%} | "
                     f"{tally.share('slower'):.1%} | {tally.share('equivalent'):.1%} | "
                     f"{tally.share('undecided'):.1%} | "
                     f"{mean:.1f} | {fixed_said} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--budget", type=int, default=10)
    parser.add_argument("--reference", type=int, default=ALONGSIDE,
                        help=f"the fixed reference's runs ({ALONGSIDE}: run alongside, the default)")
    args = parser.parse_args()
    print(sequential_page(args.trials, args.budget, args.reference))


if __name__ == "__main__":
    main()
