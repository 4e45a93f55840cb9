"""The report's outputs: its folder written whole (report.md, report.html, the decision page, plots, every table as
CSV and Parquet, decision.json, system.json) and its terminal text."""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

import pandas as pd

from hvdbench.core.errors import ReportError
from hvdbench.core.spec import RUN_FILE
from hvdbench.core.validate import inert

from .parts import PARTS
from ..collect import Collection
from ..document import ROLES, Report, csv_safe, render_markdown, text_table
from ..tables.system import system_json
from .html import render_html


def write(report: Report, out_dir: Path) -> dict[str, Path]:
    """report.md, report.html, plot-N.svg, and every table as CSV and Parquet: written whole into a folder
    beside ``out_dir``, which then takes its place, so a full disk leaves the earlier report (or none), never
    half of one. A folder that is not an earlier report (it holds runs, or other files) is never replaced."""
    if out_dir.exists() and (not out_dir.is_dir() or (any(out_dir.iterdir()) and not (out_dir / "report.md").is_file())
                             or next(out_dir.rglob(RUN_FILE), None) is not None):
        raise ReportError(f"cannot create the report directory {out_dir}: it exists and is not an earlier report "
                          "(it holds other files or runs); give -o an empty or new folder")
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    except OSError as exc:
        raise ReportError(f"cannot create the report directory {out_dir}: {exc.strerror}") from None
    try:
        _write_files(report, staging)
        if out_dir.is_dir():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        where = f" ({exc.filename})" if exc.filename else ""
        raise ReportError(f"cannot write the report into {out_dir}: {exc.strerror}{where}") from None
    paths = {"markdown": out_dir / "report.md", "html": out_dir / "report.html"}
    paths.update({name: out_dir / f"{name}.csv" for name in report.tables})
    return paths


def decision_page(report: Report) -> Report | None:
    """The decision between systems on a page of its own (decision.md and decision.html, one printed page for a
    few workloads): the verdicts, what one system measured alone, and each system's facts, those no run
    recorded left out; None for one system."""
    sections = [s for s in report.sections if s.role in ROLES]
    if not any(s.role == "decision" for s in sections):
        return None
    sections = [replace(s, rows=[r for r in s.rows if any(c != "-" for c in r[1:])])
                if s.role == "system" else replace(s, folded=()) for s in sections]  # every column shown
    intro = ("The decision page of the report beside it (report.md: every table, how each number was taken).")
    return Report(intro, sections, {}, {}, [], title="hvdbench: the decision between systems")


def _write_files(report: Report, folder: Path) -> None:
    (folder / "report.md").write_text(render_markdown(report) + "\n", encoding="utf-8")
    (folder / "report.html").write_text(render_html(report), encoding="utf-8")
    page = decision_page(report)
    if page is not None:
        (folder / "decision.md").write_text(render_markdown(page) + "\n", encoding="utf-8")
        (folder / "decision.html").write_text(render_html(page), encoding="utf-8")
    for i, svg in enumerate(report.plots.values()):
        (folder / f"plot-{i + 1}.svg").write_text(svg, encoding="utf-8")
    for section in report.sections:
        if section.figure is not None:
            (folder / section.figure[0]).write_text(section.figure[1], encoding="utf-8")
    if "decision" in report.tables:  # the verdicts as records, each with its finding as a field
        records = {name: json.loads(report.tables[name].to_json(orient="records"))
                   for name in ("decision", "weighted") if name in report.tables}
        (folder / "decision.json").write_text(json.dumps(records, indent=2) + "\n", encoding="utf-8")
    if "system" in report.tables:
        described = system_json(report.tables["system"])
        (folder / "system.json").write_text(json.dumps(described, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for name, data in report.tables.items():
        data = data.copy()
        data.attrs = {}  # in-memory companions (bootstrap resamples) are not part of the files
        csv_safe(data).to_csv(folder / f"{name}.csv", index=False)
        data.to_parquet(folder / f"{name}.parquet", index=False)


def _every_row(text: str) -> str:
    """A headline's "Same on every row: ..." sentence (the columns left out of its table), as a line of its own."""
    return inert(text.split(". ")[0].rstrip(".")) + ".\n" if text.startswith("Same on every row:") else ""


def terminal_text(report: Report, collection: Collection) -> str:
    """The headline tables, then what each part says on the terminal (its ``terminal`` hook, in PARTS' order), then
    what was left out."""
    texts = [f"{inert(s.title)}\n{_every_row(s.text)}{text_table(s.header, s.rows)}" for s in report.headline]
    said = [part.terminal(report) for part in PARTS if part.terminal is not None]
    texts += [block for one in said for block in one.blocks]
    notes = _collection_notes(collection) + [note for one in said for note in one.notes]
    return "\n\n".join(texts) + ("\n" + inert("; ".join(notes)) if notes else "")


def _collection_notes(collection: Collection) -> list[str]:
    """What the collection left out or could not read, one note each."""
    notes = []
    left_out = collection.runs[collection.runs["status"] != "ok"]
    if len(left_out):
        notes.append(f"{len(left_out)} run(s) left out (see report.md)")
    if collection.spec_errors:
        notes.append(f"{len(collection.spec_errors)} run director(y/ies) left out, unreadable: "
                     f"{collection.spec_errors[0][:200]}"
                     + (" (more in report.md)" if len(collection.spec_errors) > 1 else ""))
    inconsistent = collection.runs[collection.runs["status"] == "inconsistent"]
    if len(inconsistent):
        notes.append(f"{len(inconsistent)} run(s) inconsistent and left out: {inconsistent['reason'].iloc[0][:200]}")
    damaged = _damaged(collection.runs)
    if damaged:
        notes.append(damaged)
    malformed = sum(i.malformed for i in collection.file_issues)
    if malformed:
        notes.append(f"{malformed} malformed log line(s) in {len(collection.file_issues)} file(s)")
    return notes


def _damaged(runs: pd.DataFrame) -> str | None:
    """The corrupt or vanished samples the runs met reading their files (training or the pipeline alone), in words."""
    if "data_corrupt" not in runs or runs.empty:
        return None
    counts = pd.to_numeric(runs["data_corrupt"], errors="coerce").fillna(0)
    hit = runs[counts > 0]
    if hit.empty:
        return None
    named = next((str(n).split(";")[0][:160] for n in hit.get("data_named", pd.Series(dtype=str)).dropna() if n), "")
    return (f"{int(counts.sum()):,} corrupt or vanished sample(s) met reading files in {len(hit)} run(s)"
            + (f" (first: {named})" if named else "") + ": their figures rest on what could be read (see report.md)")
