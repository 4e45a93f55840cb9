"""How often hvdbench's verdicts are wrong, measured: real runs of one configuration made here, then split and
judged through the report's own code (analysis/ratios.py, analysis/verdicts/decision.py).

(a) A/A: one configuration run N times one after another (a busy loop on one core during every ``--load-every``-th
    run), every way of taking 3 runs for a label "A" and 3 others for "B" judged: the share called faster or slower
    (the target is at most 5%). Beside it, the old way (one run a side, its steps resampled as independent draws):
    the share of pairs of single runs it called.
(b) Power: the same splits with A's step times planted 20% (then 5%) shorter (its throughput 1.2x, exactly: a run's
    resamples scale with its steps): the share called faster.
(d) Sizing: synthetic runs of known spread between runs (0.5%, 1%, 3%, 10%) through the same code, 3, 5 and 8 runs
    a side: how often each finding comes out (analysis/findings.py: called, equivalent within 2%, undecided) for a
    tie and for planted 5%, 10% and 20% differences, so a buyer can size the runs needed.
(e), (f) The sequential rule of --until-decided (benchmarks/sequential.py): false calls over simulated sequences
    looked at after every run, and the runs it takes against the fixed design of the same power; with the reference
    run alongside (e), and against another machine's five runs, fixed (f).
(g) Independent A/A: two sides of the same synthetic work that share no run (the splits of (a) overlap: each run
    sits in many), 3, 5 and 8 runs a side at spreads of 1% to 10%: the share of ties called, what tie_call_chance
    predicts from the runs' own error, and the chance a decision page of 20 such tied rows calls at least one.
(h) Runs to decide: "about N runs a side would likely (80%) decide it", named from 3 runs a side at a known ratio
    and spread, then checked: the share decided at N runs a side (and at N - 1).
(c) Within a run: the coverage of the 95% interval of a run's throughput on synthetic step times with autocorrelated
    drift (AR(1), known mean), the circular block bootstrap (block length from the run's autocorrelation) beside the
    i.i.d. one.

    .venv/bin/python benchmarks/calibration.py --runs 12 --output results/calibration   # about 4 min on 2 cores
    .venv/bin/python benchmarks/calibration.py --only within                              # (c) alone, seconds
    .venv/bin/python benchmarks/calibration.py --only sequential                          # (e) alone, minutes
    .venv/bin/python benchmarks/calibration.py --only promises                            # (g), (h): a minute

Prints a Markdown page (docs/results/calibration.md holds one)."""

from __future__ import annotations

import argparse
import itertools
import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

BENCH = ("cifar10", ("--model", "resnet20", "--batch-size", "16", "--steps", "30", "--warmup-steps", "3",
                     "--threads", "1", "--device", "cpu", "--telemetry-interval", "0"))


def _busy(core: int) -> None:
    os.sched_setaffinity(0, {core})
    while True:
        pass


def make_runs(root: Path, runs: int, load_every: int) -> list[bool]:
    """``runs`` repeats of BENCH on 1 rank, one after another, a busy loop on CPU 0 during every ``load_every``-th;
    which ran loaded."""
    from hvdbench.launchers.plan import plan
    from hvdbench.launchers.runs import benchmark_sweep, local_executor

    sweep = benchmark_sweep(BENCH[0], BENCH[1], np=(1,), launcher="horovodrun", controller="gloo", repeats=runs,
                            system="calibration", timeout=600.0, devices=None, topology=None)
    specs = plan(sweep).specs
    executor = local_executor(sweep, root, resume=True)
    executor.plan_order(list(specs))
    loaded = []
    for i, spec in enumerate(specs):
        load = load_every > 0 and i % load_every == load_every - 1
        loop = multiprocessing.Process(target=_busy, args=(0,), daemon=True) if load else None
        if loop is not None:
            loop.start()
        try:
            status = executor.run(spec)
        finally:
            if loop is not None:
                loop.terminate()
                loop.join()
        print(f"run {i + 1}/{len(specs)}{' (busy loop on CPU 0)' if load else ''}: {status.status}", flush=True)
        loaded.append(load)
    return loaded


