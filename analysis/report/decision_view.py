"""The decision between systems as a buyer reads it: one row per workload and size (ratio [interval], verdict, the runs
each side rests on, the cost per sample's ratio and verdict), a forest plot of the same rows with the weighted figure
on top, each system's US$ per GPU-hour, banners where the results are CPU stand-ins or both systems ran on one host,
and at the foot the runs every verdict rests on (count, time span, results roots, hvdbench version)."""

from __future__ import annotations

import html
import math
import re
from datetime import datetime, timezone
from typing import Any

import pandas as pd

from hvdbench.core.validate import inert

from ..collect import Collection
from ..findings import NOT_JUDGED, SPEED, UNDECIDED, margin_text, spread_text
from ..verdicts.decision import Weighted, finding_of, ranks_text
from ..formatting import Rows, fmt, ratio

FOREST_FILE = "decision-forest.svg"


def decision_text(baseline: str, how: str, margin: float, min_runs: int) -> str:
    """What the decision's rows and sentences mean."""
    return (f"Each system against the baseline {baseline} ({how}): throughput on the same workload and GPU count, runs "
            "that differ only in run length paired. The ratio's 95% interval resamples both systems' runs and, within "
            "each run, blocks of its steps. Faster or slower where the whole interval clears 1 by more than "
            f"{margin:.0%} (--margin); equivalent within {margin_text(margin)} where the whole interval lies inside "
            "that margin; undecided where it does neither: the runs could not tell, and the row says the smallest "
            "ratio they could have caught (80% of the time, at the spread measured) and about how many runs a side "
            "would decide it; not judged where a side has fewer than "
            f"{min_runs} complete runs (--min-runs): one run's interval says how steady it was, not where another run "
            "would land. Beside the runs, each side's spread between runs (± one standard deviation).")


WITHIN = "†"  # an interval from one run's steps alone, the spread between runs unknown
WITHIN_NOTE = f"{WITHIN} within-run only: one run of a side, its interval says how steady that run was, not where " \
    "another would land"


def _interval(low: float, high: float, within: bool) -> str:
    if not (math.isfinite(low) and math.isfinite(high)):
        return ""
    return f" [{low:.2f}–{high:.2f}]{WITHIN if within else ''}"


def runs_cell(runs: int, spread: float) -> str:
    """``3 (±4.1%)``: a side's runs with the spread between them, where there are several."""
    said = spread_text(spread)
    return f"{runs} ({said})" if said else str(runs)


SHORT = 24  # a verdict cell longer than this goes to a note under the table, its cell the finding and the note's mark


def _noted(text: str, notes: list[str]) -> str:
    """A verdict for its cell: short ones as they are, a longer one as its finding with a mark (``not judged [1]``),
    the whole text kept once in ``notes``."""
    if len(text) <= SHORT:
        return text
    if text not in notes:
        notes.append(text)
    head = text.split(":")[0].split(" (")[0]
    return f"{head} [{notes.index(text) + 1}]"


def decision_rows(decided: pd.DataFrame, compared: pd.DataFrame) -> tuple[list[str], list[list[str]], list[str]]:
    """The decision table: workload (short), GPUs, system, ratio [interval], verdict, what the runs could have caught,
    the runs a side that would decide an undecided one, runs per side with their spread, and where costs were given US$
    per million samples on each side with the cost's ratio and verdict; the full arguments last; and the notes a long
    verdict leaves under the table (``[1] not judged: 1 run of …``), so every column fits a laptop's page."""
    costed = decided["cost_finding"].ne("").any()  # costs given: every row says its cost verdict, or why none
    header = ["workload", "GPUs", "system", "× baseline [95% CI]", "verdict", "could have caught", "runs to decide",
              "runs (system / baseline)"]
    one = decided["system"].nunique() == 1  # one system against the baseline: the title names it
    header += ["US$ per M samples (system / baseline)", "cost × baseline [95% CI]", "cost verdict"] if costed else []
    rows: list[list[str]] = []
    notes: list[str] = []
    for r in decided.itertuples():
        found = finding_of(r)
        row = [r.workload, ranks_text(r.np, r.on_gpu).split(" (")[0], r.system,
               f"{r.ratio:.2f}{_interval(r.low, r.high, r.within_run)}" if math.isfinite(r.ratio) else "-",
               _noted(r.verdict + (f" ({r.spread})" if r.spread else ""), notes), found.caught() or "-",
               found.to_decide(),
               f"{runs_cell(r.runs, r.system_spread)} / {runs_cell(r.baseline_runs, r.baseline_spread)}"]
        if costed:
            row += [_dollars(compared, r), f"{r.cost_ratio:.2f}{_interval(r.cost_low, r.cost_high, r.within_run)}"
                    if math.isfinite(r.cost_ratio) else "-", _noted(r.cost_verdict or "-", notes)]
        rows.append(row + [f"{r.framework} {r.benchmark} {r.args}".strip()])
    header += ["arguments"]
    if one:
        header, rows = header[:2] + header[3:], [row[:2] + row[3:] for row in rows]
    marked = [WITHIN_NOTE] if decided["within_run"].any() else []
    return header, rows, [f"[{i}] {note}" for i, note in enumerate(notes, 1)] + marked


