"""How the history store and its check scale: a fleet's year of nightly runs (C configurations x D nights), recorded
into a fresh SQLite store in sweeps of S runs, then every run selected, aggregated and checked for change.

    python benchmarks/history_scale.py                          # 100 configurations x 365 nights, sweeps of 20
    python benchmarks/history_scale.py --configs 20 --nights 1000 --store postgresql://...

Prints seconds per stage and the store's size on disk.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from hvdbench.analysis.history.check import check_table
from hvdbench.analysis.history.query import Selection, aggregate, select
from hvdbench.analysis.history.store import open_store

START = 1_790_000_000.0


def fleet_rows(configs: int, nights: int, seed: int = 0) -> list[dict[str, Any]]:
    """Nightly runs of ``configs`` configurations, a 2.5% spread between runs, every tenth slowed 7% from the
    middle night on."""
    rng = np.random.default_rng(seed)
    rows = []
    for night in range(nights):
        for c in range(configs):
            slow = 0.93 if c % 10 == 0 and night >= nights // 2 else 1.0
            throughput = 1000.0 * (1 + c / configs) * slow * float(np.exp(rng.normal(0.0, 0.025)))
            run_id = f"w{c:03d}-n{night:04d}"
            config = json.dumps({"benchmark": f"w{c:03d}", "model": "m", "np": 8, "system": "fleet"}, sort_keys=True)
            rows.append({"run_id": run_id, "digest": "m:" + hashlib.sha256(f"{run_id}{throughput!r}".encode())
                         .hexdigest(), "system": "fleet", "host": f"node{night % 16:02d}", "framework": "pytorch",
                         "benchmark": f"w{c:03d}", "model": "m", "np": 8, "nodes": 1, "root": "fleet", "unit": "images",
                         "time_to_target_s": None, "config": config, "status": "ok", "started": START + night * 86400,
                         "ended": START + night * 86400 + 600, "throughput": throughput, "ci_low": throughput * 0.99,
                         "ci_high": throughput * 1.01, "steps": 500, "converged": None,
                         "environment": {"driver": "550.54.15", "host": f"node{night % 16:02d}"},
                         "row_json": {"run_id": run_id}})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", type=int, default=100)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--sweep", type=int, default=20, help="runs recorded at a time (one sweep's)")
    parser.add_argument("--store", default=None, help="default: a new SQLite file in a temporary folder")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="history-scale-"))
    url = args.store or str(folder / "history.sqlite")
    rows = fleet_rows(args.configs, args.nights)
    start = time.perf_counter()
    with open_store(url) as store:
        for i in range(0, len(rows), args.sweep):
            store.record(rows[i:i + args.sweep], now=time.time())
    recorded = time.perf_counter() - start
    with open_store(url) as store:
        start = time.perf_counter()
        runs = select(store, Selection())
        selected = time.perf_counter() - start
    start = time.perf_counter()
    aggregate(runs)
    aggregated = time.perf_counter() - start
    start = time.perf_counter()
    table = check_table(runs, 0.02)
    checked = time.perf_counter() - start
    size = (folder / "history.sqlite").stat().st_size / 2**20 if args.store is None else float("nan")
    found = table["finding"].value_counts().to_dict()
    print(json.dumps({"runs": len(rows), "configurations": args.configs, "nights": args.nights,
                      "record_s": round(recorded, 2), "runs_per_s": round(len(rows) / recorded),
                      "select_s": round(selected, 2), "aggregate_s": round(aggregated, 2),
                      "check_s": round(checked, 2), "check_s_per_configuration": round(checked / args.configs, 3),
                      "store_mib": round(size, 1), "findings": found}, indent=1))


if __name__ == "__main__":
    main()
