"""Bind a rank to its GPU's CPUs, then run the benchmark: ``python -m hvdbench.suite.bind 0-19;20-39 --
script.py ARGS``. The local rank comes from the launcher's environment (Open MPI, SLURM, Horovod)."""

from __future__ import annotations

import os
import sys
from typing import Mapping, Sequence

LOCAL_RANK_VARS = ("OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "HOROVOD_LOCAL_RANK", "MPI_LOCALRANKID",
                   "PMI_LOCAL_RANK", "LOCAL_RANK")


def local_rank(env: Mapping[str, str]) -> int | None:
    """This process's rank on its node, as the launcher that started it says."""
    for name in LOCAL_RANK_VARS:
        value = env.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def parse_cpus(text: str) -> set[int]:
    """``0-3,8`` as {0, 1, 2, 3, 8}; a malformed list is a ValueError."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def main(argv: Sequence[str] | None = None) -> int:
    """Set the affinity of the local rank's CPU list and exec the rest of the command line."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[1] != "--":
        print("usage: python -m hvdbench.suite.bind 'CPUS;CPUS;...' -- script.py [args]", file=sys.stderr)
        return 2
    lists, command = args[0].split(";"), args[2:]
    rank = local_rank(os.environ)
    if rank is None or rank >= len(lists):
        print(f"error: CPU binding: local rank {rank} has no CPU list among {len(lists)} "
              f"(set by {', '.join(LOCAL_RANK_VARS)})", file=sys.stderr)
        return 2
    try:
        wanted = parse_cpus(lists[rank])
        present = set(range(os.cpu_count() or 1))
        missing = sorted(wanted - present)
        if missing:
            raise OSError(f"CPU(s) {missing[:8]} not on this host ({len(present)} CPUs)")
        os.sched_setaffinity(0, wanted)
    except (ValueError, OSError) as exc:
        print(f"error: CPU binding of local rank {rank} to {lists[rank]!r}: {exc}", file=sys.stderr)
        return 2
    os.execv(sys.executable, [sys.executable, *command])
    return 0  # not reached: exec replaces this process


if __name__ == "__main__":
    sys.exit(main())
