"""Speedup, efficiency and communication cost carry real intervals (both runs' steps resampled), which
cover the true ratio at their stated rate; an --independent series is divided by its own 1-GPU run, and
every row names the baseline it used."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from conftest import write_run
from hvdbench.analysis.collect import collect
from hvdbench.analysis.ratios import ratio_interval
from hvdbench.analysis.tables.scaling import scaling_table
from hvdbench.analysis.stats import run_seed, throughput_draws
from hvdbench.core.spec import RunSpec


def _lognormal(rng: np.random.Generator, mean: float, sigma: float, shape: tuple[int, int]) -> np.ndarray:
    return rng.lognormal(np.log(mean) - sigma**2 / 2, sigma, shape)  # E[step] = mean exactly


def test_speedup_intervals_cover_the_true_ratio_in_400_planted_draws() -> None:
    rng = np.random.default_rng(2026)
    truth = (2 * 32 / 0.105) / (32 / 0.1)
    covered = 0
    for draw in range(400):
        one = _lognormal(rng, 0.1, 0.08, (60, 1))
        two = _lognormal(rng, 0.105, 0.08, (60, 2))
        low, high = ratio_interval(throughput_draws(two, np.full_like(two, 32.0), seed=run_seed(f"two{draw}")),
                                   throughput_draws(one, np.full_like(one, 32.0), seed=run_seed(f"one{draw}")))
        covered += low <= truth <= high
    print(f"speedup interval coverage: {covered / 400:.3f} over 400 draws (nominal 0.95)")
    assert covered / 400 >= 0.93, covered


def test_independent_series_use_their_own_baseline_and_say_which(tmp_path: Path) -> None:
    args, solo = ("--model", "resnet20"), ("--model", "resnet20", "--independent")
    write_run(tmp_path, RunSpec(benchmark="cifar10", args=args, np=1), [[0.100] * 30])
    write_run(tmp_path, RunSpec(benchmark="cifar10", args=solo, np=1), [[0.080] * 30])  # no exchange hooks: faster
    write_run(tmp_path, RunSpec(benchmark="cifar10", args=args, np=2), [[0.110] * 30] * 2)
    write_run(tmp_path, RunSpec(benchmark="cifar10", args=solo, np=2), [[0.082] * 30] * 2)
    table = scaling_table(collect([tmp_path])).set_index(["independent", "np"])
    assert table.loc[(True, 1), "efficiency"] == 1.0  # not 125% against the exchanging run
    assert np.isclose(table.loc[(True, 2), "speedup"], 2 * 0.080 / 0.082)
    assert table.loc[(True, 2), "baseline"] == "horovodrun/gloo --independent"
    assert table.loc[(False, 2), "baseline"] == "horovodrun/gloo"
    assert np.isclose(table.loc[(False, 2), "comm_cost"], 1 - 0.082 / 0.110)
    for column in ("speedup", "efficiency", "comm_cost"):
        row = table.loc[(False, 2)]
        assert row[f"{column}_low"] - 1e-9 <= row[column] <= row[f"{column}_high"] + 1e-9


def test_every_ratio_lies_inside_its_interval_on_noisy_runs(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    args, solo = ("--model", "resnet20"), ("--model", "resnet20", "--independent")
    for spec, mean in ((RunSpec(benchmark="cifar10", args=args, np=1), 0.10),
                       (RunSpec(benchmark="cifar10", args=args, np=2), 0.12),
                       (RunSpec(benchmark="cifar10", args=solo, np=2), 0.10)):
        write_run(tmp_path, spec, [list(_lognormal(rng, mean, 0.05, (30, 1))[:, 0]) for _ in range(spec.np)])
    row = scaling_table(collect([tmp_path])).set_index(["independent", "np"]).loc[(False, 2)]
    for column in ("speedup", "efficiency", "comm_cost"):
        assert row[f"{column}_low"] < row[column] < row[f"{column}_high"], column
    assert row["comm_cost_high"] - row["comm_cost_low"] < 0.1  # about 5% noise on 30 steps each


def test_without_its_own_baseline_an_independent_row_says_it_fell_back(tmp_path: Path) -> None:
    args = ("--model", "resnet20")
    write_run(tmp_path, RunSpec(benchmark="cifar10", args=args, np=1), [[0.100] * 30])
    write_run(tmp_path, RunSpec(benchmark="cifar10", args=args + ("--independent",), np=2), [[0.09] * 30] * 2)
    table = scaling_table(collect([tmp_path])).set_index(["independent", "np"])
    assert table.loc[(True, 2), "baseline"] == "horovodrun/gloo (exchanging: no --independent 1-GPU run)"


def test_a_multi_node_row_is_costed_against_its_one_node_twin_times_the_nodes(tmp_path: Path) -> None:
    """The plan runs independent ranks at one node count only: a 2-node row's cost of communication uses the
    1-node twin of as many ranks per node, its throughput doubled (each node's ranks train alone)."""
    args, solo = ("--model", "resnet20"), ("--model", "resnet20", "--independent")
    write_run(tmp_path, RunSpec(benchmark="cifar10", args=args, np=1), [[0.100] * 30])
    write_run(tmp_path, RunSpec(benchmark="cifar10", args=solo, np=2), [[0.080] * 30] * 2)
    write_run(tmp_path, RunSpec(benchmark="cifar10", args=args, np=4, nodes=2), [[0.120] * 30] * 4)
    table = scaling_table(collect([tmp_path])).set_index(["independent", "nodes", "np"])
    row = table.loc[(False, 2, 4)]
    assert np.isclose(row["comm_cost"], 1 - 0.080 / 0.120)  # 4 ranks at 0.120 s against 2 x 2 ranks at 0.080 s
    assert row["comm_cost_low"] - 1e-9 <= row["comm_cost"] <= row["comm_cost_high"] + 1e-9


def test_system_against_system_carries_an_interval(tmp_path: Path) -> None:
    from hvdbench.analysis.verdicts.compare import compare_table
    from hvdbench.analysis.tables.scaling import run_stats_table

    rng = np.random.default_rng(21)
    for system, mean in (("a100", 0.10), ("h100", 0.05)):
        for np_ in (1, 2):
            spec = RunSpec(benchmark="cifar10", args=("--model", "resnet20"), np=np_, system=system)
            write_run(tmp_path, spec, [list(_lognormal(rng, mean, 0.05, (30, 1))[:, 0]) for _ in range(np_)])
    collection = collect([tmp_path])
    stats = run_stats_table(collection)
    table = compare_table(scaling_table(collection, stats), {}, stats.attrs["draws"]).set_index(["np", "system"])
    h100 = table.loc[(2, "h100")]
    assert 1.9 < h100["relative"] < 2.1 and h100["relative_low"] < h100["relative"] < h100["relative_high"]
    assert table.loc[(2, "a100"), "relative_low"] == table.loc[(2, "a100"), "relative_high"] == 1.0
