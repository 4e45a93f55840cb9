"""Collective bandwidth benchmark: each operation of core/collective_ops.py from 8 B to 1 GiB, through
Horovod and through raw MPI (mpi4py), with nccl-tests' algbw and busbw, timed as nccl-tests times them
(--timing batch, the default) or call by call (--timing each); every result is checked.

    mpirun -np 8 -bind-to none python suite/collectives.py --max-bytes 1G --dtypes fp32,fp16
    horovodrun -np 2 -H localhost:2 --gloo python suite/collectives.py --backends horovod --max-bytes 64M
"""

from __future__ import annotations

import functools
import itertools
import sys
from typing import Any

import torch

from hvdbench.core.catalog import get_benchmark
from hvdbench.core.collective_ops import ITEM_BYTES, OPS, sizes, summarize
from hvdbench.core.collective_ops import skip_reason as op_skip_reason
from hvdbench.core.job_env import job_env
from hvdbench.core.training_pattern import pattern_totals, scaled
from hvdbench.suite.comm import (Buffers, Case, PatternBuffers, horovod_op, measure, measure_batches, measure_pattern,
                                 mpi_call, mpi_op, path_cost)
from hvdbench.suite.harness import rank_session
from hvdbench.suite.pytorch import TorchBackend
from hvdbench.suite.timing import Runtime


NO_MPI = ("raw MPI needs an MPI launcher (mpirun, mpiexec, srun --mpi, horovodrun --mpi): this rank was not "
          "started by one")


def early_mpi(flags: Any) -> Any | None:
    """mpi4py's MPI, started before Horovod where raw MPI is asked and an MPI launcher started this rank (None
    elsewhere): Horovod then finds MPI running and leaves it running when it is shut down after its own cases,
    so raw MPI is timed without Horovod's background thread, whose cycle slowed every raw call up to 4x on a
    busy node (measured: Intel MPI, 2 ranks, 4 MiB allreduce, 1.4 ms alone, 6.4 ms beside Horovod)."""
    if "mpi" not in flags.backends or not job_env().mpi_launched:
        return None
    from mpi4py import MPI

    return MPI


class MpiRuntime:
    """The raw-MPI cases' view of the job once Horovod is shut down (a ``Runtime``): MPI's barrier and object
    collectives, the node's ranks and the device's sync as Horovod's runtime had them."""

    def __init__(self, comm: Any, before: Runtime) -> None:
        self.comm, self.sync = comm, before.sync
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.local_rank, self.local_size = before.local_rank, before.local_size

    def barrier(self) -> None:
        self.comm.Barrier()

    def allgather_object(self, obj: Any) -> list[Any]:
        return self.comm.allgather(obj)

    def broadcast_object(self, obj: Any) -> Any:
        return self.comm.bcast(obj, root=0)


def main() -> int:
    info = get_benchmark("collectives")
    argv = sys.argv[1:]
    flags = info.parse_or_exit(argv)
    mpi = early_mpi(flags)
    with rank_session(TorchBackend(), info, flags, argv, "collectives") as session:
        hvd, runtime, writer = session.hvd, session.runtime, session.writer
        writer.write("env", benchmark="collectives", framework="pytorch", model="collectives", flags=vars(flags),
                     unit="GB/s", **session.environment())
        if flags.pattern == "training":
            measured = training_pattern(session, flags)
            writer.write("summary", unit="GB/s", cases=measured, skipped=0)
            return 0
        if runtime.rank == 0:
            how = ("the median over batches of calls back to back" if flags.timing == "batch"
                   else "the mean over calls each bounded by a barrier and a sync")
            print(f"{'op':>10} {'backend':>8} {'dtype':>5} {'bytes':>12} {'time(us)':>10} {'algbw':>8} "
                  f"{'busbw':>8}  (GB/s; slowest rank, {how})", flush=True)
        counts, costs = [0, 0], {}
        if "horovod" in flags.backends:  # Horovod's cases first; raw MPI's once Horovod is shut down
            counts = backend_cases(session, flags, "horovod", runtime, None, counts)
            one = torch.ones(1, device=session.device)
            costs["horovod"] = path_cost(lambda: hvd.allreduce(one, op=hvd.Sum), calls=200, barrier=runtime.barrier,
                                         sync=runtime.sync)
        if "mpi" in flags.backends:
            if mpi is not None:
                hvd.shutdown()
                runtime = MpiRuntime(mpi.COMM_WORLD.Dup(), runtime)
                costs["mpi"] = path_cost(mpi_call(mpi.COMM_SELF, "allreduce", 1, flags.cuda_aware_mpi,
                                                  torch.ones(1, device=session.device)),
                                         calls=2000, barrier=runtime.barrier, sync=runtime.sync)
            comm = runtime.comm if isinstance(runtime, MpiRuntime) else None
            counts = backend_cases(session, flags, "mpi", runtime, comm, counts)
        if runtime.rank == 0 and costs:
            print("a call's own cost before any byte moves: "
                  + ", ".join(f"{k} {v * 1e6:.1f} us" for k, v in costs.items()), flush=True)
        writer.write("summary", unit="GB/s", cases=counts[0], skipped=counts[1], path_cost_s=costs)
    return 0


