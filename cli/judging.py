"""``hvdbench report``, ``compare`` (with ``--regressions``) and ``accept``: the report of results roots, the
decision between systems, OLD against NEW, and a buyer's criteria; each verdict kept in the history store with the
runs behind it (analysis/history/verdicts.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Sequence

from hvdbench.analysis.history.verdicts import OUTCOMES, REGRESSION_OUTCOMES, record_verdict, sides, verdict_of
from hvdbench.core.errors import HvdbenchError, UsageError
from hvdbench.core.flags import non_negative_int, percent
from hvdbench.core.metrics import MARGIN_PCT
from hvdbench.core.spec import RUN_FILE, RunSpec
from hvdbench.core.validate import inert

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
                   first_system(dirs[0]) if systems and baseline is None else None)


def report(dirs: Sequence[Path], output: Path | None = None, *, warmup: int | None = None, systems: bool = False,
           peaks: Path | None = None, judging: Any = None, store: str | None = None) -> int:
    """Build the report of results roots and print its headline tables (``judging``: the decision between
    systems, recorded in the history ``store``)."""
    from hvdbench.analysis.report.build import build_report

    if systems and len(dirs) < 2:
        raise UsageError("hvdbench compare: give two or more results roots (one per system)")
    if systems and len({Path(d).resolve() for d in dirs}) < len(dirs):
        raise UsageError("hvdbench compare: a results root is given twice: nothing to compare it with")
    out = output or (Path(dirs[0]) / "report")
    judged: dict[str, Any] = {}
    text, paths = build_report(list(dirs), out, warmup=warmup, peaks=peaks, judging=judging,
                               extend=(lambda r, c: _two_systems(r, c, judged)) if systems else None)
    print(text)
    print(f"report: {paths['html']} and {paths['markdown']} (tables as CSV and Parquet in {out})")
    if systems and judged.get("decision") is not None:
        table = judged["decision"]
        found = table["finding"].value_counts() if "finding" in table else {}
        outcome = ", ".join(f"{count} {finding}" for finding, count in sorted(dict(found).items())) or "nothing judged"
        record_verdict(verdict_of("compare", outcome, dirs, table, sides(judged["runs"])), store)
    return 0


def _two_systems(report: Any, collection: Any, judged: dict[str, Any]) -> str:
    """compare's check before its report is written: the results hold two systems or more; the decision and the
    runs behind it kept in ``judged``."""
    judged.update(decision=report.tables.get("decision"), runs=collection.runs)
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


def cmd_report(args: argparse.Namespace) -> int:
    """hvdbench report: the report of the results roots."""
    return report(args.dirs, args.output, warmup=args.warmup, peaks=args.peaks, judging=judging_of(args, args.dirs))


def cmd_compare(args: argparse.Namespace) -> int:
    """hvdbench compare: the systems side by side with the decision, or (--regressions) OLD against NEW."""
    if args.regressions:
        return cmd_regressions(args)
    return report(args.dirs, args.output, warmup=args.warmup, systems=True, peaks=args.peaks,
                  judging=judging_of(args, args.dirs, systems=True), store=args.store)


def cmd_accept(args: argparse.Namespace) -> int:
    """Judge the criteria; print the table, write the report with its Acceptance section; 0, 1 or 2."""
    import time

    from hvdbench.analysis.document import Section, text_table
    from hvdbench.analysis.report.build import build_report
    from hvdbench.analysis.verdicts import acceptance
    from hvdbench.analysis.verdicts.criteria import load_criteria

    criteria = load_criteria(args.criteria)  # a bad criteria file is one line before any results
    judging = judging_of(args, args.dirs)
    out = args.output or (Path(args.dirs[0]) / "report")
    said: dict[str, Any] = {}

    def extend(report: Any, collection: Any) -> str:
        table = acceptance.judge(criteria, report.tables, collection, judging)
        report.tables["acceptance"] = table
        header, rows = acceptance.rows(table)
        report.sections.insert(0, Section("Acceptance", acceptance.SECTION_TEXT, header, rows))
        said.update(table=table, protocol=acceptance.protocol(args.criteria, table, collection,
                                                              time.strftime("%Y-%m-%d")), runs=collection.runs)
        return "\n\nacceptance\n" + text_table(header, rows)

    text, paths = build_report(list(args.dirs), out, warmup=args.warmup, peaks=args.peaks, extend=extend,
                               judging=judging)
    try:
        (out / "acceptance.txt").write_text(said["protocol"], encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {out / 'acceptance.txt'}: {exc.strerror}") from None
    print(text)
    print(f"acceptance: {paths['acceptance']}, {out / 'acceptance.txt'} and the report's Acceptance section")
    status = acceptance.exit_status(said["table"])
    record_verdict(verdict_of("accept", OUTCOMES[status], args.dirs, said["table"], sides(said["runs"], "judged")),
                   args.store)
    return status


def cmd_regressions(args: argparse.Namespace) -> int:
    """OLD against NEW, configuration by configuration; exit status 1 on any regression."""
    from hvdbench.analysis.verdicts.regression import compare_results, exit_status

    if len(args.dirs) != 2:
        raise UsageError("hvdbench compare --regressions: give two results roots, OLD then NEW")
    offers = [flag for flag, given in (("--baseline", args.baseline), ("--price", args.price), ("--costs", args.costs),
                                       ("--weights", args.weights), ("--peaks", args.peaks)) if given]
    if offers:
        raise UsageError(f"hvdbench compare --regressions: {', '.join(offers)}: for judging offers side by side, "
                         "not OLD against NEW; leave them out (compare without --regressions takes them)")
    out = args.output or (Path(args.dirs[1]) / "report")
    text, paths, table = compare_results(args.dirs[0], args.dirs[1], out, args.margin / 100.0, args.warmup,
                                         args.min_runs, args.borrow_spread)
    print(text)
    print(f"regressions: {paths['markdown']} and {paths['csv']}")
    status = exit_status(table)
    record_verdict(verdict_of("regressions", REGRESSION_OUTCOMES[status], args.dirs, table, table.attrs["runs"]),
                   args.store)
    return status


def declare(sub: Any) -> None:
    """hvdbench report and hvdbench compare."""
    for name, text in (("report", "Read every run under the directories; write report.md, report.html (plots "
                                  "inline), plot-N.svg and every table as CSV and Parquet; print the headline table."),
                       ("compare", "The report of two or more systems' results roots (each run carries its "
                                   "--system label), with the systems side by side: per GPU, per watt, per dollar.")):
        report = sub.add_parser(name, help=text.split(";")[0].split(",")[0].lower(), description=text)
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
    accept.add_argument("criteria", type=Path, help="criteria file (TOML)")
    accept.add_argument("dirs", nargs="+", type=Path, help="results roots or run directories")
    accept.add_argument("-o", "--output", type=Path, default=None, help="report directory (default DIR/report)")
    accept.add_argument("--warmup", type=non_negative_int, default=None, metavar="N",
                        help="leave out exactly the first N steps of every run (default: detected)")
    accept.add_argument("--peaks", type=Path, default=None, metavar="FILE", help="a peak table (as report's)")
    judging_flags(accept)
    store_flag(accept, "the verdict and the runs behind it are")
