"""``hvdbench report``, ``compare`` (with ``--regressions``) and ``accept``: their flags, and the one Judging they
make; the report, the decision and the verdicts kept are the workflows' (workflows/judge.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Sequence

from hvdbench.core.errors import UsageError
from hvdbench.core.flags import non_negative_int, percent
from hvdbench.core.metrics import MARGIN_PCT
from hvdbench.workflows.judge import accept, first_system, regressions, report

from .flags import judging_flags, label, store_flag


def judging_of(args: argparse.Namespace, dirs: Sequence[Path], systems: bool = False) -> Any:
    """The one Judging of a command's flags (--baseline, --margin in percent, --min-runs, --borrow-spread, --price,
    --costs, --weights; those a command lacks at their defaults), its files read first: a bad one is one line before
    any results are read. Comparing systems without --baseline: the first root's system is the default."""
    from hvdbench.analysis.verdicts.compare import parse_prices
    from hvdbench.analysis.verdicts.costs import load_costs
    from hvdbench.analysis.verdicts.decision import load_weights
    from hvdbench.analysis.verdicts.judging import Judging
    from hvdbench.core.metrics import MIN_RUNS

    def flag(name: str, default: Any = None) -> Any:
        found = getattr(args, name, None)
        return default if found is None else found

    baseline, costs, weights = flag("baseline"), flag("costs"), flag("weights")
    return Judging(baseline, flag("margin", MARGIN_PCT) / 100.0, flag("min_runs", MIN_RUNS),
                   bool(flag("borrow_spread", False)), parse_prices(list(flag("price", ()))),
                   load_costs(costs) if costs is not None else {}, load_weights(weights) if weights is not None else {},
                   first_system(dirs[0]) if systems and baseline is None else None, window_of(args))


def window_of(args: argparse.Namespace) -> Any:
    """The --runs-since/--runs-until window (open where neither is given); a bad time is one line naming its flag."""
    from hvdbench.analysis.history.query import moment
    from hvdbench.analysis.selection import Window

    sides = {}
    for side in ("since", "until"):
        text = getattr(args, f"runs_{side}", None)
        try:
            sides[side] = moment(text) if text is not None else None
        except UsageError as exc:
            raise UsageError(f"--runs-{side} {exc}") from None
    return Window(**sides)


def cmd_report(args: argparse.Namespace) -> int:
    """hvdbench report: the report of the results roots."""
    return report(args.dirs, args.output, warmup=args.warmup, peaks=args.peaks,
                  judging=judging_of(args, args.dirs)).show()


def cmd_compare(args: argparse.Namespace) -> int:
    """hvdbench compare: the systems side by side with the decision, or (--regressions) OLD against NEW."""
    if args.regressions:
        return cmd_regressions(args)
    return report(args.dirs, args.output, warmup=args.warmup, systems=True, peaks=args.peaks,
                  judging=judging_of(args, args.dirs, systems=True), store=args.store).show()


def cmd_accept(args: argparse.Namespace) -> int:
    """Judge the criteria; print the table, write the report with its Acceptance section; 0, 1 or 2."""
    return accept(args.criteria, args.dirs, args.output, warmup=args.warmup, peaks=args.peaks,
                  judging=judging_of(args, args.dirs), store=args.store).show()


def cmd_regressions(args: argparse.Namespace) -> int:
    """OLD against NEW, configuration by configuration; exit status 1 on any regression."""
    if len(args.dirs) != 2:
        raise UsageError("hvdbench compare --regressions: give two results roots, OLD then NEW")
    offers = [flag for flag, given in (("--baseline", args.baseline), ("--price", args.price), ("--costs", args.costs),
                                       ("--weights", args.weights), ("--peaks", args.peaks)) if given]
    if offers:
        raise UsageError(f"hvdbench compare --regressions: {', '.join(offers)}: for judging offers side by side, "
                         "not OLD against NEW; leave them out (compare without --regressions takes them)")
    return regressions(args.dirs[0], args.dirs[1], args.output, margin=args.margin / 100.0, warmup=args.warmup,
                       min_runs=args.min_runs, borrow_spread=args.borrow_spread, store=args.store).show()