def run_draws(root: Path) -> tuple[list[str], dict[str, np.ndarray], dict[str, float]]:
    """Every complete run's id (in the order made), its block-bootstrap resamples and its own throughput."""
    from hvdbench.analysis.collect import collect
    from hvdbench.analysis.tables.scaling import run_stats_table

    collection = collect([root])
    stats = run_stats_table(collection)
    runs = collection.runs[collection.runs["status"] == "ok"].sort_values("started")
    ids = [r for r in runs["run_id"] if r in stats.attrs["draws"]]
    return ids, stats.attrs["draws"], dict(zip(stats["run_id"], stats["throughput"]))


def splits(ids: list[str], per_side: int, most: int = 4000,
           seed: int = 0) -> tuple[list[tuple[tuple[str, ...], tuple[str, ...]]], int]:
    """The ways of taking ``per_side`` runs for A and ``per_side`` others for B (A and B as ordered labels): every
    one, or ``most`` of them drawn at random where there are more; and how many there are."""
    out = []
    for a in itertools.combinations(ids, per_side):
        rest = [r for r in ids if r not in a]
        out += [(a, b) for b in itertools.combinations(rest, per_side)]
    if len(out) <= most:
        return out, len(out)
    picked = np.random.default_rng(seed).choice(len(out), size=most, replace=False)
    return [out[i] for i in sorted(picked)], len(out)


def called(pairs: list[tuple[tuple[str, ...], tuple[str, ...]]], draws: dict[str, np.ndarray],
           points: dict[str, float], margin: float, scale: float = 1.0) -> dict[str, float]:
    """Shares of the splits judged faster, slower, equivalent and undecided (A's runs times ``scale``: each run's
    resamples and throughput scale exactly with its steps)."""
    from dataclasses import replace

    from hvdbench.analysis.ratios import config_draws, ratio_draws
    from hvdbench.analysis.verdicts.decision import verdict

    counts: dict[str, int] = {}
    for a, b in pairs:
        top, bottom = config_draws(list(a), draws, points=points), config_draws(list(b), draws, points=points)
        assert top is not None and bottom is not None
        top = replace(top, draws=top.draws * scale, center=top.center + float(np.log(scale)))
        ratio = ratio_draws(top, bottom)
        assert ratio is not None
        said = verdict(*ratio.interval, margin).split(" within")[0]
        counts[said] = counts.get(said, 0) + 1
    return {k: v / len(pairs) for k, v in sorted(counts.items())}


def old_way(ids: list[str], draws: dict[str, np.ndarray], margin: float) -> float:
    """The share of pairs of single runs the old verdict (one run a side, i.i.d. steps, nominal 95%) called."""
    from hvdbench.analysis.verdicts.decision import verdict
    from hvdbench.core.metrics import percentile_interval

    pairs = list(itertools.permutations(ids, 2))
    wrong = sum(verdict(*percentile_interval(draws[a] / draws[b]), margin) in ("faster", "slower") for a, b in pairs)
    return wrong / len(pairs)


def within_coverage(trials: int = 400, seed: int = 2026) -> list[dict[str, Any]]:
    """(c): coverage of the true throughput by the 95% interval of one run, i.i.d. steps against blocks."""
    from hvdbench.core.metrics import block_length, percentile_interval, throughput_resamples

    rng = np.random.default_rng(seed)
    rows = []
    for steps, phi in itertools.product((30, 100, 300), (0.0, 0.5, 0.8)):
        sigma = 0.05  # the step time's own spread (log), as a CPU or a shared GPU shows
        truth = 32.0 / (0.1 * np.exp(sigma ** 2 / 2))  # samples / E[step]: the process's throughput
        hits = {"iid": 0, "block": 0}
        blocks = []
        for _ in range(trials):
            noise = np.empty(steps)
            noise[0] = rng.normal(0, sigma)
            shocks = rng.normal(0, sigma * np.sqrt(1 - phi ** 2), steps)
            for t in range(1, steps):
                noise[t] = phi * noise[t - 1] + shocks[t]
            durations = (0.1 * np.exp(noise))[:, None]
            samples = np.full_like(durations, 32.0)
            block = block_length(durations[:, 0])
            blocks.append(block)
            seed_ = int(rng.integers(2 ** 31))
            for name, size in (("iid", 1), ("block", block)):
                low, high = percentile_interval(throughput_resamples(durations, samples, 1000, seed_, size))
                hits[name] += low <= truth <= high
        rows.append({"steps": steps, "phi": phi, "iid": hits["iid"] / trials, "block": hits["block"] / trials,
                     "median_block": float(np.median(blocks))})
    return rows


