"""Every node of an allocation's HCA ports in one command (``hvdbench fabric --all-nodes``): the port tool as a
one-task SLURM step on each node (``srun --nodes=1 --ntasks=1 --nodelist=NODE ibstat``), PARALLEL at a time, each
bounded by the timeout and ended whole past it; each node's output, or why it gave none. Building the steps is pure;
running them is a thin outer loop. Judging is core/hca.py's (a node's own ports, then the nodes against one another)."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from hvdbench.core.bounded import run_bounded

PARALLEL = 16  # steps at once: a 1,000-node allocation asked in minutes, the controller not flooded
TOOLS = ("ibstat", "ibv_devinfo")  # the first a node answers is read, as on one node


def port_steps(hosts: Sequence[str], tool: str = TOOLS[0]) -> list[tuple[str, list[str]]]:
    """(node, its srun command) for each node."""
    return [(host, ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={host}", "--quiet", tool]) for host in hosts]


def ask_nodes(hosts: Sequence[str], timeout: float,
              run: Callable[..., Any] = run_bounded) -> list[tuple[str, str | None, str]]:
    """(node, its port tool's output or None, why there is none) for each node, in the order given: ibstat, else
    ibv_devinfo where ibstat gave nothing."""
    def one(host: str) -> tuple[str, str | None, str]:
        why = ""
        for tool in TOOLS:
            [(_, argv)] = port_steps([host], tool)
            try:
                done = run(argv, capture_output=True, text=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                return host, None, f"srun {tool} did not finish in {timeout:g} s"
            except OSError as exc:
                return host, None, f"srun: {exc.strerror or exc}"
            if done.returncode == 0 and (done.stdout or "").strip():
                return host, done.stdout, ""
            said = (done.stderr or "").strip().splitlines()
            why = f"srun {tool}: exit {done.returncode}" + (f": {said[-1][:200]}" if said else ": no output")
        return host, None, why

    with ThreadPoolExecutor(max_workers=max(1, min(PARALLEL, len(hosts)))) as pool:
        return list(pool.map(one, hosts))