def _dollars(compared: pd.DataFrame, row: Any) -> str:
    """US$ per million samples of a decision row's system and of its baseline, on the same workload and size."""
    same = compared[(compared["framework"] == row.framework) & (compared["benchmark"] == row.benchmark)
                    & (compared["model"] == row.model) & (compared["args"] == row.args) & (compared["np"] == row.np)]
    cost = same.set_index("system")["usd_per_million"] if "usd_per_million" in same else pd.Series(dtype=float)
    return " / ".join(f"{cost[s]:,.2f}" if s in cost and pd.notna(cost[s]) else "-" for s in (row.system, row.baseline))


def hourly_line(compared: pd.DataFrame) -> str:
    """Each costed system's derived US$ per GPU-hour and what its energy counted."""
    if "usd_per_gpu_hour" not in compared:
        return ""
    costed = compared[compared["usd_per_gpu_hour"].notna()].drop_duplicates("system")
    if costed.empty:
        return ""
    return "US$ per GPU-hour from the costs file: " + "; ".join(
        f"{r.system} {r.usd_per_gpu_hour:.2f} (energy: {r.energy_counted})" for r in costed.itertuples())


def cost_figures(compared: pd.DataFrame) -> list[str]:
    """Per costed workload and size, every system's ``US$ 1.23 [1.20–1.26]`` per million samples on one line."""
    lines = []
    costed = compared[compared["usd_per_million"].notna()] if "usd_per_million" in compared else compared.iloc[0:0]
    for _, rows in costed.groupby(["framework", "benchmark", "model", "args", "np"], sort=False):
        first = rows.iloc[0]
        costs = "; ".join(
            f"{r.system} US$ {r.usd_per_million:.3g}"
            + (f" [{r.usd_per_million_low:.3g}–{r.usd_per_million_high:.3g}]" if pd.notna(r.usd_per_million_low)
               else "") for r in rows.itertuples())
        lines.append(f"Cost per million samples, {first['framework']} {first['benchmark']} {first['model']} "
                     f"{first['args']} at {ranks_text(int(first['np']), bool(first.get('on_gpu', True)))}: {costs}")
    return lines


def _run_ids(compared: pd.DataFrame) -> dict[str, list[str]]:
    """The runs each system's compared configurations rest on."""
    out: dict[str, list[str]] = {}
    for row in compared.itertuples():
        out.setdefault(str(row.system), []).extend(str(row.runs).split(","))
    return out


