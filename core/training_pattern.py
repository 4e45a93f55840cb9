"""The training pattern of the collectives benchmark (``--pattern training --like RUN``): a training run's
own gradient tensors, in the order backward produces them, allreduced the way its step does (every tensor
enqueued to Horovod back to back, fused by Horovod's own fusion buffer and cycle, several steps in a row),
at the run's own total and scaled to each size of the curve. Framework-free: the sizes come from the run's
rank-0 env record (``gradient_sizes``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import UsageError
from .records import parse_line, rank_log_name
from .validate import regular_file

PATTERNS = ("isolated", "training")


def _first_env(log: Path) -> dict[str, Any] | None:
    """The log's first env record (written before any step), read no further than it."""
    regular_file(log)
    with open(log, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            try:
                record = parse_line(line)
            except ValueError:
                continue
            if record is not None and record.get("kind") == "env":
                return record
    return None


def read_like(like: str) -> tuple[list[int], str, str]:
    """The element count of each gradient tensor, in backward order, of the training run at ``like`` (its run
    folder or one of its rank logs), its run id and its workload (``cifar10 resnet20 batch 32``); a
    UsageError names what is missing."""
    path = Path(like)
    log = path / rank_log_name(0) if path.is_dir() else path
    try:
        env = _first_env(log)
    except ValueError as exc:  # not a regular file, or missing
        raise UsageError(f"--like {like}: {exc}") from None
    except OSError as exc:
        raise UsageError(f"--like {like}: cannot read {log}: {exc.strerror or exc}") from None
    if env is None:
        raise UsageError(f"--like {like}: {log} holds no env record: not the log of a training run")
    sizes = env.get("gradient_sizes")
    if not isinstance(sizes, list) or not sizes or not all(isinstance(n, int) and n > 0 for n in sizes):
        raise UsageError(f"--like {like}: its env record has no gradient_sizes (a collectives run, or a training run "
                         "logged before they were recorded): run the workload once more and name that run")
    flags = env.get("flags")
    batch = f" batch {flags['batch_size']}" if isinstance(flags, dict) and flags.get("batch_size") else ""
    run_id = str(env.get("run_id") or log.resolve().parent.name)
    return sizes, run_id, f"{env.get('benchmark')} {env.get('model')}{batch}"


def scaled(gradients: list[int], elements: int) -> list[int]:
    """The tensors scaled so that together they hold ``elements`` elements, each keeping its share (largest
    remainders rounded up; at least one element each, which may add a few where there are more tensors)."""
    total = sum(gradients)
    exact = [n * elements / total for n in gradients]
    counts = [max(1, int(e)) for e in exact]
    short = elements - sum(counts)
    for i in sorted(range(len(exact)), key=lambda i: exact[i] - int(exact[i]), reverse=True)[:max(0, short)]:
        counts[i] += 1
    return counts


def pattern_totals(gradients: list[int], min_bytes: int, max_bytes: int, factor: int, item: int) -> list[int]:
    """The step totals (elements) measured: the run's own, and each size of the curve that differs from it."""
    own = sum(gradients)
    out, value = {own}, min_bytes
    while value <= max_bytes:
        out.add(max(len(gradients), value // item))
        value *= factor
    return sorted(out)


def check_pattern_flags(flags: Any, default_ops: list[str], default_backends: list[str]) -> None:
    """--pattern training needs --like and measures allreduce through Horovod only (what training issues);
    fills in ``flags.gradient_sizes``, ``like_run`` and ``like_workload`` and sets ops and backends where not
    given."""
    if flags.pattern == "isolated":
        if flags.like is not None:
            raise UsageError("--like names the run whose gradients --pattern training issues: give --pattern training")
        flags.ops = flags.ops or default_ops
        flags.backends = flags.backends or default_backends
        return
    if flags.like is None:
        raise UsageError("--pattern training needs --like RUN: the training run whose gradient tensors to issue")
    if (flags.ops or ["allreduce"]) != ["allreduce"] or (flags.backends or ["horovod"]) != ["horovod"]:
        raise UsageError("--pattern training issues a training step's allreduces through Horovod: give no --ops "
                         "and --backends, or --ops allreduce --backends horovod")
    flags.ops, flags.backends = ["allreduce"], ["horovod"]
    flags.gradient_sizes, flags.like_run, flags.like_workload = read_like(flags.like)