def declare(sub: Any) -> None:
    """hvdbench report and hvdbench compare."""
    for name, text in (("report", "Read every run under the directories; write report.md, report.html (plots "
                                  "inline), plot-N.svg and every table as CSV and Parquet; print the headline table."),
                       ("compare", "The report of two or more systems' results roots (each run carries its "
                                   "--system label), with the systems side by side: per GPU, per watt, per dollar.")):
        report = sub.add_parser(name, help=text.split(";")[0].split(",")[0].lower(), description=text)
        report.set_defaults(func=cmd_report if name == "report" else cmd_compare)
        report.add_argument("dirs", nargs="+" if name == "report" else "*", type=Path,
                            help="results roots or run directories")
        report.add_argument("-o", "--output", type=Path, default=None, help="report directory (default DIR/report)")
        report.add_argument("--warmup", type=non_negative_int, default=None, metavar="N",
                            help="leave out exactly the first N steps of every run (default: detected)")
        report.add_argument("--price", action="append", default=[], metavar="SYSTEM=USD",
                            help="price of one GPU-hour on a system, for throughput per dollar (repeatable)")
        report.add_argument("--weights", type=Path, default=None, metavar="FILE",
                            help="workload weights (TOML, [weights] \"BENCHMARK MODEL\" = share of the expected use): "
                                 "one weighted figure per system against the baseline, with its interval")
        report.add_argument("--costs", type=Path, default=None, metavar="FILE",
                            help="a costs file (TOML, [systems.NAME]: purchase, years, utilisation, power price, PUE, "
                                 "node power; or an hourly price): US$ per million samples with its interval")
        if name == "compare":
            report.add_argument("--regressions", action="store_true",
                                help="OLD NEW: pair configurations and mark each change beyond --margin whose "
                                     "interval excludes it (exit status 1 on any regression, 4 where a "
                                     "configuration could not be judged, 2 a usage error)")
            report.add_argument("--margin", type=percent, default=MARGIN_PCT, metavar="PCT",
                                help="the smallest change that counts: a regression, or one system faster than "
                                     "another (default 2%%)")
            report.add_argument("--baseline", type=label, default=None, metavar="SYSTEM",
                                help="the system every other is judged against (default: the first results root's "
                                     "system, said)")
        report.add_argument("--peaks", type=Path, default=None, metavar="FILE",
                            help="a peak table (TOML, as analysis/tables/peaks.toml) for GPUs or CPUs the built-in one "
                                 "lacks; its entries are tried first")
        judging_flags(report)
        if name == "compare":
            store_flag(report, "the verdict and the runs behind it are")


def declare_accept(sub: Any) -> None:
    """hvdbench accept: a buyer's criteria judged with intervals."""
    accept = sub.add_parser(
        "accept", help="judge the results against acceptance criteria, with their 95%% intervals",
        description="Judge each [[criterion]] of a TOML file (a metric, min or max, and selectors naming the runs) "
                    "against the results: pass where the whole 95%% interval meets it, fail where it misses it, "
                    "undecided where it holds it, not measured where no run matches. Writes the report with an "
                    "Acceptance section, acceptance.csv and acceptance.txt (for an acceptance protocol). Exit "
                    "status: 0 all pass, 1 any fail, 4 not judged (only undecided or not measured left besides "
                    "passes), 2 a usage error (a bad criteria file, a criterion naming several configurations).")
    accept.set_defaults(func=cmd_accept)
    accept.add_argument("criteria", type=Path, help="criteria file (TOML)")
    accept.add_argument("dirs", nargs="+", type=Path, help="results roots or run directories")
    accept.add_argument("-o", "--output", type=Path, default=None, help="report directory (default DIR/report)")
    accept.add_argument("--warmup", type=non_negative_int, default=None, metavar="N",
                        help="leave out exactly the first N steps of every run (default: detected)")
    accept.add_argument("--peaks", type=Path, default=None, metavar="FILE", help="a peak table (as report's)")
    judging_flags(accept)
    store_flag(accept, "the verdict and the runs behind it are")