def banners(collection: Collection, decided: pd.DataFrame, compared: pd.DataFrame) -> list[str]:
    """What a reader must see before any figure: CPU stand-ins, both systems' runs on one host, verdicts not judged."""
    out = []
    if len(decided) and not decided["on_gpu"].all():
        out.append("These results are CPU stand-ins: ranks trained on CPUs, not GPUs. They show how hvdbench judges, "
                   "not what any GPU system does.")
    hosts = {}
    runs = collection.runs.set_index("run_id") if "host" in collection.runs else None
    for system, ids in _run_ids(compared).items():
        hosts[system] = set() if runs is None else {str(h) for h in runs.loc[runs.index.intersection(ids), "host"]
                                                    .dropna()}
    shared = set.intersection(*hosts.values()) if len(hosts) > 1 else set()
    if shared:
        out.append(f"Both systems' runs were made on the same host ({', '.join(sorted(shared)[:3])}): this compares "
                   "labels, not machines.")
    unjudged = int((decided["finding"] == NOT_JUDGED).sum()) if len(decided) else 0
    if unjudged:
        out.append(f"{unjudged} of {len(decided)} comparison(s) not judged: too few runs or no interval (see each "
                   "row).")
    if collection.spec_errors:
        out.append(f"{len(collection.spec_errors)} run folder(s) could not be read and enter no verdict (see Runs left "
                   f"out): {collection.spec_errors[0][:200]}")
    undecided = int((decided["finding"] == UNDECIDED).sum()) if len(decided) else 0
    if undecided:
        out.append(f"{undecided} of {len(decided)} comparison(s) undecided: the runs could not tell; this is not "
                   "\"the same\" (see what each could have caught and the runs that would decide it).")
    chance = page_chance(decided)
    return out + ([chance] if chance else [])


def page_chance(decided: pd.DataFrame) -> str:
    """What chance alone would call on a page of several judged rows: each row is judged on its own at 95% (no
    correction across rows), so with every workload a tie the page would still call some rows, by each row's own
    runs (its tie_call chance); "" for fewer than two judged rows."""
    chances = decided["tie_call"].dropna() if "tie_call" in decided else pd.Series(dtype=float)
    if len(chances) < 2:
        return ""
    called = int(decided["finding"].isin(SPEED).sum())
    expected, any_one = float(chances.sum()), 1.0 - float((1.0 - chances).prod())
    return (f"Each of the {len(chances)} judged rows is judged on its own at 95%, with no correction across rows: "
            f"were every workload a tie, chance alone would call about {expected:.2g} of them faster or slower "
            f"(at least one {any_one:.0%} of the time, by each row's own runs); {called} "
            f"{'is' if called == 1 else 'are'} called here.")


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def foot_lines(collection: Collection, compared: pd.DataFrame) -> list[str]:
    """Per system: the runs the verdicts rest on, their time span, results roots and hvdbench versions."""
    runs = collection.runs.set_index("run_id")
    out = []
    for system, ids in sorted(_run_ids(compared).items()):
        mine = runs.loc[runs.index.intersection(list(dict.fromkeys(ids)))]
        started = mine["started"].dropna() if "started" in mine else pd.Series(dtype=float)
        span = (f"{_when(started.min())} to {_when(started.max())} ({(started.max() - started.min()) / 60:.0f} min)"
                if len(started) else "time not recorded")
        roots = ", ".join(sorted({str(r) for r in mine["root"].dropna()})) or "-"
        versions = ", ".join(sorted({str(v) for v in mine.get("hvdbench_version", pd.Series(dtype=str)).dropna()})) \
            or "not recorded"
        out.append(f"{system}: {len(mine)} run(s), {span}; results {roots}; hvdbench {versions}")
    return out


def summary_line(decided: pd.DataFrame, weighted: list[Weighted]) -> str:
    """The executive summary's one line on the decision: the verdicts counted, the weighted figure where there is
    one."""
    if decided.empty:
        return ""
    systems = sorted(set(decided["system"]))
    baseline = str(decided["baseline"].iloc[0])
    counts = decided["finding"].value_counts()
    said = ", ".join(f"{n} {v}" for v, n in counts.items())
    mixed = "; ".join(w.line() for w in weighted if w.kind == "speed")
    return (f"Decision, {', '.join(systems)} against {baseline}: {said} over {len(decided)} comparison(s)"
            + (f"; {mixed}" if mixed else "") + " (see Decision).")


def _esc(value: object) -> str:
    return html.escape(inert(value))


FOREST_ROW = 22
FOREST_LABEL = 330
FOREST_PLOT = 330
FOREST_FIGURE = 230


def _forest_range(values: list[float], margin: float) -> tuple[float, float]:
    finite = [v for v in values if math.isfinite(v) and v > 0] + [1.0 / (1.0 + margin), 1.0 + margin]
    low, high = math.log(min(finite)), math.log(max(finite))
    pad = max((high - low) * 0.08, 0.02)
    return low - pad, high + pad


