"""McCandlish et al.'s curve S = S_min (1 + B_noise / B) fitted to runs' steps to target: it recovers the curve the
runs were drawn from within its interval, marks the batches past the critical batch, and says where it cannot be
fitted (one batch; steps that rise with the batch) instead of printing a figure."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from hvdbench.analysis.tables.critical_batch import critical_batch_table, critical_rows


def _runs(steps_of: dict[int, list[float]], converged: bool = True) -> pd.DataFrame:
    rows = []
    for batch, steps in steps_of.items():
        for i, s in enumerate(steps):
            rows.append({"run_id": f"r{batch}-{i}", "status": "ok", "system": "box", "framework": "pytorch",
                         "benchmark": "fashion_mnist", "model": "cnn", "quality_metric": "accuracy",
                         "quality_target": 0.85, "args": f"--batch-size {batch // 2} --target-accuracy 0.85",
                         "converged": converged, "global_batch": batch, "steps_to_target": s})
    return pd.DataFrame(rows)


def test_the_curve_the_runs_were_drawn_from_is_recovered_within_its_interval() -> None:
    rng = np.random.default_rng(7)
    truth = {b: 1000 * (1 + 256 / b) for b in (64, 128, 256, 512, 1024)}
    table = critical_batch_table(_runs({b: list(s * rng.normal(1, 0.03, 5)) for b, s in truth.items()}))
    first = table.iloc[0]
    assert first["s_min_low"] <= 1000 <= first["s_min_high"] and first["b_noise_low"] <= 256 <= first["b_noise_high"]
    assert first["s_min_high"] - first["s_min_low"] < 300  # five runs a batch bound it
    assert list(table["global_batch"]) == [64, 128, 256, 512, 1024] and set(table["runs"]) == {5}
    past = table[table["note"].str.contains("past the critical batch")]["global_batch"].tolist()
    assert past == [b for b in (512, 1024) if b > first["b_noise"]] and 512 in past
    header, rows = critical_rows(table)
    assert rows[0][header.index("B_noise (critical batch) [95% CI]")].count("–") == 1


def test_where_it_cannot_be_fitted_it_says_so_and_prints_no_figure() -> None:
    one = critical_batch_table(_runs({64: [900.0, 950.0, 1000.0]}))
    assert one["s_min"].isna().all() and one["note"].iloc[0] == "one global batch: a curve needs two or more"
    rising = critical_batch_table(_runs({64: [900.0, 950.0], 256: [1500.0, 1600.0]}))
    assert rising["b_noise"].isna().all() and "the model does not hold" in rising["note"].iloc[0]
    never = critical_batch_table(_runs({64: [900.0], 256: [300.0]}, converged=False))
    assert never.empty  # runs that did not converge have no steps to target


def test_the_projection_turns_throughput_at_n_nodes_into_time_to_train() -> None:
    from types import SimpleNamespace

    from hvdbench.analysis.projection.to_target import time_to_target, to_target_section

    rng = np.random.default_rng(3)
    truth = {b: 1000 * (1 + 256 / b) for b in (64, 128, 256)}
    runs = _runs({b: list(s * rng.normal(1, 0.03, 5)) for b, s in truth.items()})
    workload = SimpleNamespace(key={"system": "box", "benchmark": "fashion_mnist", "model": "cnn", "batch_size": 32},
                               label="fashion_mnist cnn batch 32")
    projected = pd.DataFrame([{"system": "box", "workload": workload.label, "link": "measured", "algorithm": "ring",
                               "nodes": n, "np": 2 * n, "throughput": 1000.0 * n, "throughput_low": 900.0 * n,
                               "throughput_high": 1100.0 * n} for n in (1, 4, 16)])
    table = time_to_target(projected, [workload], runs)
    assert list(table["global_batch"]) == [64, 256, 1024] and set(table["target"]) == {"accuracy 0.85"}
    for r in table.itertuples():
        exact = 1000 * (1 + 256 / r.global_batch)
        assert r.steps_low <= exact <= r.steps_high  # the curve the runs were drawn from, within its interval
        assert r.time_s == pytest.approx(r.steps * r.global_batch / (1000.0 * r.nodes))
        assert r.time_low_s < r.time_s < r.time_high_s
    notes = dict(zip(table["np"], table["note"]))
    assert notes[2] == "" and "beyond the largest batch measured (256)" in notes[32]
    assert "past the critical batch" in notes[32] and table["beyond"].iloc[-1] == pytest.approx(1024 / 256, rel=0.2)
    section = to_target_section(table)
    assert len(section.rows) == 3 and section.rows[0][8].endswith("]")
    other = SimpleNamespace(key={**workload.key, "model": "mlp"}, label="fashion_mnist mlp batch 32")
    assert time_to_target(projected.assign(workload=other.label), [other], runs).empty  # no curve: no row
