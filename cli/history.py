"""``hvdbench history [list|aggregate|check|compare|publish|import|verdicts]``: the runs the history store keeps across
results roots and months, selected by system, host, workload, size, status, time and tags; each configuration checked
for change against its own history, two selections compared, a static site published, the verdicts made on them
listed; as a table, CSV or JSON."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pandas as pd
from hvdbench.analysis.document import csv_safe, text_table
from hvdbench.analysis.history.check import check_table, exit_status, summary
from hvdbench.analysis.history.compare import compare_table, side
from hvdbench.analysis.history.query import Selection, aggregate, moment, select
from hvdbench.analysis.history.recording import record_roots
from hvdbench.analysis.history.store import location, open_store, redacted
from hvdbench.analysis.history.verdicts import accepted_keys
from hvdbench.core.errors import UsageError
from hvdbench.core.flags import percent, positive_int
from hvdbench.core.metrics import MARGIN_PCT, MIN_RUNS
from hvdbench.core.tags import tag_pair, tags_of
from hvdbench.core.validate import inert

from .flags import label, store_flag

SHOWN = ("started", "system", "benchmark", "model", "np", "status", "throughput", "interval", "unit", "host", "run_id")


def cmd_history(args: argparse.Namespace) -> int:
    """List, aggregate, check, compare, publish or import; 0 when done (an empty selection is a result, said in
    one line); check and compare exit 1 on a regression, 4 where a configuration is not judged or undecided."""
    url = location(args.store)
    if url is None:
        raise UsageError("history: the store is turned off (--store off or HVDBENCH_STORE=off)")
    if args.action == "import":
        if not args.roots:
            raise UsageError("history import: name one or more results roots")
        missing = [str(root) for root in args.roots if not root.is_dir()]
        if missing:
            raise UsageError(f"history import: {inert(missing[0])}: no such results root")
        done = record_roots(args.roots, url, tags_of(args.tag))
        print(f"history: {done.text()} in {inert(redacted(url))}")
        return 0
    if args.action == "publish":
        if len(args.roots) != 1:
            raise UsageError("history publish: name the one folder the site goes into")
    elif args.roots:
        raise UsageError(f"history {args.action}: results roots go with history import")
    if args.action != "compare" and (args.a or args.b):
        raise UsageError(f"history {args.action}: --a and --b go with history compare")
    if args.action == "compare":
        return _compare(url, args)
    if args.action == "verdicts":
        return _verdicts(url, args)
    with open_store(url, create=False) as store:
        runs = select(store, _selection(args))
        accepted = accepted_keys(store) if args.action in ("check", "publish") else set()
    if args.action == "publish":
        from hvdbench.analysis.history.publish import publish

        pages = publish(runs, args.roots[0], args.margin / 100, accepted)
        print(f"history: {len(pages) - 1} configuration page(s) and the index in {inert(str(args.roots[0]))}: "
              f"{inert(str(pages[0]))}")
        return 0
    table = aggregate(runs) if args.action == "aggregate" else check_table(runs, args.margin / 100, accepted) \
        if args.action == "check" else runs
    if not len(table):
        print(f"history: no run in {inert(redacted(url))} matches", file=sys.stderr)
        return 4 if args.action == "check" else 0
    _print(table, args.format, args.action)
    if args.action == "check":
        if args.format == "table":
            print(summary(table))
        status = exit_status(table)
        _keep_check(url, table, runs, status)
        return status
    return 0


CHECK_OUTCOMES = {0: "no regression", 1: "regression", 4: "not judged"}


def _keep_check(url: str, table: Any, runs: Any, status: int) -> None:
    """history check's findings kept in the store beside accept's and compare's, with the runs it judged."""
    from hvdbench.analysis.history.verdicts import record_verdict, verdict_of

    if not len(table):
        return
    kept = table.drop(columns=[c for c in ("change_started",) if c in table], errors="ignore")
    said = [("history", str(k)) for k in runs["run_key"]] if "run_key" in runs else []
    with contextlib.redirect_stdout(sys.stderr):  # the check's own output stays the table a script reads
        record_verdict(verdict_of("check", CHECK_OUTCOMES.get(status, str(status)), [redacted(url)], kept, said),
                       url)


