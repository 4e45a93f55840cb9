"""A run counted once: where two folders hold the same run (a backup copy, a copied run.json) one is read and the
others named; where two runs' measurements are one another's (a folder copied under a new repeat, a root
relabelled as another system) the copy is left out as inconsistent, naming the run it copies."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from hvdbench.core.spec import RunFolder, RunSpec
from hvdbench.core.validate import inert


def one_copy_each(specs: list[tuple[Path, Path, RunSpec]],
                   errors: list[str]) -> tuple[list[tuple[Path, Path, RunSpec]], list[str]]:
    """A run is its id within a results root: where two folders of one root hold the same run (a backup copy, a copied
    run.json), one is read and each other one is left out with a line saying which copy was used and why; never a
    second repeat. Runs of one id in two results roots are two measurements (the same sweep on two nights), both
    kept (analysis/found.py tells their rows apart); a root copied whole is caught by its measurements
    (``copied_runs``)."""
    by_id: dict[tuple[Path, str], list[tuple[Path, Path, RunSpec]]] = {}
    for item in specs:
        by_id.setdefault((item[0], item[2].id), []).append(item)
    kept = []
    for (_, run_id), copies in by_id.items():
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


DIGITS = 6  # significant digits a measurement is hashed at (its digest: what an execution is known by)


def measurement_digest(run_id: str, status: str, values: np.ndarray | None, started: Any = None) -> str:
    """A run's measurements (every rank's step times, collectives' times, evaluations' times, in order) at DIGITS
    significant digits, hashed: what the run is known by wherever its root moves; a run with no measurement of its
    own is told by its id, status and start."""
    if values is None or len(values) == 0:
        return "id:" + hashlib.sha256(f"{run_id}\0{status}\0{started}".encode()).hexdigest()
    text = np.char.mod(f"%.{DIGITS - 1}e", np.asarray(values, dtype=float))
    return "m:" + hashlib.sha256("\n".join(text.tolist()).encode()).hexdigest()


def execution_key(run_id: str, digest: str) -> str:
    """An execution's identity: its run id and what it measured (the history store's key; a verdict's seed)."""
    return f"{run_id}~{digest.split(':', 1)[-1][:12]}"


def run_keys(runs: pd.DataFrame, measured: Mapping[str, np.ndarray]) -> dict[str, str]:
    """Each run row's execution key (``measured``: each row's measurements, as the collector keeps them)."""
    return {str(row["run_id"]): execution_key(str(row["run_id"]), measurement_digest(
        str(row["run_id"]), str(row["status"]), measured.get(str(row["run_id"])),
        row.get("started") if not pd.isna(row.get("started")) else None))
        for row in runs[["run_id", "status", "started"]].to_dict("records")}


COPY_TOLERANCE = 1e-6  # relative: two measurements never agree on every step time this closely; a copy does
SAMPLE = 64  # values a fingerprint keeps, evenly spaced through the series (with their count and their sum)


@dataclass(frozen=True)
class Fingerprint:
    """What a run measured, as the one copy rule compares it (the report's copies, the history store's): how many
    values (every rank's step times, every collective's times, when each evaluation came), their sum, and SAMPLE of
    them evenly spaced."""

    count: int
    total: float
    sample: tuple[float, ...]

    def text(self) -> str:
        return json.dumps([self.count, repr(self.total), [repr(v) for v in self.sample]])

    @classmethod
    def from_text(cls, text: Any) -> "Fingerprint | None":
        """A fingerprint kept as text; None where there is none or it is not one."""
        if not isinstance(text, str):
            return None
        try:
            count, total, sample = json.loads(text)
            return cls(int(count), float(total), tuple(float(v) for v in sample))
        except (TypeError, ValueError):
            return None


def fingerprint(values: np.ndarray) -> Fingerprint | None:
    """A run's fingerprint; None for a series without any variation (no measurement is that steady: it carries
    none, and is never taken for a copy)."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2 or np.ptp(values) <= COPY_TOLERANCE * float(np.abs(values).max()):
        return None
    picked = values[np.unique(np.linspace(0, len(values) - 1, min(len(values), SAMPLE)).astype(int))]
    return Fingerprint(len(values), float(values.sum()), tuple(float(v) for v in picked))


def same_measurement(a: Fingerprint, b: Fingerprint) -> bool:
    """The one copy rule: as many values, and their sum and every sampled value within COPY_TOLERANCE (relative)."""
    return a.count == b.count and abs(a.total - b.total) <= COPY_TOLERANCE * abs(a.total) and \
        len(a.sample) == len(b.sample) and bool(np.allclose(a.sample, b.sample, rtol=COPY_TOLERANCE, atol=0.0))


def copied_runs(runs: list[dict[str, Any]], measured: list[np.ndarray]) -> None:
    """Runs whose measurements are another run's by the copy rule (``same_measurement``) are copies, whatever their
    folder, repeat number, system label or results root (a folder copied under a new repeat, a root copied and
    relabelled as another system, times shifted by a picosecond): each is left out as inconsistent, naming the run it
    copies, which is kept (the first in the order the roots were given). A copy would narrow an interval over repeats
    to nothing, or judge a system against itself. A series without variation carries no fingerprint, and runs on
    other hosts or placements are never copies of each other (an imported output's rounded times may agree between
    two pairs of nodes; a copy keeps the hosts it was measured on)."""
    kept: dict[tuple[Any, ...], list[tuple[Fingerprint, dict[str, Any]]]] = {}
    for row, values in zip(runs, measured):
        mine = fingerprint(values) if row["status"] == "ok" else None
        if mine is None:
            continue
        same = kept.setdefault((mine.count, str(row.get("host")), str(row.get("placement"))), [])
        original = next((other for theirs, other in same if same_measurement(mine, theirs)), None)
        if original is None:
            same.append((mine, row))
            continue
        where = (f"system {original['system']!r}, {original['root']}" if original["root"] != row["root"] else
                 f"system {original['system']!r}" if original["system"] != row["system"] else "the same root")
        row["status"] = "inconsistent"
        row["reason"] = (f"inconsistent: its measurements are those of run {original['run_id']} ({inert(where)}) "
                         f"within 1 part in {1 / COPY_TOLERANCE:,.0f}: a copy, not a measurement of its own")
