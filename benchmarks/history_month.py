"""A month of planted history for ``hvdbench history check``, and how often the check calls a change that is not there.

The month: one run a night for 30 nights of three configurations on one system (ResNet-50 at 8 GPUs, BERT-large at
8, a 2-node ResNet-50 at 16), each with a log-normal spread between runs (SPREAD); the driver moves from 535.104.05
to 550.54.15 on night 12 for all three, which changes nothing; from night 20 on the BERT configuration runs 7%
slower. ``--nights DIR`` writes it as a cron job leaves it: each night its own results root (night01 … night30) with
the same three runs in it (one run id a configuration, made again every night: each night's rank logs planted to
that night's throughput), and ``--store`` imports every night at once (``hvdbench history import``'s road).

    python benchmarks/history_month.py --nights /tmp/nights --store /tmp/month.sqlite   # then: history check
    python benchmarks/history_month.py --months 1000                 # false alarms and detections over many months
    python benchmarks/history_month.py --months 1000 --spread 0.05   # on a noisier machine

Over many months the same check runs on each configuration's series alone (no store): the share of configurations
with no planted change that the check calls a regression or improvement (false alarms), or on which it finds any
change point, and the share of planted 7% slowdowns it calls a regression, with the day it names.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from hvdbench.analysis.history.changes import judge_history
from hvdbench.analysis.history.recording import record_roots
from hvdbench.core.records import RecordWriter
from hvdbench.core.spec import RunSpec, RunStatus

SPREAD = 0.025  # run-to-run spread of a GPU node's training throughput: 2.5% (log-normal)
DAYS = 30
START = datetime(2026, 10, 1, 2, 0, tzinfo=timezone.utc).timestamp()  # the first nightly run
DRIVER_DAY, SLOW_DAY, SLOWDOWN = 12, 20, 0.07
CONFIGS = (("imagenet", "resnet50", 8, 1, 2950.0, "images"), ("bert", "bert-large", 8, 1, 410.0, "sequences"),
           ("imagenet", "resnet50", 16, 2, 5600.0, "images"))
SLOWED = "bert"


def month_rows(seed: int = 0, system: str = "dgx-h100", spread: float = SPREAD) -> list[dict[str, Any]]:
    """The month's runs as the store keeps them (day 1 first); ``spread`` between runs (log-normal)."""
    rng = np.random.default_rng(seed)
    rows = []
    for day in range(1, DAYS + 1):
        driver = "535.104.05" if day < DRIVER_DAY else "550.54.15"
        for benchmark, model, np_, nodes, speed, unit in CONFIGS:
            slow = 1 - SLOWDOWN if benchmark == SLOWED and day >= SLOW_DAY else 1.0
            throughput = speed * slow * float(np.exp(rng.normal(0.0, spread)))
            started = START + (day - 1) * 86400 + np_ * 60
            run_id = f"{benchmark}-np{np_}-day{day:02d}-{seed}"
            config = json.dumps({"benchmark": benchmark, "model": model, "np": np_, "nodes": nodes,
                                 "system": system}, sort_keys=True)
            rows.append({"run_id": run_id, "digest": "m:" + hashlib.sha256(f"{run_id}{throughput!r}".encode())
                         .hexdigest(), "system": system, "host": f"node{day % 4:02d}", "framework": "pytorch",
                         "benchmark": benchmark, "model": model, "np": np_, "nodes": nodes, "root": "planted",
                         "unit": unit, "time_to_target_s": None, "config": config, "status": "ok",
                         "started": started, "ended": started + 600, "throughput": throughput,
                         "ci_low": throughput * 0.995, "ci_high": throughput * 1.005, "steps": 500,
                         "converged": None, "environment": {"driver": driver, "cuda": "12.4", "nccl": "2.21.5",
                                                            "host": f"node{day % 4:02d}"},
                         "row_json": {"run_id": run_id, "planted": True}})
    return rows