def _compare(url: str, args: argparse.Namespace) -> int:
    """Two selections against each other: 1 where B is slower on any configuration, 4 where any is undecided or
    not judged, else 0 (the exit statuses of compare --regressions)."""
    if not args.a or not args.b:
        raise UsageError("history compare: give both sides, e.g. --a system=dgx-a --b system=dgx-b, or --a "
                         "since=60d,until=30d --b since=30d")
    base = _selection(args)
    with open_store(url, create=False) as store:
        a, b = select(store, side(args.a, base)), select(store, side(args.b, base))
    shared = set(a["run_key"]) & set(b["run_key"])
    if shared:
        a, b = a[~a["run_key"].isin(shared)], b[~b["run_key"].isin(shared)]
        if not len(a) or not len(b):
            raise UsageError(f"history compare: every run of side {'A' if not len(a) else 'B'} is also on the other "
                             f"side ({len(shared)} shared): a selection is not judged against itself; give sides "
                             "that do not overlap (--a until=… --b since=…)")
        print(f"history compare: {len(shared)} run(s) on both sides are left out of both: each side is judged on "
              "the runs it alone holds", file=sys.stderr)
    table = compare_table(a, b, args.margin / 100, args.min_runs)
    if not len(table):
        print(f"history compare: no configuration has complete runs on both sides ({len(a)} run(s) on A, {len(b)} "
              "on B)", file=sys.stderr)
        return 4
    if args.format != "table":
        _print(table, args.format, "compare")
    else:
        rows = [[_text(r.benchmark), _text(r.model), _text(r.np), f"{r.runs_a} / {r.runs_b}",
                 f"{_number(r.throughput_a)} | {_number(r.throughput_b)}",
                 "-" if pd.isna(r.ratio_low) else f"{r.ratio:.3f} [{r.ratio_low:.3f}–{r.ratio_high:.3f}]",
                 _text(r.verdict), _text(r.differs) or "-"] for r in table.itertuples()]
        print(text_table(["benchmark", "model", "np", "runs A / B", "throughput A | B", "B / A", "finding",
                          "environment A | B"], rows))
    findings = set(table["finding"])
    return 1 if "slower" in findings else 4 if findings & {"undecided", "not judged"} else 0


def _verdicts(url: str, args: argparse.Namespace) -> int:
    """The verdicts kept (accept, compare, compare --regressions), newest first, with the runs behind each."""
    from hvdbench.analysis.history.verdicts import list_verdicts

    with open_store(url, create=False) as store:
        table = list_verdicts(store, args.kind, args.run, args.since)
    if not len(table):
        print(f"history: no verdict in {inert(redacted(url))} matches", file=sys.stderr)
        return 0
    if args.format != "table":
        _print(table, args.format, "verdicts")
        return 0
    rows = [[_when(r.made), _text(r.kind), _text(r.outcome), str(r.runs), ", ".join(map(str, r.roots)),
             str(r.verdict_id)[:12]] for r in table.itertuples()]
    print(text_table(["made", "kind", "outcome", "runs", "results roots", "verdict"], rows))
    return 0


def _selection(args: argparse.Namespace) -> Selection:
    return Selection(system=args.system, host=args.host, benchmark=args.benchmark, model=args.model, np=args.np,
                     status=args.status, since=None if args.since is None else moment(args.since),
                     until=None if args.until is None else moment(args.until),
                     tags=tuple(tag_pair(t) for t in args.tag))


def _when(value: Any) -> str:
    return "-" if pd.isna(value) else datetime.fromtimestamp(float(value), timezone.utc).strftime("%Y-%m-%d %H:%M")


def _text(value: Any) -> str:
    return "-" if value is None or pd.isna(value) else str(value)


def _number(value: Any) -> str:
    return "-" if pd.isna(value) else f"{float(value):,.4g}" if abs(float(value)) < 1000 else f"{float(value):,.0f}"


