"""What writing its log costs a rank: R processes (ranks) in one shared directory, each running S "steps"
(a sleep of the step time) and writing one step record per step through RecordWriter (one flushed line per
record, as the harness does); the time each write takes is measured inside the rank and reported as a share
of the step time. Processes are forked from one small parent, so 1,024 of them fit in a few GiB.

    python benchmarks/log_writes.py --ranks 1024 --steps 100 --step-ms 20 --out /tmp/hvdbench-log-writes
"""

from __future__ import annotations

import argparse
import multiprocessing
import shutil
import statistics
import sys
import time
from pathlib import Path

from hvdbench.core.records import RecordWriter, encode, make_record, rank_log_name


def rank(index: int, size: int, steps: int, step_s: float, out: Path, start: float, flush: bool,
         queue: "multiprocessing.Queue") -> None:
    """One rank: wait for the common start, then steps with a record each; send back each write's seconds.
    Without ``flush`` the same record goes into the file's buffer only (written when 8 KiB are full): the
    difference is what flushing every line costs."""
    writer = RecordWriter(out / rank_log_name(index), rank=index, local_rank=index % 8, size=size)
    header = {"rank": index, "local_rank": index % 8, "size": size}
    time.sleep(max(0.0, start - time.time()))
    costs = []
    for step in range(steps):
        time.sleep(step_s)
        began = time.perf_counter()
        if flush:
            writer.write("step", step=step, warmup=False, duration=step_s, samples=64, loss=6.9)
        else:
            writer._file.write(encode(make_record("step", **header, step=step, warmup=False, duration=step_s,
                                                  samples=64, loss=6.9)))
        costs.append(time.perf_counter() - began)
    writer.close()
    queue.put(costs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--step-ms", type=float, default=20.0)
    parser.add_argument("--out", type=Path, default=Path("/tmp/hvdbench-log-writes"))
    parser.add_argument("--buffered", action="store_true", help="records into the file's buffer, no flush per line")
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    start = time.time() + 2.0 + args.ranks * 0.004  # every rank forked before the first step
    procs = [context.Process(target=rank, args=(i, args.ranks, args.steps, args.step_ms / 1e3, args.out, start,
                                                          not args.buffered, queue))
             for i in range(args.ranks)]
    for proc in procs:
        proc.start()
    costs = sorted(c for _ in procs for c in queue.get())
    for proc in procs:
        proc.join()
    median, p99, worst = statistics.median(costs), costs[int(len(costs) * 0.99)], costs[-1]
    print(f"{args.ranks} ranks x {args.steps} steps of {args.step_ms:g} ms, one shared directory: "
          f"{len(costs):,} step records, {'buffered' if args.buffered else 'each flushed'}")
    print(f"{'write' if args.buffered else 'write + flush'} per record: median {median * 1e6:.0f} us, "
          f"99th percentile {p99 * 1e6:.0f} us, "
          f"worst {worst * 1e3:.1f} ms; median share of a step {median / (args.step_ms / 1e3) * 100:.3f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