PLANTED = (1.0, 1.05, 1.10, 1.20)  # the sizing table's true ratios: a tie, then 5%, 10% and 20% faster


def sizing(trials: int = 200, seed: int = 7) -> list[dict[str, Any]]:
    """(d): synthetic runs (30 steps, 4% noise a step, each run at its own level: log-normal ``spread``) judged as
    compare judges them: for a tie and each planted difference, the share of each finding."""
    from hvdbench.analysis.ratios import ratio_draws
    from hvdbench.analysis.verdicts.decision import verdict

    from sequential import synthetic_side

    rng = np.random.default_rng(seed)
    rows = []
    for spread, k in itertools.product((0.005, 0.01, 0.03, 0.10), (3, 5, 8)):
        row: dict[str, Any] = {"spread": spread, "runs": k}
        for planted in PLANTED:
            counts = {"faster": 0, "slower": 0, "equivalent": 0, "undecided": 0}
            for _ in range(trials):
                ratio = ratio_draws(synthetic_side(rng, k, spread, planted), synthetic_side(rng, k, spread, 1.0))
                assert ratio is not None
                counts[verdict(*ratio.interval, 0.02).split(" within")[0]] += 1
            row[planted] = {name: count / trials for name, count in counts.items()}
        rows.append(row)
    return rows


AA_ROWS = ((0.01, 3), (0.03, 3), (0.05, 3), (0.05, 5), (0.10, 3), (0.10, 5), (0.10, 8))
PROMISED = ((1.0, 0.01), (1.0, 0.02), (1.008, 0.015), (1.04, 0.03), (1.06, 0.04))  # (true ratio, spread)


def independent_aa(trials: int = 2000, seed: int = 11, page_rows: int = 20) -> list[dict[str, Any]]:
    """(g): independent synthetic A/A pairs judged as compare judges them (2% margin): the share called, the share
    tie_call_chance predicts (averaged over the pairs' own errors), and a page of ``page_rows`` such rows."""
    from hvdbench.analysis.findings import SPEED, judge, tie_call_chance
    from hvdbench.analysis.ratios import ratio_draws

    from sequential import synthetic_side

    rng = np.random.default_rng(seed)
    rows = []
    for spread, k in AA_ROWS:
        calls, predicted = 0, []
        for _ in range(trials):
            ratio = ratio_draws(synthetic_side(rng, k, spread, 1.0), synthetic_side(rng, k, spread, 1.0))
            calls += judge(ratio, 0.02, advise=False).finding in SPEED
            predicted.append(tie_call_chance(ratio, 0.02))
        rate = calls / trials
        rows.append({"spread": spread, "runs": k, "called": rate, "predicted": float(np.mean(predicted)),
                     "page": 1.0 - (1.0 - rate) ** page_rows})
    return rows


def promises(trials: int = 1000, seed: int = 12) -> list[dict[str, Any]]:
    """(h): the runs a side named from three at a known ratio and spread, and the share decided at them (and one
    fewer), runs drawn at the true level and spread and judged by the findings' own rule."""
    import math

    from hvdbench.analysis.findings import UNDECIDED, judge, runs_to_decide
    from hvdbench.analysis.ratios import Resampled, ratio_draws

    def side(logs: np.ndarray) -> Resampled:
        n, center = len(logs), float(np.mean(logs))
        return Resampled(np.exp(np.array([center])), n, center, float(np.var(logs, ddof=1)) / n, n - 1.0)

    rng = np.random.default_rng(seed)
    rows = []
    for planted, spread in PROMISED:
        center = math.log(planted)
        truth = ratio_draws(Resampled(np.exp(np.array([center])), 3, center, spread ** 2 / 3, 2.0),
                            Resampled(np.ones(1), 3, 0.0, spread ** 2 / 3, 2.0))
        assert truth is not None
        named = runs_to_decide(truth, 0.02, center)
        shares = []
        for n in ((named - 1, named) if named else ()):
            decided = sum(judge(ratio_draws(side(rng.normal(center, spread, n)), side(rng.normal(0.0, spread, n))),
                                0.02, advise=False).finding != UNDECIDED for _ in range(trials))
            shares.append(decided / trials)
        rows.append({"planted": planted, "spread": spread, "named": named, "shares": shares})
    return rows


