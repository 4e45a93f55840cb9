"""The largest model a rank count can train (``hvdbench run lm --fit``): grow a model's depth or width from the
shape given, one short real run per shape, until a run fails for lack of memory or its busiest rank's peak
memory passes ``--memory-cap``; then bisect between the largest shape that fitted and the smallest that did
not. Run once per exchange into one output folder (``--exchange horovod``, then ``fsdp``), the folder's fit
files side by side answer the buyer's question of an 80 GB against a 48 GB GPU: how large a model trains
sharded against as replicas.

Building a trial and judging it are pure (``trial_args``, ``next_value``, ``judge``); running is ``search``."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

from hvdbench.suite.core.axes import without
from hvdbench.suite.core.errors import UsageError
from hvdbench.suite.core.records import ParseStats, read_records
from hvdbench.suite.core.spec import RunFolder, RunSpec, RunStatus

GROWABLE = {"lm": {"layers": "--layers", "width": "--width"}}  # benchmark -> what a fit may grow: its flag
SHORT_RUN = ("--steps", "3", "--warmup-steps", "1")  # a trial needs a few steps, not a measurement
OUT_OF_MEMORY = ("out of memory", "outofmemoryerror", "memoryerror", "cannot allocate memory",
                 "failed to allocate")
MAX_TRIALS = 16  # doubling from 1 to 2^8 and bisecting back is fewer
# On the CPU a trial's memory is its ranks' peak resident set. glibc raises its mmap threshold each time a large
# block is freed (up to 32 MiB), after which freed tensors stay in its heap: a sharded model's freed full-size
# parameters and gathered buffers then count as if alive (measured: FSDP at 2 ranks peaked above replicas of the
# same LM). A fixed threshold returns every block of 128 KiB or more to the system when it is freed.
CPU_ALLOCATOR = {"MALLOC_MMAP_THRESHOLD_": "131072"}
CPU_ALLOCATOR_TEXT = "glibc's mmap threshold fixed at 128 KiB: freed tensors leave the resident set"


@dataclass(frozen=True)
class Trial:
    """One shape tried: the grown flag's value, whether it fitted (None: not judged), the busiest rank's peak
    memory in bytes, the model's parameters, the run's id and why it did not fit."""

    value: int
    fits: bool | None
    peak_bytes: float | None
    parameters: int | None
    run_id: str
    why: str = ""


def grown_flag(benchmark: str, grow: str) -> str:
    """The flag a fit grows, where the benchmark has one."""
    options = GROWABLE.get(benchmark)
    if options is None:
        raise UsageError(f"--fit grows a Transformer LM's depth or width; benchmark {benchmark} has no shape to grow "
                         f"(offered: {', '.join(GROWABLE)})")
    if grow not in options:
        raise UsageError(f"--fit-grow {grow}: {benchmark} grows {' or '.join(options)}")
    return options[grow]


def trial_args(args: Sequence[str], flag: str, value: int) -> tuple[str, ...]:
    """A trial's arguments: the user's with the grown flag set to ``value`` and, unless given, a short run."""
    out = [*without(args, {flag: 1}), flag, str(value)]
    if not any(a == "--steps" or a.startswith("--steps=") for a in args):
        out += SHORT_RUN
    return tuple(out)


def next_value(trials: Sequence[Trial], start: int, step: int, limit: int) -> int | None:
    """The next value to try, or None when the search is over: from ``start`` doubling while shapes fit (up to
    ``limit``), then halving the gap between the largest that fitted and the smallest that did not, in whole
    ``step``s."""
    if not trials:
        return start
    fitted = [t.value for t in trials if t.fits]
    missed = [t.value for t in trials if t.fits is False]
    if not fitted:
        return None  # the starting shape does not fit: nothing smaller is searched
    low = max(fitted)
    if not missed:
        grown = low * 2
        return grown if grown <= limit else (limit if low < limit else None)
    high = min(missed)
    middle = (low + high) // 2 // step * step
    return middle if low < middle < high else None


def _peak(summaries: Sequence[dict]) -> float | None:
    peaks = [s.get("peak_device_bytes", s.get("peak_rss_bytes")) for s in summaries]
    numbers = [float(p) for p in peaks if isinstance(p, (int, float)) and not isinstance(p, bool)]
    return max(numbers) if numbers and len(numbers) == len(summaries) else None


def judge(run_dir: Path, spec: RunSpec, status: RunStatus, value: int, cap_bytes: float | None) -> Trial:
    """Whether a trial's shape fitted: it completed and its busiest rank stayed within the cap; it did not where
    a rank ran out of memory (its error or the launcher's output says so) or passed the cap; anything else is
    a UsageError (a fault is not a size limit)."""
    folder = RunFolder(run_dir)
    records = {rank: read_records(folder.rank_log(rank), ParseStats()) for rank in range(spec.np)
               if folder.rank_log(rank).is_file()}
    errors = " ".join(str(r.get("message", "")) for rs in records.values() for r in rs if r.get("kind") == "error")
    summaries = [next((r for r in reversed(rs) if r.get("kind") == "summary"), None) for rs in records.values()]
    env: dict = next((r for r in records.get(0, []) if r.get("kind") == "env"), {})
    parameters = env.get("parameters") if isinstance(env.get("parameters"), int) else None
    if status.status == "ok" and len(summaries) == spec.np and all(summaries):
        peak = _peak(summaries)  # type: ignore[arg-type]
        if peak is None:
            return Trial(value, None, None, parameters, spec.id, "no peak memory recorded")
        over = cap_bytes is not None and peak > cap_bytes
        return Trial(value, not over, peak, parameters, spec.id, "over the memory cap" if over else "")
    said = f"{errors} {status.message} {status.tail}".lower()
    if any(words in said for words in OUT_OF_MEMORY) or status.returncode in (-9, 137):
        return Trial(value, False, None, parameters, spec.id, "out of memory")
    raise UsageError(f"fit: the trial {spec.id} failed for another reason than memory ({status.status}: "
                     f"{status.message or 'see its folder'}); no size judged")


def search(run_trial: Callable[[int], tuple[Path, RunSpec, RunStatus]], start: int, step: int, limit: int,
           cap_bytes: float | None, say: Callable[[str], None] = print) -> list[Trial]:
    """Run trials until ``next_value`` ends the search; each trial said as it ends."""
    trials: list[Trial] = []
    while len(trials) < MAX_TRIALS:
        value = next_value(trials, start, step, limit)
        if value is None:
            break
        run_dir, spec, status = run_trial(value)
        trials.append(judge(run_dir, spec, status, value, cap_bytes))
        last = trials[-1]
        say(f"fit: {value}: {'fits' if last.fits else 'does not fit' if last.fits is False else 'not judged'}"
            + (f", peak {gib(last.peak_bytes)} on the busiest rank" if last.peak_bytes is not None else "")
            + (f" ({last.why})" if last.why else ""))
        if last.fits is None:  # a trial that could not be judged would only be tried again
            break
    return trials


def gib(value: float | None) -> str:
    return "-" if value is None else f"{value / 2**30:.2f} GiB"


def fit_file(root: Path, exchange: str, np: int, grow: str) -> Path:
    """Where one search's result is kept in the output folder."""
    return root / f"fit-{exchange}-np{np}-{grow}.json"


def write_result(path: Path, facts: dict, trials: Sequence[Trial]) -> dict:
    """The search's result (the largest shape that fitted, every trial) as JSON beside the trials' runs."""
    fitted = [t for t in trials if t.fits]
    largest = max(fitted, key=lambda t: t.value) if fitted else None
    result = {**facts, "largest": asdict(largest) if largest else None, "trials": [asdict(t) for t in trials]}
    path.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return result


def summary_lines(root: Path) -> list[str]:
    """Every fit kept in the folder, one line each: exchange, ranks, the largest shape and its parameters."""
    lines = []
    for path in sorted(root.glob("fit-*.json")):
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
            largest, flag = result.get("largest"), str(result["flag"])
            shape = (f"largest {flag} {largest['value']} ({largest['parameters'] / 1e6:,.1f} M parameters, peak "
                     f"{gib(largest['peak_bytes'])})" if largest and largest.get("parameters") else "none fits")
            cap = result.get("cap_bytes")
            lines.append(f"{result['benchmark']} at {result['np']} rank(s), exchange {result['exchange']}"
                         f"{', cap ' + gib(cap) if cap else ''}: {shape}")
        except (OSError, ValueError, KeyError, TypeError):
            lines.append(f"{path.name}: not a fit result (not read)")
    return lines


def cap_bytes(gib_value: float | None) -> float | None:
    """--memory-cap (GiB, positive as its flag checks) in bytes; None without one."""
    return None if gib_value is None else gib_value * 2**30
