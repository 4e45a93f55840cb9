"""``history publish DIR``: a self-contained static site of the history (no script, no file from elsewhere): an index
of every configuration with its check's finding, and a page each with its trend (every run's throughput, each
stretch between change points as its geometric mean with the band its runs spread over, change points marked with
what they amount to, the environment's changes marked with what changed) and its runs."""

from __future__ import annotations

import hashlib
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hvdbench.core.errors import WriteError
from hvdbench.core.validate import inert
from ..document import Report, Section
from ..drawing import figure, plain, svg_text
from ..formatting import missing
from ..report.html import render_html
from .changes import History
from .check import TO_TARGET, changed_text, configurations, environment_changes, judged_configuration

CHANGE_COLOUR, ENV_COLOUR = "#c0392b", "#7f8c8d"


def _date(seconds: float) -> str:
    return datetime.fromtimestamp(float(seconds), timezone.utc).strftime("%Y-%m-%d %H:%M")


def page_name(config: str, system: str) -> str:
    """A configuration's page: named by a digest of its system and configuration key."""
    return "config-" + hashlib.sha256(f"{system}\0{config}".encode()).hexdigest()[:12] + ".html"


def shown(group: pd.DataFrame, metric: str) -> tuple[np.ndarray, str]:
    """What a trend plots: throughput, or a run to target's time to it (seconds; its pace was judged)."""
    if metric == TO_TARGET:
        return group["time_to_target_s"].astype(float).to_numpy(), "time to target (s)"
    return group["throughput"].astype(float).to_numpy(), plain(f"{group.iloc[0]['unit']}/s")


def trend_svg(group: pd.DataFrame, judged: History, metric: str = "throughput") -> str:
    """The trend of one configuration as SVG: runs, each stretch's mean and band (its runs' spread, 95%), change
    points (ids ``change-N``) and environment changes (ids ``environment-N``, labelled ``env N``: what changed is
    listed under the plot by that number, never rotated text as tall as the plot) marked."""
    fig, ax = figure(9.0, 3.6)
    when = [datetime.fromtimestamp(float(t), timezone.utc) for t in group["started"]]
    values, label = shown(group, metric)
    ax.plot(when, values, "o", color="#2c3e50", markersize=3.5, label="a run")
    bounds = [0, *judged.changes, len(values)]
    for start, end in zip(bounds[:-1], bounds[1:]):
        logs = np.log(values[start:end])
        mean = float(np.exp(logs.mean()))
        sd = float(np.std(logs, ddof=1)) if end - start > 1 else 0.0
        ax.plot(when[start:end], [mean] * (end - start), color="#2980b9", linewidth=1.5)
        ax.fill_between(when[start:end], mean * math.exp(-1.96 * sd), mean * math.exp(1.96 * sd), color="#2980b9",
                        alpha=0.15, linewidth=0)
    top = float(values.max())
    for n, at in enumerate(judged.changes, 1):
        line = ax.axvline(when[at], color=CHANGE_COLOUR, linestyle="--", linewidth=1.4)
        line.set_gid(f"change-{n}")
        ax.annotate(plain(f"change: {judged.finding.finding}" if at == judged.changes[-1] else "change"),
                    (when[at], top), color=CHANGE_COLOUR, fontsize=8, ha="left", va="bottom")
    for n, (at, changed) in enumerate(environment_changes(list(group["environment"])), 1):
        line = ax.axvline(when[at], color=ENV_COLOUR, linestyle=":", linewidth=1.2)
        line.set_gid(f"environment-{n}")
        ax.annotate(f"env {n}", (when[at], 0.02), xycoords=("data", "axes fraction"), color=ENV_COLOUR,
                    fontsize=8, ha="right", va="bottom")  # what changed: listed under the plot by this number
    ax.set_ylabel(label)
    ax.grid(alpha=0.3)
    fig.autofmt_xdate()
    return svg_text(fig)


def _latest(group: pd.DataFrame, judged: History) -> str:
    """``latest change 2026-10-20 02:08 (run x): after / before 0.927 [0.910–0.945]: regression (…)``."""
    if not judged.changes:
        return judged.finding.sentence()
    run = group.iloc[judged.changes[-1]]
    return (f"latest change {_date(run['started'])} (first run after: {run['run_id']}): after / before "
            f"{judged.ratio:.3f} [{judged.low:.3f}–{judged.high:.3f}] over {judged.after} and {judged.before} runs: "
            f"{judged.finding.sentence()}")


def _config_page(group: pd.DataFrame, judged: History, metric: str) -> Report:
    """A configuration's page: its latest finding over its trend, the environment's changes, its runs."""
    first = group.iloc[0]
    title = f"{first['system']} {first['benchmark']} {first['model']} at {first['np']} rank(s)"
    values, label = shown(group, metric)
    runs = [[_date(r.started), _cell(r.run_id), f"{v:,.1f}", _cell(r.host)] for r, v in zip(group.itertuples(), values)]
    env = [f"env {n}, {_date(group.iloc[at]['started'])}: {changed_text(c)}"
           for n, (at, c) in enumerate(environment_changes(list(group["environment"])), 1)]
    return Report("", [Section("Trend", text=_latest(group, judged), mark=_mark(judged),
                               figure=("trend.svg", trend_svg(group, judged, metric))),
                       Section("The environment changed", lines=env or ["never"]),
                       Section("Runs", header=["started (UTC)", "run", label, "host"], rows=runs,
                               foot=[f"configuration: {first['config']}"])],
                  {}, {}, [], title=title, back=("all configurations", "index.html"), script=False)


def _index(rows: list[list[str]], links: list[str], margin: float) -> Report:
    """The site's front page: every configuration, its runs and its check's finding, each linking to its page."""
    intro = (f"Each configuration's runs against its own history (E-divisive means, a permutation test at 1%; the "
             f"latest change judged at ±{margin:.1%}).")
    table = Section("Configurations", header=["configuration", "ranks", "runs", "latest change", "finding"],
                    rows=rows, links=links)
    return Report(intro, [table], {}, {}, [], title="hvdbench history", script=False)


def _cell(value: Any) -> str:
    """A value from the store as a cell (a missing one as -)."""
    return "-" if missing(value) else str(value)


def _mark(judged: History) -> str:
    """The finding as a page colours it."""
    return judged.finding.finding.replace(" ", "-")


def publish(runs: pd.DataFrame, folder: Path, margin: float,
            accepted: set[str] | frozenset[str] = frozenset()) -> list[Path]:
    """The site into ``folder`` (made where missing): index.html and a page a configuration, each judged as history
    check judges it (``accepted``: the run keys an accept verdict passed), written through the report's document
    model (every text from the store escaped there); the pages written."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        written, rows, links = [], [], []
        for every in configurations(runs):
            metric, group, judged = judged_configuration(every, margin, accepted)
            if group.empty:
                continue
            first = group.iloc[0]
            name = page_name(str(first["config"]), str(first["system"]))
            (folder / name).write_text(render_html(_config_page(group, judged, metric)), encoding="utf-8")
            written.append(folder / name)
            latest = _date(group.iloc[judged.changes[-1]]["started"]) if judged.changes else "-"
            rows.append([f"{first['system']} {first['benchmark']} {first['model']}", _cell(first["np"]),
                         str(len(group)), latest, judged.finding.sentence()])
            links.append(name)
        (folder / "index.html").write_text(render_html(_index(rows, links, margin)), encoding="utf-8")
    except OSError as exc:
        raise WriteError(f"history publish {folder}: {inert(exc)}") from None
    return [folder / "index.html", *written]
