"""Collective bandwidth benchmark: allreduce, allgather, broadcast, alltoall from 8 B to 1 GiB, through
Horovod and through raw MPI (mpi4py), with nccl-tests' algbw and busbw; every result is checked.

    mpirun -np 8 -bind-to none python suite/collectives.py --max-bytes 1G --dtypes fp32,fp16
    horovodrun -np 2 -H localhost:2 --gloo python suite/collectives.py --backends horovod --max-bytes 64M
"""

from __future__ import annotations

import sys
from typing import Any, Callable

import torch

from hvdbench.suite.core.catalog import get_benchmark
from hvdbench.suite.core.collective_ops import ITEM_BYTES, sizes, summarize
from hvdbench.suite.core.collective_ops import skip_reason as op_skip_reason
from hvdbench.suite.core.training_pattern import pattern_totals, scaled
from hvdbench.suite.comm import Buffers, Case, PatternBuffers, horovod_op, measure, measure_pattern, mpi_op
from hvdbench.suite.harness import rank_session
from hvdbench.suite.pytorch import TorchBackend


def skip_reason(case: Case, device: torch.device, hvd: Any) -> str | None:
    """Why a case cannot run here; the same answer on every rank, so no rank waits for another."""
    if case.backend == "mpi":
        if not hvd.mpi_enabled():
            return "Horovod runs on Gloo here: launch with mpirun or horovodrun --mpi for the MPI backend"
        if not hvd.mpi_threads_supported():
            return "this MPI lacks MPI_THREAD_MULTIPLE, which raw MPI beside Horovod's thread needs"
    return op_skip_reason(case.op, case.backend, case.dtype)


def main() -> int:
    info = get_benchmark("collectives")
    argv = sys.argv[1:]
    flags = info.parse_or_exit(argv)
    with rank_session(TorchBackend(), info, flags, argv, "collectives") as session:
        hvd, runtime, writer, device = session.hvd, session.runtime, session.writer, session.device
        writer.write("env", benchmark="collectives", framework="pytorch", model="collectives", flags=vars(flags),
                     unit="GB/s", **session.environment())
        if flags.pattern == "training":
            measured = training_pattern(session, flags)
            writer.write("summary", unit="GB/s", cases=measured, skipped=0)
            return 0
        runners: dict[str, Callable[[str], Callable[[torch.Tensor], torch.Tensor]]] = {
            "horovod": lambda op: horovod_op(hvd, op)}
        if "mpi" in flags.backends and hvd.mpi_enabled() and hvd.mpi_threads_supported():
            from mpi4py import MPI

            comm = MPI.COMM_WORLD.Dup()
            runners["mpi"] = lambda op: mpi_op(comm, op, runtime.size, flags.cuda_aware_mpi)
        if runtime.rank == 0:
            print(f"{'op':>10} {'backend':>8} {'dtype':>5} {'bytes':>12} {'time(us)':>10} {'algbw':>8} "
                  f"{'busbw':>8}  (GB/s; slowest rank per iteration, mean over iterations)", flush=True)
        measured = skipped = 0
        for op in flags.ops:
            for backend in flags.backends:
                for dtype in flags.dtypes:
                    reason = skip_reason(Case(op, backend, dtype, 0), device, hvd)
                    if reason:
                        skipped += 1
                        writer.write("comm", op=op, backend=backend, dtype=dtype, skipped=reason)
                        if runtime.rank == 0:
                            print(f"{op:>10} {backend:>8} {dtype:>5}  skipped: {reason}", flush=True)
                        continue
                    run = runners[backend](op)
                    for nbytes in sizes(flags.min_bytes, flags.max_bytes, flags.factor):
                        case = Case(op, backend, dtype, nbytes)
                        buffers = Buffers(case, runtime.rank, runtime.size, device,
                                          corrupt=flags.corrupt_rank == runtime.rank)
                        times = measure(run, buffers, case, rank=runtime.rank, iters=flags.iters,
                                        warmup=flags.warmup_iters, barrier=runtime.barrier, sync=runtime.sync)
                        writer.write("comm", op=op, backend=backend, dtype=dtype, bytes=buffers.bytes,
                                     elements=buffers.count, times=times, correct=True)
                        measured += 1
                        everyone = runtime.allgather_object(times)
                        if runtime.rank == 0:
                            s = summarize(op, buffers.bytes, runtime.size, everyone)
                            print(f"{op:>10} {backend:>8} {dtype:>5} {buffers.bytes:>12} {s['time_mean_s'] * 1e6:>10.1f} "
                                  f"{s['algbw_gbs']:>8.3f} {s['busbw_gbs']:>8.3f}", flush=True)
        writer.write("summary", unit="GB/s", cases=measured, skipped=skipped)
    return 0

def training_pattern(session: Any, flags: Any) -> int:
    """The --like run's gradients allreduced as its steps do, at its own total and at each curve size; returns
    the cases measured."""
    hvd, runtime, writer, device = session.hvd, session.runtime, session.writer, session.device
    if runtime.rank == 0:
        print(f"training pattern of {flags.like_run} ({flags.like_workload}): {len(flags.gradient_sizes)} gradient tensors per step, "
              f"{sum(flags.gradient_sizes):,} elements; {flags.iters} steps in a row per size", flush=True)
    measured = 0
    for dtype in flags.dtypes:
        for total in pattern_totals(flags.gradient_sizes, flags.min_bytes, flags.max_bytes, flags.factor,
                                    ITEM_BYTES[dtype]):
            counts = scaled(flags.gradient_sizes, total)
            buffers = PatternBuffers(counts, dtype, runtime.rank, runtime.size, device,
                                     corrupt=flags.corrupt_rank == runtime.rank)
            case = Case("allreduce", "horovod", dtype, buffers.bytes)
            times = measure_pattern(hvd, buffers, case, rank=runtime.rank, iters=flags.iters,
                                    warmup=flags.warmup_iters, barrier=runtime.barrier, sync=runtime.sync)
            writer.write("comm", op="allreduce", backend="horovod", dtype=dtype, bytes=buffers.bytes,
                         elements=buffers.count, times=times, correct=True, pattern="training",
                         tensors=len(counts), like=flags.like_run, like_workload=flags.like_workload)
            measured += 1
            everyone = runtime.allgather_object(times)
            if runtime.rank == 0:
                s = summarize("allreduce", buffers.bytes, runtime.size, everyone)
                print(f"{'training':>10} {'horovod':>8} {dtype:>5} {buffers.bytes:>12} {s['time_mean_s'] * 1e6:>10.1f} "
                      f"{s['algbw_gbs']:>8.3f} {s['busbw_gbs']:>8.3f}  ({len(counts)} tensors)", flush=True)
    return measured


if __name__ == "__main__":
    sys.exit(main())