def _print(table: pd.DataFrame, form: str, action: str) -> None:
    """The table as text, CSV (cells made safe for a spreadsheet) or JSON records."""
    if form == "json":
        records = json.loads(table.to_json(orient="records"))
        json.dump(records, sys.stdout, indent=1)
        print()
    elif form == "csv":
        flat = table.copy()
        for column in ("environment", "tags", "roots", "detail", "run_ids"):
            if column in flat:
                flat[column] = [json.dumps(v, sort_keys=True) for v in flat[column]]
        csv_safe(flat).to_csv(sys.stdout, index=False)
    elif action == "check":
        rows = [[_text(r.system), _text(r.benchmark), _text(r.model), _text(r.np), str(r.runs),
                 "-" if pd.isna(r.change_started) else f"{_when(r.change_started)} ({_text(r.change_run)})",
                 "-" if pd.isna(r.ratio_low) else f"{r.ratio:.3f} [{r.ratio_low:.3f}–{r.ratio_high:.3f}]",
                 _text(r.verdict), _text(r.changed) or "-"] for r in table.itertuples()]
        print(text_table(["system", "benchmark", "model", "np", "runs", "latest change (first run after)",
                          "after / before", "finding", "environment changed then"], rows))
    elif action == "aggregate":
        rows = [[_text(r.system), _text(r.benchmark), _text(r.model), _text(r.np), str(r.runs), _number(r.throughput),
                 "-" if pd.isna(r.run_spread) else f"±{100 * r.run_spread:.1f}%", _text(r.unit), _when(r.first),
                 _when(r.last)] for r in table.itertuples()]
        print(text_table(["system", "benchmark", "model", "np", "runs", "throughput", "spread", "unit", "first",
                          "last"], rows))
    else:
        rows = [[_when(r.started), _text(r.system), _text(r.benchmark), _text(r.model), _text(r.np), _text(r.status),
                 _number(r.throughput),
                 "-" if pd.isna(r.ci_low) else f"[{_number(r.ci_low)}–{_number(r.ci_high)}]", _text(r.unit),
                 _text(r.host), _text(r.run_id)] for r in table.itertuples()]
        print(text_table(list(SHOWN), rows))


def declare(sub: Any) -> None:
    """hvdbench history: the runs the store keeps across results roots and months."""
    history = sub.add_parser(
        "history", help="every run kept across roots and months: list, aggregate, check for change, compare, publish",
        description="The history store keeps every run that run, sweep, screen, a submitted job's sweep and import "
                    "finish, across results roots and months (each run once: by its id and a digest of its "
                    "measurements, which a copy shares). list: one row a run; aggregate: one row a system and "
                    "configuration (its runs, geometric mean throughput, spread between runs, first and last); "
                    "check: each configuration's change points (E-divisive means, a permutation test at 1%%) and the "
                    "finding of its latest change, the runs after against the runs before (exit 1 on a regression, "
                    "4 where a history is too short or the change undecided); publish DIR: a static site, a trend "
                    "page a configuration (runs, each stretch's band, change points, the environment's changes); "
                    "compare --a KEY=VALUE,... --b ...: two selections configuration by configuration on whole runs "
                    "(B over A; exit 1 where B is slower, 4 where undecided or not judged); "
                    "import ROOT...: record the runs under results roots (catching up where a store was down); "
                    "verdicts: the accept, compare and compare --regressions verdicts kept, each with the runs "
                    "behind it (--kind, --run, --since). The run folders stay the source of truth.")
    history.add_argument("action", nargs="?", default="list",
                         choices=["list", "aggregate", "check", "compare", "publish", "import", "verdicts"],
                         help="list (default), aggregate, check, compare, publish, import or verdicts")
    history.add_argument("roots", nargs="*", type=Path, help="import: the results roots; publish: the site's folder")
    store_flag(history)
    pick = history.add_argument_group("which runs (list, aggregate)")
    for name in ("system", "host", "benchmark", "model", "status"):
        pick.add_argument(f"--{name}", type=label, default=None, help=f"runs whose {name} is this")
    pick.add_argument("--np", type=positive_int, default=None, help="runs of this many ranks")
    pick.add_argument("--since", default=None, help="runs started since: an age (30d, 12h, 2w) or a date (2026-11-01)")
    pick.add_argument("--until", default=None, help="runs started before: an age or a date")
    pick.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE",
                      help="list: runs carrying this tag (repeatable); import: the tag given to each run recorded")
    history.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output (default table)")
    history.add_argument("--margin", type=percent, default=MARGIN_PCT,
                         help="check, compare: the change in percent within which runs count as equivalent (default 2)")
    history.add_argument("--a", default=None, metavar="KEY=VALUE,...",
                         help="compare: side A on top of the filters both share, e.g. system=dgx-a or "
                              "since=60d,until=30d (keys: system, host, benchmark, model, np, status, since, until, "
                              "tag.KEY)")
    history.add_argument("--b", default=None, metavar="KEY=VALUE,...", help="compare: side B, as --a")
    kept = history.add_argument_group("which verdicts (verdicts; --since too)")
    kept.add_argument("--kind", choices=["accept", "compare", "regressions", "check"], default=None,
                      help="verdicts of this kind")
    kept.add_argument("--run", type=label, default=None, metavar="RUN_ID", help="verdicts this run stands behind")
    history.add_argument("--min-runs", type=positive_int, default=MIN_RUNS,
                         help=f"compare: complete runs a side a verdict needs (default {MIN_RUNS})")