def forest_svg(decided: pd.DataFrame, weighted: list[Weighted], margin: float) -> str:
    """The decision's rows as a forest plot (SVG, no script): each ratio with its interval on a log axis, the weighted
    figure(s) on top, a line at 1 and the margin band shaded; every row a ``<g class="forest-row">`` carrying its
    numbers as data attributes (what the tests read back)."""
    rows: list[dict[str, Any]] = [{"label": f"{w.system} vs {w.baseline}, weighted" + (" cost" * (w.kind == "cost")),
                                   "ratio": w.value, "low": w.low, "high": w.high, "verdict": w.verdict,
                                   "kind": "weighted", "system": w.system, "np": 0, "workload": "weighted"}
                                  for w in weighted if not w.missing]
    one = decided["system"].nunique() == 1  # the title names the one system against the baseline
    rows += [{"label": f"{'' if one else f'{r.system}: '}{r.workload} at {ranks_text(r.np, r.on_gpu).split(' (')[0]}",
              "ratio": r.ratio,
              "low": r.low, "high": r.high, "verdict": r.verdict, "kind": "row", "system": r.system, "np": r.np,
              "workload": r.workload} for r in decided.itertuples() if math.isfinite(r.ratio)]
    lo, hi = _forest_range([v for r in rows for v in (r["ratio"], r["low"], r["high"])], margin)
    width, height = FOREST_LABEL + FOREST_PLOT + FOREST_FIGURE, FOREST_ROW * (len(rows) + 2)

    def x(value: float) -> float:
        return FOREST_LABEL + (math.log(value) - lo) / (hi - lo) * FOREST_PLOT

    top, bottom = FOREST_ROW * 0.5, height - FOREST_ROW * 1.2
    band = (x(1.0 / (1.0 + margin)), x(1.0 + margin))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="forest" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
             f'<rect x="{band[0]:.1f}" y="{top:.1f}" width="{band[1] - band[0]:.1f}" height="{bottom - top:.1f}" '
             'fill="#e8e8e8"><title>the margin: an interval wholly inside it is equivalent</title></rect>',
             f'<line x1="{x(1.0):.1f}" y1="{top:.1f}" x2="{x(1.0):.1f}" y2="{bottom:.1f}" stroke="#555"/>']
    for tick in _ticks(lo, hi):
        parts.append(f'<text x="{x(tick):.1f}" y="{height - 4:.1f}" text-anchor="middle" fill="#555">{tick:g}×</text>')
    parts.append(f'<text x="{FOREST_LABEL - 8}" y="{height - 4:.1f}" text-anchor="end" fill="#555">× the baseline '
                 f'(log scale; shaded: within ±{margin:.0%})</text>')
    for i, row in enumerate(rows):
        parts.append(_forest_row(row, FOREST_ROW * (i + 1.2), x))
    parts.append("</svg>")
    return "".join(parts)


TICKS = (0.1, 0.2, 0.25, 0.5, 0.67, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 10.0)


def _ticks(lo: float, hi: float, gap: float = 40.0) -> list[float]:
    """Axis ticks inside the range, at least ``gap`` pixels apart, 1 always among them."""
    def place(value: float) -> float:
        return (math.log(value) - lo) / (hi - lo) * FOREST_PLOT

    kept = [1.0] if lo <= 0.0 <= hi else []
    for tick in sorted(TICKS, key=lambda t: abs(math.log(t))):
        if lo <= math.log(tick) <= hi and all(abs(place(tick) - place(k)) >= gap for k in kept):
            kept.append(tick)
    return sorted(kept)


