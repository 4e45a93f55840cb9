"""The scaling projection back-tested on published multi-node results, and its model error calibrated on them.

Every family of the published results (MLPerf Training v3.0 folders: DGX H100 at 1 to 96 nodes, Dell XE8545 at 2 to
32; TensorFlow's tf_cnn_benchmarks tables: DGX-1 at 1 to 8 GPUs, EC2 p2.8xlarge at 1 to 8 nodes) is taken in with
``hvdbench import``, fitted on its two smallest sizes and its larger sizes predicted (``project --backtest``). The
model's error per doubling and per batch e-fold is then fitted to those errors (analysis/projection/backtest.py
``calibrate``), and each family's intervals judged on a calibration made from the other families only (leave one
family out): what a family the calibration never saw can expect. Writes analysis/projection/track_record.json with
``--write``; prints a Markdown page (docs/results/projection-published.md holds one).

    python benchmarks/projection_backtest.py --mlperf DIR --table FILE.csv [--write]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from hvdbench.analysis.collect import collect
from hvdbench.analysis.projection.backtest import (TRACK_RECORD, Calibration, calibrate, family_notes, held,
                                                  predict)
from hvdbench.analysis.projection.families import families_of
from hvdbench.cli import main as hvdbench


def backtested(mlperf: Path, table: Path, work: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Every family's back-test rows (no model error yet) and the lines of what was left out."""
    for argv in (["import", "mlperf", str(mlperf), "-o", str(work / "mlperf"), "--round", "3.0"],
                 ["import", "table", str(table), "-o", str(work / "table")]):
        with contextlib.redirect_stdout(io.StringIO()):
            assert hvdbench([*argv, "--store", "none"]) == 0
    families, left = families_of(collect([work / "mlperf", work / "table"]))
    rows = [row for family in families for row in predict(family, calibrated=Calibration(0.0, 0.0))]
    return rows, left


def leave_one_out(rows: list[dict[str, Any]]) -> list[bool]:
    """Whether each row's interval holds, on a calibration from the other families' rows."""
    key = [(r["system"], r["workload"]) for r in rows]
    out = [False] * len(rows)
    for family in dict.fromkeys(key):
        others = [r for r, k in zip(rows, key) if k != family]
        mine = [i for i, k in enumerate(key) if k == family]
        for i, ok in zip(mine, held([rows[i] for i in mine], calibrate(others))):
            out[i] = bool(ok)
    return out


def page(rows: list[dict[str, Any]], holds: list[bool], cal: Calibration, left: list[str], args: argparse.Namespace
         ) -> str:
    lines = ["# The scaling projection back-tested on published multi-node results", "",
             f"Measured {time.strftime('%Y-%m-%d')} with `benchmarks/projection_backtest.py --mlperf "
             f"published-scaling/{args.mlperf.name} --table published-scaling/{args.table.name} --write` on the "
             "fixture tests/fixtures/published-scaling.tar.xz unpacked (half a minute); the same as `hvdbench import "
             "mlperf`/`import table` then "
             "`hvdbench project ROOTS --backtest`. Each family is fitted on its two smallest sizes and predicts every "
             "larger one at its own per-GPU batch. Intervals: the fitted figures' spread and the model's own error, "
             f"calibrated on these back-tests ({cal.per_doubling:.1%} a doubling beyond the fitted sizes, "
             f"{cal.per_batch_e:.1%} an e-fold of the batch); each row is judged on a calibration from the other "
             "families only.", "",
             "| system | workload | nodes | GPUs | batch a GPU | measured/s | predicted [95%] | error | holds | "
             "algorithm |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r, ok in zip(rows, holds):
        sigma = np.sqrt(r["_base_var"] + (cal.per_doubling * r["_doublings"]) ** 2
                        + (cal.per_batch_e * r["_batch_e"]) ** 2)
        low, high = r["predicted"] * np.exp(-1.96 * sigma), r["predicted"] * np.exp(1.96 * sigma)
        lines.append(f"| {r['system']} | {r['workload']} | {r['nodes']} | {r['gpus']} | {r['batch_per_gpu']} | "
                     f"{r['measured']:,.0f} | {r['predicted']:,.0f} [{low:,.0f}–{high:,.0f}] | {r['error']:+.1%} | "
                     f"{'yes' if ok else 'no'} | {r['algorithm']} |")
    lines += ["", f"Intervals held {sum(holds)} of {len(holds)} held-out sizes (each family on the others' "
                  "calibration).", "", "Left out:", "", *[f"- {line}" for line in left], "",
              "What each fit assumed:", "", *[f"- {system} {workload}: {note}" for system, workload, note
                                                in family_notes(rows)]]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mlperf", type=Path, required=True, help="published MLPerf Training v3.0 folders")
    parser.add_argument("--table", type=Path, required=True, help="a published scaling table (CSV)")
    parser.add_argument("--write", action="store_true", help=f"write {TRACK_RECORD.name}")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        rows, left = backtested(args.mlperf, args.table, Path(work))
    holds = leave_one_out(rows)
    cal = calibrate(rows, "back-tests of MLPerf Training v3.0 and tf_cnn_benchmarks' published families")
    key = [(r["system"], r["workload"]) for r in rows]
    largest = {}
    for r, k in zip(rows, key):
        if k not in largest or r["gpus"] > largest[k]["gpus"]:
            largest[k] = r
    if args.write:
        TRACK_RECORD.write_text(json.dumps({
            "per_doubling": cal.per_doubling, "per_batch_e": cal.per_batch_e, "source": cal.source,
            "measured": time.strftime("%Y-%m-%d"), "held": sum(holds), "points": len(holds),
            "largest_errors": [round(r["error"], 4) for r in largest.values()],
            "families": [f"{s} {w}" for s, w in largest]}, indent=1) + "\n", encoding="utf-8")
    print(page(rows, holds, cal, left, args))


if __name__ == "__main__":
    main()
