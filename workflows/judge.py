"""The judging workflows: the report of results roots, the decision between systems, a buyer's criteria and OLD
against NEW, each verdict kept in the history store with the runs behind it (analysis/history/verdicts.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

from hvdbench.analysis.collect import Collection
from hvdbench.analysis.selection import LEFT_OUT
from hvdbench.analysis.history.verdicts import OUTCOMES, REGRESSION_OUTCOMES, keep_verdict, sides, verdict_of
from hvdbench.analysis.verdicts.judging import Judging
from hvdbench.core.errors import HvdbenchError, UsageError
from hvdbench.core.spec import RUN_FILE, RunSpec
from hvdbench.core.validate import inert

from .outcome import Outcome


def report(dirs: Sequence[Path], output: Path | None = None, *, warmup: int | None = None, systems: bool = False,
           peaks: Path | None = None, judging: Judging | None = None, store: str | None = None,
           collection: Collection | None = None) -> Outcome:
    """The report of results roots and its headline tables (``systems``: the decision between systems, recorded in
    the history ``store``; ``collection``: the roots read already)."""
    from hvdbench.analysis.report.build import build_report

    if systems and len(dirs) < 2:
        raise UsageError("hvdbench compare: give two or more results roots (one per system)")
    if systems and len({Path(d).resolve() for d in dirs}) < len(dirs):
        raise UsageError("hvdbench compare: a results root is given twice: nothing to compare it with")
    out = output or (Path(dirs[0]) / "report")
    judged: dict[str, Any] = {}
    text, paths = build_report(list(dirs), out, warmup=warmup, peaks=peaks, judging=judging, collection=collection,
                               extend=(lambda r, c: _two_systems(r, c, judged)) if systems else None)
    outcome = Outcome().say(text).say(f"report: {paths['html']} and {paths['markdown']} (tables as CSV and Parquet "
                                      f"in {out})")
    if systems and judged.get("decision") is not None:
        table = judged["decision"]
        found = table["finding"].value_counts() if "finding" in table else {}
        said = ", ".join(f"{count} {finding}" for finding, count in sorted(dict(found).items())) or "nothing judged"
        outcome.heard(keep_verdict(verdict_of("compare", said, dirs, table, sides(judged["runs"])), store))
    return outcome


def _two_systems(report: Any, collection: Collection, judged: dict[str, Any]) -> str:
    """compare's check before its report is written: the results hold two systems or more; the decision and the
    runs behind it kept in ``judged``."""
    judged.update(decision=report.tables.get("decision"),
                  runs=collection.runs[collection.runs["status"] != LEFT_OUT])  # a run left out by time: not behind it
    found = sorted(set(collection.runs["system"]))
    if len(found) < 2:
        unread = (f"; {len(collection.spec_errors)} run folder(s) could not be read ({inert(collection.spec_errors[0])}"
                  f"{', …' if len(collection.spec_errors) > 1 else ''})" if collection.spec_errors else "")
        raise UsageError(f"hvdbench compare: the results hold one system ({inert(', '.join(found))}): nothing to "
                         f"compare; give each offer's runs their own --system (hvdbench run … --system NAME){unread}")
    return ""


def first_system(root: Path) -> str | None:
    """The system label of the first results root given to compare (its first readable run), the default
    baseline; None where it holds none."""
    for path in sorted(Path(root).rglob(RUN_FILE)) if Path(root).is_dir() else []:
        try:
            return RunSpec.read(path).system
        except HvdbenchError:
            continue
    return None


def accept(criteria_file: Path, dirs: Sequence[Path], output: Path | None, *, warmup: int | None,
           peaks: Path | None, judging: Judging, store: str | None) -> Outcome:
    """Judge a buyer's criteria: the report with its Acceptance section, acceptance.txt for a protocol, the verdict
    kept; exit status 0 all pass, 1 any fail, 4 not judged."""
    from hvdbench.analysis.document import Section, text_table
    from hvdbench.analysis.report.build import build_report
    from hvdbench.analysis.verdicts import acceptance
    from hvdbench.analysis.verdicts.criteria import load_criteria

    criteria = load_criteria(criteria_file)  # a bad criteria file is one line before any results
    out = output or (Path(dirs[0]) / "report")
    said: dict[str, Any] = {}

    def extend(report: Any, collection: Collection) -> str:
        table = acceptance.judge(criteria, report.tables, collection, judging)
        report.tables["acceptance"] = table
        header, rows = acceptance.rows(table)
        report.sections.insert(0, Section("Acceptance", acceptance.SECTION_TEXT, header, rows))
        said.update(table=table, protocol=acceptance.protocol(criteria_file, table, collection,
                                                              time.strftime("%Y-%m-%d")), runs=collection.runs)
        return "\n\nacceptance\n" + text_table(header, rows)

    text, paths = build_report(list(dirs), out, warmup=warmup, peaks=peaks, extend=extend, judging=judging)
    try:
        (out / "acceptance.txt").write_text(said["protocol"], encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {out / 'acceptance.txt'}: {exc.strerror}") from None
    status = acceptance.exit_status(said["table"])
    outcome = Outcome(status).say(text).say(f"acceptance: {paths['acceptance']}, {out / 'acceptance.txt'} and the "
                                            "report's Acceptance section")
    verdict = verdict_of("accept", OUTCOMES[status], dirs, said["table"], sides(said["runs"], "judged"))
    return outcome.heard(keep_verdict(verdict, store))


def regressions(old: Path, new: Path, output: Path | None, *, margin: float, warmup: int | None, min_runs: int,
                borrow_spread: bool, store: str | None) -> Outcome:
    """OLD against NEW, configuration by configuration, the verdict kept; exit status 1 on any regression."""
    from hvdbench.analysis.verdicts.regression import compare_results, exit_status

    out = output or (Path(new) / "report")
    text, paths, table = compare_results(old, new, out, margin, warmup, min_runs, borrow_spread)
    status = exit_status(table)
    outcome = Outcome(status).say(text).say(f"regressions: {paths['markdown']} and {paths['csv']}")
    verdict = verdict_of("regressions", REGRESSION_OUTCOMES[status], [old, new], table, table.attrs["runs"])
    return outcome.heard(keep_verdict(verdict, store))
