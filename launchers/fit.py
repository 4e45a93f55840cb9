"""The largest model a rank count can train (``hvdbench run lm --fit``): grow a model's depth or width from the
shape given, one short real run per shape, until a run fails for lack of memory or its busiest rank's peak
memory passes ``--memory-cap``; then bisect between the largest shape that fitted and the smallest that did
not. Run once per exchange into one output folder (``--exchange horovod``, then ``fsdp``), the folder's fit
files side by side answer the buyer's question of an 80 GB against a 48 GB GPU: how large a model trains
sharded against as replicas.

A sweep file's ``fit:`` block runs one search per configuration and rank count the sweep plans (``sweep_fits``).
Building a trial and judging it are pure (``trial_args``, ``next_value``, ``judge``); running is ``search``."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from hvdbench.core.run_flags import without
from hvdbench.core.catalog import get_benchmark
from hvdbench.core.errors import UsageError
from hvdbench.core.options import Choice, Number, Whole, option
from hvdbench.core.records import ParseStats, read_records
from hvdbench.core.spec import RunFolder, RunSpec, RunStatus

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
class FitOptions:
    """A sweep file's ``fit:`` block and hvdbench run's --fit flags: what to grow, the memory cap (GiB; required on the
    CPU), the largest value."""

    grow: str = option("layers", Choice(("layers", "width")), "what grows: depth (--layers) or width (--width, in "
                                                              "multiples of --heads)", flag="--fit-grow")
    memory_cap_gib: float | None = option(
        None, Number(unit="GiB", most=1024 * 1024, beyond="more than a PiB (1048576 GiB); give GiB, e.g. 70"),
        "a shape fits only while its busiest rank's peak memory stays within GIB (device memory on a GPU, resident "
        "set on the CPU); needed on the CPU, where running out means the kernel's OOM killer", flag="--memory-cap",
        metavar="GIB")
    limit: int = option(4096, Whole(), "the largest value tried", flag="--fit-limit", metavar="N")


@dataclass(frozen=True)
class Seed:
    """One search of a sweep: the planned run it grows from, its flag, first value and step, and its file."""

    spec: RunSpec
    flag: str
    start: int
    step: int
    exchange: str
    on_cpu: bool
    path: Path


def seeds(specs: Sequence[RunSpec], baselines: frozenset[str], root: Path, options: FitOptions,
          here_gpus: int | None, need_cap: bool = True) -> list[Seed]:
    """The searches of a planned sweep: each configuration and rank count once (its first repeat; no 1-rank
    baselines), each with its own result file; two that would share a file, or (``need_cap``: before running) a
    CPU search without a cap, are a UsageError."""
    out: list[Seed] = []
    for spec in (s for s in specs if s.repeat == 0 and s.id not in baselines):
        flags = get_benchmark(spec.benchmark).check(list(spec.args))
        flag = grown_flag(spec.benchmark, options.grow)
        on_cpu = flags.device == "cpu" or not here_gpus
        if need_cap and on_cpu and options.memory_cap_gib is None:
            raise UsageError("--fit on the CPU needs --memory-cap GIB (a sweep file's fit.memory_cap_gib): running "
                             "out of host memory ends in the kernel's OOM killer, not in an error a trial can read")
        path = fit_file(root, flags.exchange, spec.np, options.grow)
        if any(seed.path == path for seed in out):
            raise UsageError(f"fit: two searches would both be {path.name} (they differ in another axis or launcher); "
                             "keep one value of the others")
        out.append(Seed(spec, flag, getattr(flags, options.grow), flags.heads if options.grow == "width" else 1,
                        flags.exchange, on_cpu, path))
    return out


def run_seed(seed: Seed, options: FitOptions, execute: Callable[[RunSpec], RunStatus], root: Path,
             say: Callable[[str], None] = print) -> dict:
    """One search from its seed (``execute`` runs a trial's spec and returns its status); its result file."""
    def trial(value: int) -> tuple[Path, RunSpec, RunStatus]:
        spec = replace(seed.spec, args=trial_args(seed.spec.args, seed.flag, value))
        return root / spec.id, spec, execute(spec)

    say(f"fit: {seed.spec.benchmark} at {seed.spec.np} rank(s), exchange {seed.exchange}: {seed.flag} from "
        f"{seed.start}")
    cap = cap_bytes(options.memory_cap_gib)
    trials = search(trial, seed.start, seed.step, options.limit, cap, say)
    facts: dict[str, Any] = {
        "benchmark": seed.spec.benchmark, "exchange": seed.exchange, "np": seed.spec.np, "grow": options.grow,
        "flag": seed.flag, "start": seed.start, "cap_bytes": cap, "args": list(seed.spec.args),
        "launcher": seed.spec.launcher, "memory": f"peak resident set per rank ({CPU_ALLOCATOR_TEXT})"
        if seed.on_cpu else "peak device memory allocated per rank"}
    return write_result(seed.path, facts, trials)


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
