"""Report: the scaling table as Markdown, CSV and a terminal table, with what was left out and why."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from hvdbench.suite.errors import ReportError

from .collect import Collection, collect
from .comm import comm_table, horovod_over_mpi, peak_table, plot_bandwidth
from .scaling import scaling_table

HEADLINE = ["benchmark", "model", "launcher", "controller", "placement", "np", "throughput", "ci", "speedup", "efficiency",
            "median_step_ms", "cv"]
TITLES = {"benchmark": "benchmark", "model": "model", "launcher": "launcher", "controller": "controller",
          "placement": "placement", "np": "ranks",
          "throughput": "{unit}/s", "ci": "95% CI", "speedup": "speedup", "efficiency": "efficiency",
          "median_step_ms": "median step (ms)", "cv": "step CV"}


def _num(value: float, digits: int = 1) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:,.{digits}f}"


def headline_rows(table: pd.DataFrame) -> list[list[str]]:
    """The headline columns of each scaling row, formatted."""
    rows = []
    for _, r in table.iterrows():
        rows.append([r["benchmark"], r["model"], r["launcher"], r["controller"], r["placement"] or "-", str(r["np"]), _num(r["throughput"]),
                     f"{_num(r['ci_low'])} – {_num(r['ci_high'])}", _num(r["speedup"], 2),
                     "n/a" if math.isnan(r["efficiency"]) else f"{r['efficiency']:.0%}",
                     _num(r["median_step_ms"], 2), f"{r['cv']:.1%}"])
    return rows


def _titles(table: pd.DataFrame) -> list[str]:
    units = sorted(set(table["unit"])) if len(table) else ["samples"]
    unit = units[0] if len(units) == 1 else "samples"
    return [TITLES[c].format(unit=unit) for c in HEADLINE]


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table; pipes in cells are escaped."""
    def cell(text: str) -> str:
        return str(text).replace("|", "\\|")
    lines = ["| " + " | ".join(map(cell, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines)


def text_table(header: list[str], rows: list[list[str]]) -> str:
    """Aligned plain-text table for the terminal."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    return "\n".join([fmt.format(*header), fmt.format(*("-" * w for w in widths))]
                     + [fmt.format(*row) for row in rows])


def render_markdown(table: pd.DataFrame, collection: Collection) -> str:
    """The whole report as Markdown."""
    out = ["# hvdbench scaling report", ""]
    runs = collection.runs
    out.append(f"{len(runs)} run(s) read, {int((runs['status'] == 'ok').sum())} complete."
               + (" Throughput is the sum over ranks of each rank's median per-step rate (samples / step "
                  "time; timed steps only, warm-up excluded); the 95% interval is a percentile bootstrap over "
                  "steps (over repeats where a configuration was repeated). Speedup = throughput(N) / "
                  "throughput(1 rank); efficiency = speedup / N." if len(table) else ""))
    out.append("")
    if collection.comm_skipped:
        out += ["Collective cases not run here: " + "; ".join(collection.comm_skipped) + ".", ""]
    for (system, args), group in table.groupby(["system", "args"], sort=True):
        out += [f"## {system}: `{args or '(defaults)'}`", "", markdown_table(_titles(group), headline_rows(group)), ""]
    excluded = runs[runs["status"] != "ok"]
    if len(excluded) or collection.spec_errors:
        out += ["## Runs left out", ""]
        out += [f"- `{r.run_id}`: {r.reason}" for r in excluded.itertuples()]
        out += [f"- {error}" for error in collection.spec_errors]
        out.append("")
    if collection.file_issues:
        out += ["## Malformed log lines", ""]
        for issue in collection.file_issues:
            out.append(f"- `{issue.path}`: {issue.malformed} line(s)" +
                       (f" (e.g. {issue.examples[0]})" if issue.examples else ""))
        out.append("")
    return "\n".join(out)


def comm_markdown(comm: pd.DataFrame, scaling: pd.DataFrame, plot: Path | None) -> list[str]:
    """The collectives section: peak busbw, Horovod against raw MPI, the plot, and training beside them."""
    out = ["## Collectives", "",
           "Per iteration the slowest rank's time; algbw = bytes / mean time; busbw as nccl-tests defines it "
           "(allreduce × 2(n−1)/n, allgather and alltoall × (n−1)/n, broadcast × 1). Every result was checked.", ""]
    peaks = peak_table(comm)
    header = ["system", "placement", "ranks", "op", "through", "dtype", "peak busbw (GB/s)", "at bytes",
              "training efficiency here"]
    rows = []
    for r in peaks.itertuples():
        same = scaling[(scaling["system"] == r.system) & (scaling["placement"] == r.placement) & (scaling["np"] == r.np)]
        training = ", ".join(f"{t.model} {t.efficiency:.0%}" for t in same.itertuples() if not math.isnan(t.efficiency))
        rows.append([r.system, r.placement or "-", str(r.np), r.op, r.path, r.dtype, f"{r.peak_busbw_gbs:.3f}",
                     f"{r.at_bytes:,}", training or "-"])
    out += [markdown_table(header, rows), ""]
    ratio = horovod_over_mpi(comm)
    if len(ratio):
        out += ["Horovod / raw MPI busbw near 64 MiB:", "",
                markdown_table(["system", "placement", "ranks", "op", "dtype", "Horovod over", "bytes", "Horovod GB/s",
                                "MPI GB/s", "ratio"],
                               [[r.system, r.placement or "-", str(r.np), r.op, r.dtype, r.path, f"{r.bytes:,}",
                                 f"{r.horovod_gbs:.3f}", f"{r.mpi_gbs:.3f}", f"{r.ratio:.2f}"] for r in ratio.itertuples()]),
                ""]
    if plot is not None:
        out += [f"![bus bandwidth against message size]({plot.name})", ""]
    return out


def build_report(roots: list[Path], out_dir: Path) -> tuple[str, dict[str, Path]]:
    """Collect, compute and write report.md and CSV tables; return the terminal text and the paths."""
    collection = collect(roots)
    if collection.runs.empty:
        where = ", ".join(map(str, roots))
        raise ReportError(f"no runs found under {where} (no run.json)"
                          + (f"; {collection.spec_errors[0]}" if collection.spec_errors else ""))
    table = scaling_table(collection)
    comm = comm_table(collection)
    if table.empty and comm.empty:
        reasons = "; ".join(sorted(set(collection.runs["reason"]))[:3])
        raise ReportError(f"no complete run under {', '.join(map(str, roots))}: {reasons}")
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"markdown": out_dir / "report.md", "scaling": out_dir / "scaling.csv", "runs": out_dir / "runs.csv"}
    markdown = render_markdown(table, collection)
    texts = [text_table(_titles(table), headline_rows(table))] if len(table) else []
    if len(comm):
        paths["comm"] = out_dir / "collectives.csv"
        comm.to_csv(paths["comm"], index=False)
        plot = plot_bandwidth(comm, out_dir / "collectives.svg")
        markdown += "\n" + "\n".join(comm_markdown(comm, table, plot))
        peaks = peak_table(comm)
        texts.append(text_table(["ranks", "op", "through", "dtype", "peak busbw GB/s", "at bytes"],
                                [[str(r.np), r.op, r.path, r.dtype, f"{r.peak_busbw_gbs:.3f}", f"{r.at_bytes:,}"]
                                 for r in peaks.itertuples()]))
    paths["markdown"].write_text(markdown + "\n", encoding="utf-8")
    table.to_csv(paths["scaling"], index=False)
    collection.runs.to_csv(paths["runs"], index=False)
    notes = []
    left_out = collection.runs[collection.runs["status"] != "ok"]
    if len(left_out):
        notes.append(f"{len(left_out)} run(s) left out (see report.md)")
    malformed = sum(i.malformed for i in collection.file_issues)
    if malformed:
        notes.append(f"{malformed} malformed log line(s) in {len(collection.file_issues)} file(s)")
    return "\n\n".join(texts) + ("\n" + "; ".join(notes) if notes else ""), paths
