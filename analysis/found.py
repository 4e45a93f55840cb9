"""Where the runs are: every run folder under the results roots once, however many roots reach it, with its RunSpec
and the id of its row. A run's row is its spec's id; where several roots hold runs of one id (the same sweep run
every night, each night into its own root) each is a measurement of its own, and the rows of every root but the first
given are told apart by their root (``<run id>@<root>``): a month of nightly folders reads, and records, as a month
of runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from hvdbench.core.errors import ReportError, SpecError
from hvdbench.core.records import RANK_LOGS
from hvdbench.core.spec import ATTEMPT_PREFIX, RUN_FILE, RunSpec

from .copies import one_copy_each


@dataclass(frozen=True)
class Found:
    """One run folder: its results root, its folder, its spec and its row's id."""

    root: Path
    run_dir: Path
    spec: RunSpec
    row_id: str


def find_runs(roots: Iterable[Path]) -> list[tuple[Path, Path]]:
    """(root, run directory) for every run.json below the roots, each run once however many roots reach
    it (the same root given twice, or a root inside another); a bad root is a ReportError."""
    found: dict[Path, tuple[Path, Path]] = {}
    for root in roots:
        if not root.exists():
            raise ReportError(f"results directory {root} does not exist")
        if not root.is_dir():
            raise ReportError(f"{root} is not a directory")
        try:
            for path in sorted(root.rglob(RUN_FILE)):
                if not any(part.startswith(ATTEMPT_PREFIX) for part in path.relative_to(root).parts[:-1]):
                    found.setdefault(path.parent.resolve(), (root, path.parent))
        except PermissionError as exc:
            raise ReportError(f"cannot read {exc.filename}: permission denied") from None
    return list(found.values())


def _row_ids(specs: list[tuple[Path, Path, RunSpec]]) -> list[Found]:
    """Each run's row id: its spec's id, and where an earlier root holds a run of that id, its root's name beside it
    (its path from the first such root where two roots share a name)."""
    roots = list(dict.fromkeys(root for root, _, _ in specs))
    names = [root.name or str(root) for root in roots]
    label = {root: (name if names.count(name) == 1 else f"{name}-{i}") for i, (root, name) in
             enumerate(zip(roots, names))}
    first: dict[str, Path] = {}
    out = []
    for root, run_dir, spec in specs:
        owner = first.setdefault(spec.id, root)
        out.append(Found(root, run_dir, spec, spec.id if owner == root else f"{spec.id}@{label[root]}"))
    return out


def read_specs(roots: list[Path]) -> tuple[list[Found], list[str]]:
    """Every run directory's RunSpec under the roots, and one line for each rank-log folder without a readable
    run.json (left out)."""
    found = find_runs(roots)
    described = {run_dir.resolve() for _, run_dir in found}
    errors: list[str] = []
    for root in roots:
        orphans = sorted({log.parent for log in root.rglob(RANK_LOGS)
                          if log.parent.resolve() not in described
                          and not any(part.startswith(ATTEMPT_PREFIX) for part in log.relative_to(root).parts)})
        errors += [f"{orphan}: rank logs without a {RUN_FILE} (not a run hvdbench or its scripts wrote "
                   "completely); left out" for orphan in orphans]
    specs: list[tuple[Path, Path, RunSpec]] = []
    for root, run_dir in found:
        try:
            specs.append((root, run_dir, RunSpec.read(run_dir / RUN_FILE)))
        except SpecError as exc:
            errors.append(str(exc))
    kept, errors = one_copy_each(specs, errors)
    return _row_ids(kept), errors