def backend_cases(session: Any, flags: Any, backend: str, runtime: Any, comm: Any, counts: list[int]) -> list[int]:
    """Every op, dtype and size of one backend (each case that cannot run here recorded with why); the
    [measured, skipped] counts so far, added to."""
    measured, skipped = counts
    for op, dtype in itertools.product(flags.ops, flags.dtypes):
        reason = NO_MPI if backend == "mpi" and comm is None else op_skip_reason(op, backend, dtype)
        if reason:
            skipped += 1
            session.writer.write("comm", op=op, backend=backend, dtype=dtype, skipped=reason)
            if runtime.rank == 0:
                print(f"{op:>10} {backend:>8} {dtype:>5}  skipped: {reason}", flush=True)
            continue
        for nbytes in sizes(flags.min_bytes, flags.max_bytes, flags.factor):
            one_case(session, flags, runtime, comm, Case(op, backend, dtype, nbytes))
            measured += 1
    return [measured, skipped]


def one_case(session: Any, flags: Any, runtime: Any, comm: Any, case: Case) -> None:
    """One operation, backend, dtype and size: timed as --timing says, recorded, its figure printed by rank 0."""
    hvd, device = session.hvd, session.device
    buffers = Buffers(case, runtime.rank, runtime.size, device, corrupt=flags.corrupt_rank == runtime.rank)
    if flags.timing == "batch":
        call = (mpi_call(comm, case.op, runtime.size, flags.cuda_aware_mpi, buffers.input) if case.backend == "mpi"
                else functools.partial(OPS[case.op].horovod, hvd, buffers.input))
        times = measure_batches(call, buffers, case, rank=runtime.rank, iters=flags.iters, batches=flags.batches,
                                warmup=flags.warmup_iters, barrier=runtime.barrier, sync=runtime.sync)
    else:
        run = mpi_op(comm, case.op, runtime.size, flags.cuda_aware_mpi) if case.backend == "mpi" \
            else horovod_op(hvd, case.op)
        times = measure(run, buffers, case, rank=runtime.rank, iters=flags.iters, warmup=flags.warmup_iters,
                        barrier=runtime.barrier, sync=runtime.sync)
    session.writer.write("comm", op=case.op, backend=case.backend, dtype=case.dtype, bytes=buffers.bytes,
                         elements=buffers.count, times=times, correct=True, timing=flags.timing,
                         calls=flags.iters if flags.timing == "batch" else 1)
    everyone = runtime.allgather_object(times)
    if runtime.rank == 0:
        s = summarize(case.op, buffers.bytes, runtime.size, everyone, flags.timing)
        print(f"{case.op:>10} {case.backend:>8} {case.dtype:>5} {buffers.bytes:>12} {s['time_s'] * 1e6:>10.1f} "
              f"{s['algbw_gbs']:>8.3f} {s['busbw_gbs']:>8.3f}", flush=True)


def training_pattern(session: Any, flags: Any) -> int:
    """The --like run's gradients allreduced as its steps do, at its own total and at each curve size; returns
    the cases measured."""
    hvd, runtime, writer, device = session.hvd, session.runtime, session.writer, session.device
    if runtime.rank == 0:
        print(f"training pattern of {flags.like_run} ({flags.like_workload}): {len(flags.gradient_sizes)} "
              "gradient tensors per step, "
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
                print(f"{'training':>10} {'horovod':>8} {dtype:>5} {buffers.bytes:>12} {s['time_s'] * 1e6:>10.1f} "
                      f"{s['algbw_gbs']:>8.3f} {s['busbw_gbs']:>8.3f}  ({len(counts)} tensors)", flush=True)
    return measured


if __name__ == "__main__":
    sys.exit(main())