def promises_page(aa: list[dict[str, Any]], promised: list[dict[str, Any]]) -> str:
    """(g) and (h) as Markdown."""
    lines = ["## (g) Independent A/A: ties judged on runs that share nothing", "",
             "Two sides of the same synthetic work (30 steps, 4% noise a step, each run at its own level), no run "
             "shared, 2,000 pairs a row, judged as `hvdbench compare` judges at a 2% margin. Called: faster or slower "
             "(a false call); predicted: what `tie_call_chance` says each pair's own runs give, averaged; a page of 20 "
             "such tied rows: the chance at least one is called (each row is judged on its own, no correction "
             "across rows; the decision page says this figure for its own rows).", "",
             "| spread between runs | runs a side | called | predicted | a 20-row page calls one |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['spread']:.0%} | {r['runs']} | {r['called']:.2%} | {r['predicted']:.2%} | {r['page']:.0%} |"
              for r in aa]
    lines += ["", "## (h) Runs to decide: the promise checked", "",
              "\"About N runs a side would likely (80%) decide it\", named from 3 runs a side at the true ratio and "
              "spread (a direction where the ratio lies beyond the 2% margin, equivalence, by both one-sided tests, "
              "where inside), then 1,000 comparisons made at N - 1 and N runs a side:", "",
              "| true ratio | spread between runs | N named | decided at N - 1 | decided at N |",
              "|---|---|---|---|---|"]
    lines += [f"| {r['planted']:.3f} | {r['spread']:.1%} | {r['named']} | "
              + " | ".join(f"{v:.1%}" for v in r["shares"]) + " |" for r in promised]
    return "\n".join(lines) + "\n"


