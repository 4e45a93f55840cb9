"""Bind a rank to its GPU's CPUs, then run the benchmark: ``python -m hvdbench.core.bind 0-19;20-39 --
script.py ARGS``. The local rank comes from the launcher's or the scheduler's variables (core/job_env.py)."""

from __future__ import annotations

import os
import sys
from typing import Sequence

from .job_env import LAUNCHED, SCHEDULERS, job_env


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
        print("usage: python -m hvdbench.core.bind 'CPUS;CPUS;...' -- script.py [args]", file=sys.stderr)
        return 2
    lists, command = args[0].split(";"), args[2:]
    rank = job_env().number("local_rank")
    if rank is None or rank >= len(lists):
        said = [*LAUNCHED["local_rank"], *(row.variables["local_rank"][0] for row in SCHEDULERS.values()
                                           if "local_rank" in row.variables)]
        print(f"error: CPU binding: local rank {rank} has no CPU list among {len(lists)} "
              f"(set by {', '.join(said)})", file=sys.stderr)
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
