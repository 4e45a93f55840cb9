"""How long the report takes as logs grow: R ranks x S steps of step records in the log format (plus each
rank's env and summary), then collect, statistics, every table and every plot, timed per stage.

    python benchmarks/report_scale.py --sizes 16x625,128x780,1024x977 --out /tmp/scale
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from pathlib import Path

from hvdbench.analysis.collect import collect
from hvdbench.analysis.report import build, write
from hvdbench.suite.records import encode, make_record, rank_log_name
from hvdbench.suite.spec import RunSpec


def make_logs(root: Path, ranks: int, steps: int, seed: int = 0) -> int:
    """One run of ``ranks`` ranks: step records like the harness writes (warm-up first); returns records."""
    rng = random.Random(seed)
    spec = RunSpec(benchmark="imagenet", args=("--model", "resnet50", "--batch-size", "64"), np=ranks,
                   nodes=max(1, ranks // 8), system="scale")
    run_dir = root / spec.id
    spec.write(run_dir)
    count = 0
    for rank in range(ranks):
        slow = 1.08 if rank == ranks // 3 else 1.0  # one straggler to find
        head = {"rank": rank, "local_rank": rank % 8, "size": ranks, "host": f"node{rank // 8:03d}"}
        lines = [encode(make_record("env", **head, time=0.0, mono=0.0, benchmark="imagenet", model="resnet50",
                                    unit="images"))]
        for step in range(steps):
            warm = step < 5
            duration = (0.5 if warm else 0.2) * slow * (1 + 0.03 * rng.random())
            lines.append(encode(make_record("step", **head, time=1.0 + step, mono=1.0 + step, step=step, warmup=warm,
                                            duration=duration, samples=64, loss=6.9,
                                            phases={"exchange": 0.02 if slow == 1.0 else 0.004})))
        lines.append(encode(make_record("summary", **head, time=0.0, mono=0.0, steps=steps - 5,
                                        samples=64.0 * (steps - 5), window_s=0.2 * (steps - 5), median_step_s=0.2,
                                        throughput=320.0)))
        (run_dir / rank_log_name(rank)).write_text("".join(lines))
        count += steps
    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16x625,128x780,1024x977", help="RANKSxSTEPS,...")
    parser.add_argument("--out", type=Path, default=Path("/tmp/hvdbench-report-scale"))
    args = parser.parse_args()
    print("| step records | ranks x steps | collect (s) | statistics + tables + plots (s) | write (s) | total (s) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size in args.sizes.split(","):
        ranks, steps = (int(x) for x in size.split("x"))
        root = args.out / size
        shutil.rmtree(root, ignore_errors=True)
        records = make_logs(root, ranks, steps)
        t0 = time.perf_counter()
        collection = collect([root])
        t1 = time.perf_counter()
        report = build(collection)
        t2 = time.perf_counter()
        write(report, root / "report")
        t3 = time.perf_counter()
        assert len(report.tables["stragglers"]) == 1, report.tables["stragglers"]
        print(f"| {records:,} | {ranks} x {steps} | {t1 - t0:.2f} | {t2 - t1:.2f} | {t3 - t2:.2f} | {t3 - t0:.2f} |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
