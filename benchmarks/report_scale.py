"""How long the report takes as logs grow, and how much memory: R ranks x S steps of step records in the log
format (plus each rank's env and summary), then collect, statistics, every table and every plot, timed per
stage, with the peak resident memory of the report's whole process tree (its reader processes included). Each log
is read twice: through the step columns its rank leaves beside it (core/columns.py), and through its JSON lines
alone (the columns files hidden), as a run whose ranks had no pyarrow would be.

    python benchmarks/report_scale.py                      # 1M (1,024 x 977) and 10M (4,096 x 2,442) records
    python benchmarks/report_scale.py --sizes 16x625,128x780 --out /tmp/scale --read columns

Goals on a 2-core machine: 1,000,000 records in <= 5 s; 10,000,000 in <= 10 s within 4 GiB.
The logs are written once per size (the 10M set is 2.1 GB) and kept for a rerun with --keep.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from hvdbench.core.columns import COLUMNS_SUFFIX, Kept, write_columns
from hvdbench.core.records import decode_json, encode, make_record, rank_log_name
from hvdbench.core.spec import RunSpec

WARMUP = 5


def rank_log(run_dir: Path, rank: int, ranks: int, steps: int, seed: int = 0) -> int:
    """One rank's log as the harness writes it (env, warm-up and timed steps, summary); returns its steps."""
    rng = random.Random(seed * 100_003 + rank)
    slow = 1.08 if rank == ranks // 3 else 1.0  # one straggler to find
    head = {"rank": rank, "local_rank": rank % 8, "size": ranks, "host": f"node{rank // 8:03d}"}
    lines = [encode(make_record("env", **head, time=0.0, mono=0.0, benchmark="imagenet", model="resnet50",
                                unit="images"))]
    for step in range(steps):
        warm = step < WARMUP
        duration = (0.5 if warm else 0.2) * slow * (1 + 0.03 * rng.random())
        lines.append(encode(make_record("step", **head, time=1.0 + step, mono=1.0 + step, step=step, warmup=warm,
                                        duration=duration, samples=64, loss=6.9,
                                        phases={"exchange": 0.02 if slow == 1.0 else 0.004})))
    lines.append(encode(make_record("summary", **head, time=0.0, mono=0.0, steps=steps - WARMUP,
                                    samples=64.0 * (steps - WARMUP), window_s=0.2 * (steps - WARMUP),
                                    median_step_s=0.2, throughput=320.0)))
    log = run_dir / rank_log_name(rank)
    log.write_text("".join(lines))
    kept = Kept(rank, ranks)  # the step columns a rank writes beside its log when it finishes
    for line in lines:
        kept.keep(decode_json(line), line)
    write_columns(log, kept)
    return steps


def make_logs(root: Path, ranks: int, steps: int, seed: int = 0) -> int:
    """One run of ``ranks`` ranks (its run.json and every rank's log, written by as many processes as there
    are cores); returns the step records written."""
    spec = RunSpec(benchmark="imagenet", args=("--model", "resnet50", "--batch-size", "64"), np=ranks,
                   nodes=max(1, ranks // 8), system="scale")
    run_dir = root / spec.id
    spec.write(run_dir)
    with ProcessPoolExecutor(os.cpu_count() or 1) as pool:
        return sum(pool.map(rank_log, [run_dir] * ranks, range(ranks), [ranks] * ranks, [steps] * ranks,
                            [seed] * ranks, chunksize=64))


class PeakMemory:
    """The peak of the resident memory of this process's descendants together (the report's process and its
    reader processes), sampled every 20 ms."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _rss(pid: int) -> int:
        try:
            with open(f"/proc/{pid}/statm") as handle:
                return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            return 0

    @staticmethod
    def _descendants(pid: int) -> list[int]:
        found, todo = [], [pid]
        while todo:
            parent = todo.pop()
            try:
                tasks = list(Path(f"/proc/{parent}/task").iterdir())
            except OSError:
                continue
            for task in tasks:
                try:
                    children = [int(p) for p in (task / "children").read_text().split()]
                except OSError:
                    continue
                found += children
                todo += children
        return found

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, sum(self._rss(p) for p in self._descendants(os.getpid())))

    def __enter__(self) -> "PeakMemory":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@contextmanager
def _columns_hidden(root: Path, hidden: bool) -> Iterator[None]:
    """The logs' step columns files out of the report's sight while ``hidden`` (the JSON lines read instead)."""
    files = sorted(root.rglob(f"*{COLUMNS_SUFFIX}")) if hidden else []
    for path in files:
        path.rename(path.with_name(path.name + ".hidden"))
    try:
        yield
    finally:
        for path in files:
            path.with_name(path.name + ".hidden").rename(path)


def measure(root: Path) -> str:
    """Collect, build and write the report of one size in a fresh process (no memory left from writing)."""
    code = (
        "import sys, time\nfrom pathlib import Path\n"
        "from hvdbench.analysis.collect import collect\nfrom hvdbench.analysis.report.build import build, write\n"
        "root = Path(sys.argv[1])\nt0 = time.perf_counter()\ncollection = collect([root])\n"
        "t1 = time.perf_counter()\nreport = build(collection)\nt2 = time.perf_counter()\n"
        "write(report, root / 'report')\nt3 = time.perf_counter()\n"
        "assert len(report.tables['stragglers']) == 1, report.tables['stragglers']\n"
        "print(f'{t1 - t0:.2f} {t2 - t1:.2f} {t3 - t2:.2f} {t3 - t0:.2f}')\n")
    with PeakMemory() as memory:
        proc = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(proc.stderr)
    collect_s, build_s, write_s, total_s = proc.stdout.split()
    return f"{collect_s} | {build_s} | {write_s} | {total_s} | {memory.peak / 2**30:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1024x977,4096x2442", help="RANKSxSTEPS,...")
    parser.add_argument("--out", type=Path, default=Path("/tmp/hvdbench-report-scale"))
    parser.add_argument("--keep", action="store_true", help="reuse logs an earlier run wrote under --out")
    parser.add_argument("--read", default="columns,json",
                        help="read the logs through the step columns files (columns), the JSON lines (json), or both")
    args = parser.parse_args()
    print("| step records | ranks x steps | read from | collect (s) | statistics + tables + plots (s) | write (s) "
          "| total (s) | peak memory (GiB) |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|")
    for size in args.sizes.split(","):
        ranks, steps = (int(x) for x in size.split("x"))
        root = args.out / size
        if not (args.keep and root.exists()):
            shutil.rmtree(root, ignore_errors=True)
            started = time.perf_counter()
            make_logs(root, ranks, steps)
            print(f"(wrote {ranks * steps:,} step records in {time.perf_counter() - started:.0f} s)", file=sys.stderr)
        for reading in args.read.split(","):
            shutil.rmtree(root / "report", ignore_errors=True)
            with _columns_hidden(root, reading == "json"):
                print(f"| {ranks * steps:,} | {ranks} x {steps} | {reading} | {measure(root)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
