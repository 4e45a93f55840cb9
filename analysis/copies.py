"""A run counted once: where two folders hold the same run (a backup copy, a copied run.json) one is read and the
others named; where two runs' measurements are one another's (a folder copied under a new repeat, a root
relabelled as another system) the copy is left out as inconsistent, naming the run it copies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hvdbench.core.errors import ReportError
from hvdbench.core.spec import RunFolder, RunSpec
from hvdbench.core.validate import inert


def one_copy_each(specs: list[tuple[Path, Path, RunSpec]],
                   errors: list[str]) -> tuple[list[tuple[Path, Path, RunSpec]], list[str]]:
    """A run is its id: where two folders of one results root hold the same run (a backup copy, a copied run.json),
    one is read and each other one is left out with a line saying which copy was used and why; never a second
    repeat. Two results roots that hold the same run id are two measurements (two vendors' runs that both kept the
    default --system), never copies: a ReportError saying so, never a root dropped."""
    by_id: dict[str, list[tuple[Path, Path, RunSpec]]] = {}
    for item in specs:
        by_id.setdefault(item[2].id, []).append(item)
    kept = []
    for run_id, copies in by_id.items():
        roots = list(dict.fromkeys(root for root, _, _ in copies))
        if len(roots) > 1:
            system = copies[0][2].system
            raise ReportError(f"results roots {inert(roots[0])} and {inert(roots[1])} both hold run {run_id} (system "
                              f"{inert(system)!r}): runs of two roots are two measurements, not copies; give each "
                              "root its own --system when running it (hvdbench run … --system NAME), or report them "
                              "one at a time")
        ranked = sorted(copies, key=lambda c: _copy_rank(c[1], run_id))
        kept.append(ranked[0])
        why = _copy_why(ranked[0][1], run_id)
        errors += [f"{other[1]}: a copy of run {run_id} (the same run id); {ranked[0][1]} is used ({why})"
                   for other in ranked[1:]]
    return kept, errors


def _copy_rank(run_dir: Path, run_id: str) -> tuple[int, int, int, str]:
    """How good a copy of a run is, best first: the folder the executors name it by, complete by its own
    status, with the most rank logs, then by path (stable)."""
    folder = RunFolder(run_dir)
    status = folder.status
    return (run_dir.name != run_id, not (status is not None and status.status == "ok"), -len(folder.rank_logs()),
            str(run_dir))


def _copy_why(run_dir: Path, run_id: str) -> str:
    folder = RunFolder(run_dir)
    reasons = ["its folder is named by the run id"] if run_dir.name == run_id else []
    if folder.status is not None and folder.status.status == "ok":
        reasons.append("it recorded its end as ok")
    reasons.append(f"it holds {len(folder.rank_logs())} rank log(s)")
    return ", ".join(reasons)


COPY_TOLERANCE = 1e-6  # relative: two measurements never agree on every step time this closely; a copy does


def copied_runs(runs: list[dict[str, Any]], measured: list[np.ndarray]) -> None:
    """Runs whose measurements (every rank's step times, every collective's times, when each evaluation came, in their
    order) are another run's within COPY_TOLERANCE are copies, whatever their folder, repeat number, system label or
    results root (a folder copied under a new repeat, a root copied and relabelled as another system, times shifted
    by a picosecond): each
    is left out as inconsistent, naming the run it copies, which is kept (the first in the order the roots were
    given). A copy would narrow an interval over repeats to nothing, or judge a system against itself. Series without
    any variation carry no fingerprint (no measurement is that steady) and are never taken for copies, nor are runs
    on other hosts or placements (an imported output's rounded times may agree between two pairs of nodes; a copy
    keeps the hosts it was measured on)."""
    kept: dict[tuple[Any, ...], list[tuple[float, np.ndarray, dict[str, Any]]]] = {}
    for row, values in zip(runs, measured):
        if row["status"] != "ok" or len(values) < 2 or np.ptp(values) <= COPY_TOLERANCE * float(np.abs(values).max()):
            continue
        total = float(values.sum())
        same = kept.setdefault((len(values), str(row.get("host")), str(row.get("placement"))), [])
        original = next((other for other_total, other_values, other in same
                         if abs(other_total - total) <= COPY_TOLERANCE * abs(total)
                         and np.allclose(values, other_values, rtol=COPY_TOLERANCE, atol=0.0)), None)
        if original is None:
            same.append((total, values, row))
            continue
        where = (f"system {original['system']!r}, {original['root']}" if original["root"] != row["root"] else
                 f"system {original['system']!r}" if original["system"] != row["system"] else "the same root")
        row["status"] = "inconsistent"
        row["reason"] = (f"inconsistent: its measurements are those of run {original['run_id']} ({inert(where)}) "
                         f"within 1 part in {1 / COPY_TOLERANCE:,.0f}: a copy, not a measurement of its own")