def page(args: argparse.Namespace, measured: dict[str, Any] | None, within: list[dict[str, Any]],
         sized: list[dict[str, Any]]) -> str:
    """The results as Markdown."""
    lines = ["# Calibration: how often hvdbench's verdicts are wrong", "",
             f"Measured {time.strftime('%Y-%m-%d')} on this machine with `benchmarks/calibration.py "
             f"--runs {args.runs} --load-every {args.load_every} --per-side "
             f"{','.join(map(str, args.per_side))}`.", ""]
    if measured is not None:
        thr = measured["throughput"]
        lines += [f"## (a) A/A and (b) power: {len(measured['ids'])} real runs of one configuration", "",
                  f"`hvdbench run {BENCH[0]} --np 1 -- {' '.join(BENCH[1])}` made {len(measured['ids'])} times one "
                  f"after another; a busy loop on CPU 0 during runs {measured['loaded']}. Throughput per run "
                  f"(images/s): {', '.join(f'{thr[r]:.1f}' for r in measured['ids'])} (spread between runs: "
                  f"{np.std(np.log(list(thr.values())), ddof=1):.1%}).", "",
                  "Splits of k runs for A and k others for B (every one, or 4,000 drawn at random where there are "
                  "more), judged as `hvdbench compare` judges (hierarchical resample, Student's t over runs):",
                  "", "| runs a side | splits judged (of) | planted (A's throughput × B's) | margin | faster | "
                  "equivalent | undecided | slower |", "|---|---|---|---|---|---|---|---|"]
        for per_side, judged, total, planted, margin, shares in measured["rows"]:
            lines.append(f"| {per_side} | {judged:,} ({total:,}) | {planted:.2f} | {margin:.0%} | "
                         f"{shares.get('faster', 0):.1%} | {shares.get('equivalent', 0):.1%} | "
                         f"{shares.get('undecided', 0):.1%} | {shares.get('slower', 0):.1%} |")
        lines += ["", f"The old verdict (one run a side, its steps resampled as independent draws, nominal 95%) "
                      f"called {measured['old']:.1%} of the {len(measured['ids']) * (len(measured['ids']) - 1)} "
                      "ordered pairs of these same-configuration runs faster or slower at a 2% margin.", ""]
    if sized:
        lines += ["## (d) Sizing: what each finding needs, by the spread between runs", "",
                  "Synthetic runs (30 steps, 4% noise a step, each run at its own level), 200 trials a row, judged "
                  "as `hvdbench compare` judges at a 2% margin. A tie: called (a false call, faster or slower) / "
                  "equivalent within ±2% / undecided. A planted difference (A faster): called faster / equivalent "
                  "(a false tie) / undecided:", "",
                  "| spread between runs | runs a side | tie | planted 5% | planted 10% | planted 20% |",
                  "|---|---|---|---|---|---|"]
        for r in sized:
            tie = r[1.0]
            cells = [f"{tie['faster'] + tie['slower']:.1%} / {tie['equivalent']:.1%} / {tie['undecided']:.1%}"]
            cells += [f"{r[p]['faster']:.1%} / {r[p]['equivalent']:.1%} / {r[p]['undecided']:.1%}" for p in PLANTED[1:]]
            lines.append(f"| {r['spread']:.1%} | {r['runs']} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["## (c) Within a run: coverage of the 95% interval on autocorrelated step times", "",
              "AR(1) log step times (spread 5%, autocorrelation phi), 400 synthetic runs per row, the true "
              "throughput known; the share of intervals that hold it (95% is right):", "",
              "| steps | phi | i.i.d. steps | circular blocks | median block (steps) |", "|---|---|---|---|---|"]
    lines += [f"| {r['steps']} | {r['phi']:.1f} | {r['iid']:.1%} | {r['block']:.1%} | {r['median_block']:.0f} |"
              for r in within]
    return "\n".join(lines) + "\n"


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """(a) and (b) on real runs made under ``args.output``."""
    loaded_flags = make_runs(args.output, args.runs, args.load_every)
    ids, draws, throughput = run_draws(args.output)
    rows: list[tuple[int, int, int, float, float, dict[str, float]]] = []
    for per_side in args.per_side:
        if 2 * per_side > len(ids):
            continue
        pairs, total = splits(ids, per_side)
        for planted in (1.0, 1.05, 1.2):
            for margin in (0.02, 0.0):
                rows.append((per_side, len(pairs), total, planted, margin,
                             called(pairs, draws, throughput, margin, planted)))
    return {"ids": ids, "throughput": throughput, "rows": rows,
            "loaded": ", ".join(str(i + 1) for i, flag in enumerate(loaded_flags) if flag) or "none",
            "old": old_way(ids, draws, 0.02)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--load-every", type=int, default=4, help="a busy loop on CPU 0 during every Nth run")
    parser.add_argument("--output", type=Path, default=Path("results/calibration"))
    parser.add_argument("--only", choices=("runs", "within", "sizing", "sequential", "promises"), default=None)
    parser.add_argument("--per-side", type=lambda text: [int(v) for v in text.split(",")], default=[3, 4, 6],
                        help="runs a side to judge splits of (default 3,4,6)")
    args = parser.parse_args()
    measured = measure(args) if args.only in (None, "runs") else None
    within = within_coverage() if args.only in (None, "within") else []
    sized = sizing() if args.only in (None, "sizing") else []
    if args.only != "promises":
        print(page(args, measured, within, sized))
    if args.only in (None, "promises"):
        print(promises_page(independent_aa(), promises()))
    if args.only in (None, "sequential"):
        from sequential import sequential_page

        print(sequential_page())  # (e) the reference run alongside
        print(sequential_page(reference=5, part="f"))  # (f) another machine's five runs, fixed


if __name__ == "__main__":
    main()
