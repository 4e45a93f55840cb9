"""nccl-tests between every pair of nodes and across all of them, before a training benchmark (NVIDIA's bring-up
practice: a bad cable or port shows as one pair's low bus bandwidth): each set run as one SLURM step inside the
allocation (``srun --nodes=K --ntasks-per-node=G --nodelist=...``), disjoint pairs side by side in n-1 rounds (not
n(n-1)/2 steps one after another), in the image where one is given, its output kept, taken in as runs
(launchers/imported.py), and each pair's busbw at its largest size set against the best any pair reaches (a pair runs
at its slower node's pace: a lone fast pair among slow ones means the others are slow, however many; a bad node
cannot lower the reference), flagged low below LOW of it with the nodes low with every other named; against the
link's nominal figure too where it is given, the only ground on which a pair is flagged high (faster than the link
can be); two nodes, one pair, are "too few to compare" without it. Building the steps is pure; running them is a
thin outer loop."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from hvdbench.core.bounded import run_bounded
from hvdbench.core.containers import Container, runtime
from hvdbench.core.errors import UsageError
from hvdbench.core.pair_judging import NodeSet, judge_sets

from .imported import Imported, import_files

OUTPUTS = "nccl-tests"  # the outputs' folder under the results root
MOST_PAIRS = 8128  # 128 nodes: 127 rounds of 64 pairs side by side; more is a day's work, not a check
MOST_SERIAL = 2016  # 64 nodes one pair at a time


@dataclass(frozen=True)
class Step:
    """One set of nodes' test: its label (the file it writes), its srun command, and the round it runs in (the
    steps of a round side by side, on nodes no other step of the round uses)."""

    label: str
    nodes: tuple[str, ...]
    argv: tuple[str, ...]
    round: int = 0


def rounds(hosts: Sequence[str]) -> list[list[tuple[str, str]]]:
    """Every pair of ``hosts`` in rounds of disjoint pairs (the circle method: n-1 rounds for an even count, n for an
    odd one, each host in one pair a round at most)."""
    ring: list[str | None] = list(hosts) + ([None] if len(hosts) % 2 else [])
    out = []
    for _ in range(len(ring) - 1):
        half = len(ring) // 2
        pairs = [(a, b) for a, b in zip(ring[:half], reversed(ring[half:])) if a is not None and b is not None]
        out.append([(a, b) if hosts.index(a) < hosts.index(b) else (b, a) for a, b in pairs])
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return out


def steps(hosts: Sequence[str], per_node: int, program: str, flags: Sequence[str], mpi: str, *,
          serial: bool = False, container: Container | None = None, root: Path = Path(".")) -> list[Step]:
    """Every pair of ``hosts`` in rounds of disjoint pairs side by side (one pair a round where ``serial``), then all
    of them (where more than two), each as one srun step of ``per_node`` tasks a node running ``program`` (one GPU a
    task: nccl-tests' ``-g 1``); inside ``container``'s image where given (pyxis: srun's flags; the others wrap
    the program)."""
    hosts = list(dict.fromkeys(hosts))
    if len(hosts) < 2:
        raise UsageError(f"nccl-tests between nodes needs 2 or more hosts; {len(hosts)} given")
    count, most = len(hosts) * (len(hosts) - 1) // 2, MOST_SERIAL if serial else MOST_PAIRS
    if count > most:
        raise UsageError(f"{len(hosts)} hosts make {count:,} pairs, more than {most:,}"
                         f"{' one at a time' if serial else ''}: check a subset")
    sets: list[tuple[tuple[str, ...], int]] = [(pair, i) for i, pairs in enumerate(rounds(hosts)) for pair in pairs]
    if serial:
        sets = [(pair, i) for i, (pair, _) in enumerate(sorted(sets, key=lambda s: [hosts.index(h) for h in s[0]]))]
    last = max(i for _, i in sets) + 1
    if len(hosts) > 2:
        sets.append((tuple(hosts), last))
    inside, around = _in_image(container, root)
    return [Step("all" if len(nodes) == len(hosts) and len(hosts) > 2 else "-".join(nodes), tuple(nodes),
                 ("srun", f"--nodes={len(nodes)}", f"--ntasks-per-node={per_node}", f"--nodelist={','.join(nodes)}",
                  f"--mpi={mpi}", "--overlap", "--kill-on-bad-exit=1", *inside, *around([program, *flags])), i)
            for nodes, i in sets]


def _in_image(container: Container | None, root: Path) -> tuple[list[str], Callable[[list[str]], list[str]]]:
    """srun's flags that put its tasks in the image (pyxis), and what wraps the program (the other runtimes)."""
    if container is None:
        return [], lambda argv: argv
    rt = runtime(container.runtime)
    flags = rt.flags(container, root, ())
    if flags:
        return flags, lambda argv: argv
    return [], lambda argv: rt.wrap(container, root, argv, True)


def run_steps(plan: Sequence[Step], root: Path, timeout: float,
              run: Callable[..., Any] = run_bounded) -> list[tuple[Step, Path | str]]:
    """Run each round's steps side by side, round after round, each output into ``root/nccl-tests/LABEL.txt``;
    (step, the file, or why it gave none), in the plan's order. A step past its time is ended whole, its process
    group (srun and what it started), never left running; so the whole takes at most rounds x ``timeout``."""
    folder = root / OUTPUTS
    folder.mkdir(parents=True, exist_ok=True)
    done: dict[int, Path | str] = {}
    by_round: dict[int, list[int]] = {}
    for index, step in enumerate(plan):
        by_round.setdefault(step.round, []).append(index)
    for indexes in (by_round[r] for r in sorted(by_round)):
        with ThreadPoolExecutor(max_workers=len(indexes)) as pool:
            for index, got in zip(indexes, pool.map(lambda i: _one(plan[i], folder, timeout, run), indexes)):
                done[index] = got
    return [(step, done[index]) for index, step in enumerate(plan)]


def _one(step: Step, folder: Path, timeout: float, run: Callable[..., Any]) -> Path | str:
    """One step's output file, or why it gave none."""
    path = folder / f"{step.label}.txt"
    try:
        with open(path, "w", encoding="utf-8") as handle:
            done = run(list(step.argv), stdout=handle, stderr=subprocess.PIPE, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"did not finish in {timeout:g} s"
    except OSError as exc:
        return f"srun: {exc.strerror or exc}"
    said = (done.stderr or "").strip().splitlines()
    return path if done.returncode == 0 else f"exit {done.returncode}" + (f": {said[-1][:200]}" if said else "")


def verdicts(imported: Sequence[Imported], expected: float | None = None) -> list[tuple[str, float, str]]:
    """(hosts, busbw at the largest size, what it says) for each set taken in (core/pair_judging.py's rule)."""
    return judge_sets([NodeSet(d.nodes, d.spec.placement or "", d.test.rows[-1].busbw) for d in imported
                       if d.test.rows], expected)


def check_pairs(plan: Sequence[Step], root: Path, system: str, timeout: float,
                run: Callable[..., Any] = run_bounded,
                expected: float | None = None) -> tuple[list[tuple[str, float, str]], list[str]]:
    """Run the steps, take their outputs in, and judge them (``expected``: the link's nominal busbw, where given):
    the verdicts and the steps that gave no output."""
    imported: list[Imported] = []
    failed: list[str] = []
    for step, got in run_steps(plan, root, timeout, run):
        if isinstance(got, str):
            failed.append(f"{step.label}: {got}")
            continue
        try:
            imported += import_files([got], root, system, step.nodes)  # the nodes the step ran on name the pair
        except UsageError as exc:  # an output without a table: the program's own complaint is in it
            failed.append(f"{step.label}: {exc}")
    return verdicts(imported, expected), failed
