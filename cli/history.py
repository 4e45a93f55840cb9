"""``hvdbench history [list|aggregate|check|compare|publish|import|verdicts]``: the runs the history store keeps across
results roots and months, selected by system, host, workload, size, status, time and tags; each configuration checked
for change against its own history, two selections compared, a static site published, the verdicts made on them
listed; as a table, CSV or JSON. Each action is a subcommand with its own flags (argparse refuses another's); a bare
``hvdbench history`` lists."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import pandas as pd
from hvdbench.analysis.document import text_table
from hvdbench.analysis.history.check import summary
from hvdbench.analysis.history.compare import compare_table, side
from hvdbench.analysis.history.query import Selection, aggregate, moment, select
from hvdbench.analysis.history.store import location, open_store, redacted
from hvdbench.core.errors import UsageError
from hvdbench.core.flags import percent, positive_int
from hvdbench.core.metrics import MARGIN_PCT, MIN_RUNS
from hvdbench.core.tags import tag_pair, tags_of
from hvdbench.core.validate import inert
from hvdbench.workflows import history as recorded

from .flags import label, store_flag
from .history_tables import cell, number, print_table, when



def _url(args: argparse.Namespace) -> str:
    url = location(args.store)
    if url is None:
        raise UsageError("history: the store is turned off (--store off or HVDBENCH_STORE=off)")
    return url


def _selected(args: argparse.Namespace) -> tuple[str, pd.DataFrame]:
    url = _url(args)
    with open_store(url, create=False) as store:
        return url, select(store, _selection(args))


def _none_match(url: str, what: str = "run") -> None:
    print(f"history: no {what} in {inert(redacted(url))} matches", file=sys.stderr)


def _shown(url: str, table: pd.DataFrame, form: str, action: str) -> int:
    """A read action's table printed (an empty selection is a result, said in one line); exit 0."""
    if not len(table):
        _none_match(url)
    else:
        print_table(table, form, action)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """history list: one row a run, oldest first."""
    url, runs = _selected(args)
    return _shown(url, runs, args.format, "list")


def cmd_aggregate(args: argparse.Namespace) -> int:
    """history aggregate: one row a system and configuration."""
    url, runs = _selected(args)
    return _shown(url, aggregate(runs), args.format, "aggregate")


def cmd_check(args: argparse.Namespace) -> int:
    """history check: each configuration against its own history; 1 on a regression, 4 where not judged."""
    url = _url(args)
    checked = recorded.check(url, _selection(args), args.margin / 100)
    if not len(checked.table):
        _none_match(url)
        return 4
    print_table(checked.table, args.format, "check")
    if args.format == "table":
        print(summary(checked.table))
    checked.said.show(line_to_stderr=True)  # the check's own output stays the table a script reads
    return checked.status


