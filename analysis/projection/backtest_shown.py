"""``project --backtest`` run and said: every family of the results back-tested, backtest.csv written, the table
printed with what was left out and what each fit assumed, and the projection's track record on published results
(track_record.json) under it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from hvdbench.core.errors import ReportError
from hvdbench.core.validate import inert
from ..collect import collect
from ..document import csv_safe, text_table
from .allreduce_model import parse_link
from .backtest import TRACK_RECORD, Links, backtest_table, calibration, family_notes, predict
from .exchange_model import ALGORITHMS
from .families import families_of


def track_record_line(path: Path = TRACK_RECORD) -> str:
    """What the back-tests on published results found, in one sentence ("" where none was recorded)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        errors = [float(e) for e in data["largest_errors"]]
        held, points = int(data["held"]), int(data["points"])
    except (OSError, ValueError, KeyError, TypeError):
        return ""
    if not errors:
        return ""
    absolute = np.abs(errors)
    return (f"track record: on {len(errors)} published families, fitted on their two smallest sizes, this "
            f"projection's error at the largest size was {np.median(absolute):.1%} in the median (at most "
            f"{absolute.max():.0%}); its 95% intervals held {held} of {points} held-out sizes, each family's judged "
            f"on a calibration from the others ({data.get('source', '')})")


def _links(texts: Sequence[str]) -> list[tuple[str, Links]]:
    """Each --link as the link between nodes a what-if back-test uses."""
    out = []
    for text in texts:
        link = parse_link(text)
        out.append((link.name, Links(None, 1.0 / link.beta_s if link.beta_s > 0 else math.inf, link.alpha_s, "",
                                     f"--link {link.name}")))
    return out


def _cells(row: dict[str, Any]) -> list[str]:
    return [inert(str(row["system"])), inert(str(row["workload"])), str(row["nodes"]), str(row["gpus"]),
            str(row["batch_per_gpu"]), f"{row['measured']:,.0f}",
            f"{row['predicted']:,.0f} [{row['low']:,.0f}–{row['high']:,.0f}]", f"{row['error']:+.1%}",
            inert(str(row["algorithm"])), inert(str(row["network"]))]


def write_backtest(dirs: Sequence[Path], out: Path, fit_nodes: Sequence[int] | None = None,
                   links: Sequence[str] = (), algorithm: str | None = None) -> tuple[str, Path]:
    """Back-test every family under ``dirs``; backtest.csv into ``out``; the text printed and the file."""
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise ReportError(f"--algorithm {algorithm}: a back-test forces {' or '.join(ALGORITHMS)} (default: the one "
                          "NCCL would pick at each size)")
    what_if = _links(links)
    families, left_out = families_of(collect(dirs))
    rows = []
    for family in families:
        rows += predict(family, fit_nodes, forced=algorithm)
        for name, link in what_if:
            rows += predict(family, fit_nodes, forced=algorithm, links=link, network=f"--link {name}")
    if not rows:
        raise ReportError("nothing to back-test: no workload measured at three sizes or more on one system"
                          + (f" with sizes beyond --fit-nodes {','.join(map(str, fit_nodes))}" if fit_nodes else ""))
    table = backtest_table(rows)
    try:
        out.mkdir(parents=True, exist_ok=True)
        csv_safe(table).to_csv(out / "backtest.csv", index=False)
    except OSError as exc:
        raise ReportError(f"cannot write {out / 'backtest.csv'}: {exc.strerror}") from None
    cal = calibration()
    header = ["system", "workload", "nodes", "GPUs", "batch a GPU", "measured/s", "predicted [95%]", "error",
              "algorithm", "network"]
    notes = [f"{inert(system)} {inert(workload)}: {inert(note)}" for system, workload, note in family_notes(rows)]
    sizes = f"sizes {','.join(map(str, fit_nodes))}" if fit_nodes else "two smallest sizes"
    lines = [text_table(header, [_cells(r) for r in rows]), "",
             f"fitted on each family's {sizes}; the model's own error: {cal.per_doubling:.1%} a doubling beyond "
             f"them, {cal.per_batch_e:.1%} an e-fold of the batch ({inert(cal.source)})",
             *[f"left out: {inert(line)}" for line in left_out],
             *[f"assumed: {note}" for note in notes]]
    record = track_record_line()
    return "\n".join([*lines, *([record] if record else [])]), out / "backtest.csv"