def write_nights(folder: Path, seed: int = 0) -> list[Path]:
    """The month as nightly results roots under ``folder``: each night the same three runs (their run.json alike every
    night), each rank's timed steps planted to that night's throughput; the roots, first night first."""
    roots = []
    for row in month_rows(seed):
        night = (int(row["started"] - START) // 86400) + 1
        root = folder / f"night{night:02d}"
        spec = RunSpec(benchmark="imagenet" if row["benchmark"] == "imagenet" else "bert", framework="pytorch",
                       args=("--model", row["model"]), np=row["np"], nodes=row["nodes"], system=row["system"])
        run_dir = root / spec.id
        spec.write(run_dir)
        rng = np.random.default_rng(int(row["started"]))
        batch = 64
        for rank in range(spec.np):
            step = batch / (row["throughput"] / spec.np)  # each rank's share of the night's throughput
            with RecordWriter(run_dir / f"rank-{rank}.jsonl", rank=rank, local_rank=rank % spec.ranks_per_node,
                              size=spec.np) as writer:
                writer.write("env", benchmark=spec.benchmark, model=row["model"], unit=row["unit"],
                             host=row["environment"]["host"], time=row["started"],
                             nvml={"driver": row["environment"]["driver"]},
                             device={"type": "cuda", "cuda": "12.4", "nccl": "2.21.5"})
                for i in range(40):
                    writer.write("step", step=i, warmup=i < 5, duration=step * (5.0 if i < 5 else float(
                        np.exp(rng.normal(0.0, 0.002)))), samples=batch, loss=1.0)
                writer.write("summary", steps=35)
        RunStatus("ok", 0, 600.0).write(run_dir)
        roots += [root] if root not in roots else []
    return roots


def write_month(store: str, seed: int = 0, folder: Path | None = None) -> int:
    """The month as nightly roots (under ``folder``, else a temporary folder), imported into the store at ``store``
    in one call; the runs added."""
    if folder is None:
        with tempfile.TemporaryDirectory() as scratch:
            return write_month(store, seed, Path(scratch))
    return record_roots(write_nights(folder, seed), store).added


def many_months(months: int, margin: float = 0.02, spread: float = SPREAD) -> dict[str, float]:
    """The check on each configuration of many planted months: false alarms on the two unchanged ones (a change
    called, or any change point found), and on the slowed one the regressions called and the day named."""
    called = found = alarms = 0
    named: list[int] = []
    for seed in range(months):
        rows = month_rows(seed, spread=spread)
        for benchmark, _, np_, *_ in CONFIGS:
            series = np.array([r["throughput"] for r in rows if r["benchmark"] == benchmark and r["np"] == np_])
            judged = judge_history(series, margin)
            if benchmark == SLOWED:
                if judged.finding.finding == "regression":
                    called += 1
                    named.append(judged.changes[-1] + 1)
            else:
                found += bool(judged.changes)
                alarms += judged.finding.finding in ("regression", "improvement")
    unchanged = months * (len(CONFIGS) - 1)
    return {"months": months, "spread": spread, "false_alarms": alarms / unchanged,
            "change_points_found": found / unchanged,
            "detected": called / months,
            "named_day_20": float(np.mean([d == SLOW_DAY for d in named])) if named else float("nan"),
            "named_within_1_day": float(np.mean([abs(d - SLOW_DAY) <= 1 for d in named])) if named else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default=None, help="write one month (seed 0) into this store")
    parser.add_argument("--nights", type=Path, default=None, help="the nightly results roots go here (default: a "
                                                                  "temporary folder)")
    parser.add_argument("--months", type=int, default=0, help="simulate this many months")
    parser.add_argument("--spread", type=float, default=SPREAD, help=f"spread between runs (default {SPREAD})")
    args = parser.parse_args()
    if args.store:
        print(f"{write_month(args.store, folder=args.nights)} runs written to {args.store}")
    if args.months:
        start = time.perf_counter()
        figures = many_months(args.months, spread=args.spread)
        print(json.dumps(figures, indent=1))
        print(f"{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
