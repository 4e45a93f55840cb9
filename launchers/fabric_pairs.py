"""nccl-tests between every pair of nodes and across all of them, before a training benchmark (NVIDIA's bring-up
practice: a bad cable or port shows as one pair's low bus bandwidth): each set run as one SLURM step inside the
allocation (``srun --nodes=K --ntasks-per-node=G --nodelist=...``), its output kept, taken in as runs
(launchers/imported.py), and each set's busbw at its largest size set against the pairs' median. Building the
steps is pure; running them is a thin outer loop."""

from __future__ import annotations

import itertools
import statistics
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from hvdbench.core.errors import UsageError

from .imported import Imported, import_files

OUTPUTS = "nccl-tests"  # the outputs' folder under the results root
LOW = 0.90  # a set below this share of the pairs' median busbw is flagged
MOST_PAIRS = 2016  # 64 nodes: more pairs than this is a day's work, not a check


@dataclass(frozen=True)
class Step:
    """One set of nodes' test: its label (the file it writes) and its srun command."""

    label: str
    nodes: tuple[str, ...]
    argv: tuple[str, ...]


def steps(hosts: Sequence[str], per_node: int, program: str, flags: Sequence[str], mpi: str) -> list[Step]:
    """Every pair of ``hosts``, then all of them (where more than two), each as one srun step of ``per_node`` tasks a
    node running ``program`` (one GPU a task: nccl-tests' ``-g 1``)."""
    hosts = list(dict.fromkeys(hosts))
    if len(hosts) < 2:
        raise UsageError(f"nccl-tests between nodes needs 2 or more hosts; {len(hosts)} given")
    sets = [tuple(pair) for pair in itertools.combinations(hosts, 2)]
    if len(sets) > MOST_PAIRS:
        raise UsageError(f"{len(hosts)} hosts make {len(sets):,} pairs, more than {MOST_PAIRS:,}: check a subset")
    if len(hosts) > 2:
        sets.append(tuple(hosts))
    return [Step("all" if len(nodes) == len(hosts) and len(hosts) > 2 else "-".join(nodes), nodes,
                 ("srun", f"--nodes={len(nodes)}", f"--ntasks-per-node={per_node}", f"--nodelist={','.join(nodes)}",
                  f"--mpi={mpi}", "--overlap", "--kill-on-bad-exit=1", program, *flags))
            for nodes in sets]


def run_steps(plan: Sequence[Step], root: Path, timeout: float,
              run: Callable[..., Any] = subprocess.run) -> list[tuple[Step, Path | str]]:
    """Run each step, its output into ``root/nccl-tests/LABEL.txt``; (step, the file, or why it gave none)."""
    folder = root / OUTPUTS
    folder.mkdir(parents=True, exist_ok=True)
    out: list[tuple[Step, Path | str]] = []
    for step in plan:
        path = folder / f"{step.label}.txt"
        try:
            with open(path, "w", encoding="utf-8") as handle:
                done = run(list(step.argv), stdout=handle, stderr=subprocess.PIPE, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            out.append((step, f"did not finish in {timeout:g} s"))
            continue
        except OSError as exc:
            raise UsageError(f"srun: {exc.strerror or exc}") from None
        said = (done.stderr or "").strip().splitlines()
        out.append((step, path if done.returncode == 0 else f"exit {done.returncode}"
                    + (f": {said[-1][:200]}" if said else "")))
    return out


def verdicts(imported: Sequence[Imported]) -> list[tuple[str, float, str]]:
    """(hosts, busbw at the largest size, what it says) for each set: below LOW of the pairs' median is flagged."""
    figures = [(done.spec.placement or "", done.test.rows[-1].busbw, len(done.test.hosts)) for done in imported]
    pairs = [busbw for _, busbw, nodes in figures if nodes == 2]
    median = statistics.median(pairs) if pairs else None
    out = []
    for where, busbw, nodes in figures:
        if nodes != 2 or median is None or median <= 0:
            out.append((where, busbw, f"{nodes} nodes" if nodes != 2 else "no pair to compare with"))
        elif busbw < LOW * median:
            out.append((where, busbw, f"flagged: {busbw / median:.0%} of the pairs' median {median:,.1f} GB/s "
                                      "(a link, port or cable of these nodes?)"))
        else:
            out.append((where, busbw, f"{busbw / median:.0%} of the pairs' median"))
    return out


def check_pairs(plan: Sequence[Step], root: Path, system: str, timeout: float,
                run: Callable[..., Any] = subprocess.run) -> tuple[list[tuple[str, float, str]], list[str]]:
    """Run the steps, take their outputs in, and judge them: the verdicts and the steps that gave no output."""
    imported: list[Imported] = []
    failed: list[str] = []
    for step, got in run_steps(plan, root, timeout, run):
        if isinstance(got, str):
            failed.append(f"{step.label}: {got}")
            continue
        try:
            imported += import_files([got], root, system)
        except UsageError as exc:  # an output without a table: the program's own complaint is in it
            failed.append(f"{step.label}: {exc}")
    return verdicts(imported), failed