def _forest_row(row: dict[str, Any], y: float, x: Any) -> str:
    judged = not str(row["verdict"]).startswith(NOT_JUDGED)
    colour = "#1f4e8c" if judged else "#999"
    weight = ' font-weight="bold"' if row["kind"] == "weighted" else ""
    attrs = " ".join(f'data-{k}="{_esc(v if not isinstance(v, float) else repr(v))}"'
                     for k, v in row.items() if k != "label")
    out = [f'<g class="forest-row" {attrs}>',
           f'<text x="4" y="{y + 4:.1f}"{weight}><title>{_esc(row["label"])}</title>{_esc(_clipped(row["label"]))}'
           '</text>']
    if math.isfinite(row["low"]) and math.isfinite(row["high"]):
        out.append(f'<line x1="{x(row["low"]):.1f}" y1="{y:.1f}" x2="{x(row["high"]):.1f}" y2="{y:.1f}" '
                   f'stroke="{colour}" stroke-width="2"/>')
    marker = (f'<rect x="{x(row["ratio"]) - 5:.1f}" y="{y - 5:.1f}" width="10" height="10" transform="rotate(45 '
              f'{x(row["ratio"]):.1f} {y:.1f})" fill="{colour}"/>' if row["kind"] == "weighted" else
              f'<circle cx="{x(row["ratio"]):.1f}" cy="{y:.1f}" r="4" fill="{colour if judged else "white"}" '
              f'stroke="{colour}"/>')
    verdict = str(row["verdict"]).split(":")[0]
    out += [marker, f'<text x="{FOREST_LABEL + FOREST_PLOT + 8}" y="{y + 4:.1f}" fill="{colour}">'
                    f'{row["ratio"]:.2f}× {_esc(verdict)}</text>', "</g>"]
    return "".join(out)


LABEL_CHARACTERS = 52  # what fits FOREST_LABEL pixels at 12 px; a longer label is cut, whole in its tooltip


def _clipped(label: str) -> str:
    return label if len(label) <= LABEL_CHARACTERS else label[:LABEL_CHARACTERS - 1] + "…"


def forest_rows(svg: str) -> list[dict[str, str]]:
    """The rows a forest plot drew, read back from its data attributes (for checks against compare.csv)."""
    out = []
    for group in re.findall(r'<g class="forest-row" ([^>]*)>', svg):
        out.append({k: html.unescape(v) for k, v in re.findall(r'data-([a-z_]+)="([^"]*)"', group)})
    return out


COMPARE_TEXT = ("The same workloads on each system: throughput, per GPU, per watt (mean GPU power from telemetry) "
                "and per dollar where a price per GPU-hour was given (samples per dollar = throughput × 3600 / "
                "(price × GPUs)).")


UNPAIRED_TEXT = ("Configurations only one system measured, beside the nearest one another system did and what "
                 "differs: they enter no verdict. Run lengths (--steps, --warmup-steps, --target-ci, --max-steps) do "
                 "not count as a difference.")


def cost_lines(compared: pd.DataFrame) -> list[str]:
    """Per costed workload and size, every system's ``US$ 1.23 [1.20–1.26]`` per million samples on one line,
    with what the energy counted."""
    lines = []
    costed = compared[compared["usd_per_million"].notna()]
    for _, rows in costed.groupby(["framework", "benchmark", "model", "args", "np"], sort=False):
        first = rows.iloc[0]
        costs = "; ".join(
            f"{r.system} US$ {r.usd_per_million:.3g}"
            + (f" [{r.usd_per_million_low:.3g}–{r.usd_per_million_high:.3g}]" if pd.notna(r.usd_per_million_low)
               else "") + f" (energy: {r.energy_counted})" for r in rows.itertuples())
        lines.append(f"Cost per million samples, {first['framework']} {first['benchmark']} {first['model']} "
                     f"{first['args']} at {ranks_text(int(first['np']), bool(first.get('on_gpu', True)))}: {costs}")
    return lines


def unpaired_rows(alone: pd.DataFrame) -> Rows:
    """What one system measured alone."""
    return (["system", "workload", "GPUs", "nearest on another system", "what differs"],
            [[r.system, r.workload, str(r.np), r.nearest, r.differs or "-"] for r in alone.itertuples()])


def compare_rows(compared: pd.DataFrame, baseline: str) -> Rows:
    """Systems side by side."""
    return (["workload", "GPUs", "system", "throughput", "per GPU", "per watt", "per $", f"vs {baseline} [95% CI]"],
            [[f"{r.framework} {r.benchmark} {r.model} {r.args}".strip(), str(r.np), r.system, fmt(r.throughput),
              fmt(r.per_gpu), fmt(r.per_watt, 2), fmt(r.per_dollar, 0),
              ratio(r.relative, r.relative_low, r.relative_high)]
             for r in compared.itertuples()])