def cmd_publish(args: argparse.Namespace) -> int:
    """history publish DIR: a static site, a trend page a configuration."""
    from hvdbench.analysis.history.publish import publish
    from hvdbench.analysis.history.verdicts import accepted_keys

    url = _url(args)
    with open_store(url, create=False) as store:
        runs = select(store, _selection(args))
        accepted = accepted_keys(store)
    pages = publish(runs, args.site, args.margin / 100, accepted)
    print(f"history: {len(pages) - 1} configuration page(s) and the index in {inert(str(args.site))}: "
          f"{inert(str(pages[0]))}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """history import ROOT...: record the runs under results roots."""
    return recorded.import_roots(args.roots, _url(args), tags_of(args.tag)).show()


def cmd_compare(args: argparse.Namespace) -> int:
    """Two selections against each other: 1 where B is slower on any configuration, 4 where any is undecided or
    not judged, else 0 (the exit statuses of compare --regressions)."""
    url = _url(args)
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
        print_table(table, args.format, "compare")
    else:
        rows = [[cell(r.benchmark), cell(r.model), cell(r.np), f"{r.runs_a} / {r.runs_b}",
                 f"{number(r.throughput_a)} | {number(r.throughput_b)}",
                 "-" if pd.isna(r.ratio_low) else f"{r.ratio:.3f} [{r.ratio_low:.3f}–{r.ratio_high:.3f}]",
                 cell(r.verdict), cell(r.differs) or "-"] for r in table.itertuples()]
        print(text_table(["benchmark", "model", "np", "runs A / B", "throughput A | B", "B / A", "finding",
                          "environment A | B"], rows))
    findings = set(table["finding"])
    return 1 if "slower" in findings else 4 if findings & {"undecided", "not judged"} else 0


def cmd_verdicts(args: argparse.Namespace) -> int:
    """The verdicts kept (accept, compare, compare --regressions), newest first, with the runs behind each."""
    from hvdbench.analysis.history.verdicts import list_verdicts

    url = _url(args)

    with open_store(url, create=False) as store:
        table = list_verdicts(store, args.kind, args.run, args.since)
    if not len(table):
        print(f"history: no verdict in {inert(redacted(url))} matches", file=sys.stderr)
        return 0
    if args.format != "table":
        print_table(table, args.format, "verdicts")
        return 0
    rows = [[when(r.made), cell(r.kind), cell(r.outcome), str(r.runs), ", ".join(map(str, r.roots)),
             str(r.verdict_id)[:12]] for r in table.itertuples()]
    print(text_table(["made", "kind", "outcome", "runs", "results roots", "verdict"], rows))
    return 0


def _selection(args: argparse.Namespace) -> Selection:
    return Selection(system=args.system, host=args.host, benchmark=args.benchmark, model=args.model, np=args.np,
                     status=args.status, since=None if args.since is None else moment(args.since),
                     until=None if args.until is None else moment(args.until),
                     tags=tuple(tag_pair(t) for t in args.tag))


def _pick(parser: Any, tag_help: str = "runs carrying this tag (repeatable)") -> None:
    """The flags that select runs (list, aggregate, check, compare, publish)."""
    pick = parser.add_argument_group("which runs")
    for name in ("system", "host", "benchmark", "model", "status"):
        pick.add_argument(f"--{name}", type=label, default=None, help=f"runs whose {name} is this")
    pick.add_argument("--np", type=positive_int, default=None, help="runs of this many ranks")
    _since(pick)
    pick.add_argument("--until", default=None, help="runs started before: an age or a date")
    pick.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE", help=tag_help)


def _since(parser: Any) -> None:
    parser.add_argument("--since", default=None, help="since: an age (30d, 12h, 2w) or a date (2026-11-01)")


def _format(parser: Any) -> None:
    parser.add_argument("--format", choices=["table", "csv", "json"], default="table", help="output (default table)")


def _margin(parser: Any) -> None:
    parser.add_argument("--margin", type=percent, default=MARGIN_PCT,
                        help="the change in percent within which runs count as equivalent (default 2)")


ABOUT = {
    "list": "one row a run, oldest first (the default action)",
    "aggregate": "one row a system and configuration: its runs, geometric mean throughput, spread between runs, "
                 "first and last",
    "check": "each configuration's change points (E-divisive means, a permutation test at 1%%) and the finding of "
             "its latest change, the runs after against the runs before and against the history's first stretch "
             "(exit 1 on a regression, 4 where a history is too short or the change undecided); the findings kept "
             "as a verdict",
    "compare": "two selections configuration by configuration on whole runs, B over A (exit 1 where B is slower, 4 "
               "where undecided or not judged)",
    "publish": "a static site: a trend page a configuration (runs, each stretch's band, change points, the "
               "environment's changes)",
    "import": "record the runs under results roots (each once; catching up where a store was down)",
    "verdicts": "the accept, compare, compare --regressions and check verdicts kept, newest first, each with the runs "
                "behind it",
}


def declare(sub: Any) -> None:
    """hvdbench history and its actions, each a subcommand with its own flags."""
    history = sub.add_parser(
        "history", help="every run kept across roots and months: list, aggregate, check for change, compare, publish",
        description="The history store keeps every run that run, sweep, screen, a submitted job's sweep and import "
                    "finish, across results roots and months (each run once: by its id and a digest of its "
                    "measurements, which a copy shares). The run folders stay the source of truth. Actions: "
                    + "; ".join(f"{name}: {text}" for name, text in ABOUT.items()) + ".")
    history.default_command = "list"
    actions = history.add_subparsers(dest="action", metavar="ACTION", parser_class=type(history))
    made = {name: actions.add_parser(name, help=text.split(":")[0], description=text[0].upper() + text[1:] + ".")
            for name, text in ABOUT.items()}
    for name, function in (("list", cmd_list), ("aggregate", cmd_aggregate), ("check", cmd_check),
                           ("compare", cmd_compare), ("publish", cmd_publish), ("import", cmd_import),
                           ("verdicts", cmd_verdicts)):
        made[name].set_defaults(func=function)
        store_flag(made[name])
    for name in ("list", "aggregate", "check", "compare", "publish"):
        _pick(made[name])
    for name in ("list", "aggregate", "check", "compare", "verdicts"):
        _format(made[name])
    for name in ("check", "compare", "publish"):
        _margin(made[name])
    made["publish"].add_argument("site", type=Path, help="the folder the site goes into")
    made["import"].add_argument("roots", nargs="+", type=Path, help="the results roots")
    made["import"].add_argument("--tag", action="append", default=[], metavar="KEY=VALUE",
                                help="a tag given to each run recorded (repeatable)")
    compare = made["compare"]
    compare.add_argument("--a", default=None, metavar="KEY=VALUE,...",
                         help="side A on top of the filters both share, e.g. system=dgx-a or since=60d,until=30d "
                              "(keys: system, host, benchmark, model, np, status, since, until, tag.KEY)")
    compare.add_argument("--b", default=None, metavar="KEY=VALUE,...", help="side B, as --a")
    compare.add_argument("--min-runs", type=positive_int, default=MIN_RUNS,
                         help=f"complete runs a side a verdict needs (default {MIN_RUNS})")
    kept = made["verdicts"]
    kept.add_argument("--kind", choices=["accept", "compare", "regressions", "check"], default=None,
                      help="verdicts of this kind")
    kept.add_argument("--run", type=label, default=None, metavar="RUN_ID", help="verdicts this run stands behind")
    _since(kept)
