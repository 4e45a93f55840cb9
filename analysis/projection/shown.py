"""The projection shown and written: its table's rows, what every number came from, the efficiency plot, the
report section, and ``hvdbench project``'s files (projection.md, the CSVs, the plot, the time to target)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from hvdbench.core.errors import ReportError
from hvdbench.core.validate import inert

from ..collect import collect
from ..document import Section, csv_safe, section_markdown, text_table
from .allreduce_model import CHOSEN, Fabric, parse_link
from .at_batch import BatchAsked
from .backtest_shown import track_record_line
from .project import DEFAULT_NODES, EFFICIENCY_BELOW, ERROR_PER_DOUBLING, Projection, efficiency_holds, project
from .simulated import DISAGREE, Tree, second_opinion
from .target import Target
from .to_target import time_to_target, to_target_section


def _interval(value: float, low: float, high: float, fmt: str) -> str:
    if pd.isna(low) or pd.isna(high):
        return f"{value:{fmt}} [n/a: too few steps]"
    return f"{value:{fmt}} [{low:{fmt}}-{high:{fmt}}]"


def _beyond(r: Any) -> str:
    """What a row projects beyond what its workload's runs measured: more nodes, more GPUs per node."""
    said = [] if pd.isna(r.extrapolated_x) else [f"extrapolated ×{r.extrapolated_x:g}"]
    if r.gpus_per_node > r.measured_gpus_per_node:
        said.append(f"{r.gpus_per_node} GPUs per node (measured {r.measured_gpus_per_node})")
    if isinstance(r.link_note, str) and r.link_note:
        said.append("link from 2 nodes: tree's best case")
    if pd.notna(r.batch_e) and r.batch_e > 0:
        said.append(f"batch {r.batch_per_gpu:,} a GPU: x{math.exp(r.batch_e):.3g} from the nearest measured")
    if pd.notna(r.simulated_x) and abs(r.simulated_x - 1) > DISAGREE:
        said.append(f"SimGrid: ×{r.simulated_x:.2f} the formula's ring across nodes (contention it cannot see)")
    return "; ".join(said)


def algorithm_cell(algorithm: str, runs_as: Any) -> str:
    """The algorithm a row assumes: forced, or NCCL's choice with what it chose (``nccl: tree``)."""
    return f"{algorithm}: {runs_as}" if algorithm == CHOSEN and isinstance(runs_as, str) and runs_as else algorithm


def table_rows(table: pd.DataFrame, other_hardware: bool = False) -> tuple[list[str], list[list[str]]]:
    """The headline columns of the projection, as text cells; onto ``other_hardware`` (a target), each row's
    workload says what its compute was measured on."""
    header = ["workload", "link", "algorithm", "nodes", "GPUs", "batch a GPU", "throughput [95%]", "speedup",
              "efficiency [95%]", "step ms (overlapped-serial)", "measured step ms", "error", "beyond measured"]
    rows = [[f"{r.workload} (compute measured on {r.compute_on})" if other_hardware else r.workload, r.link,
             algorithm_cell(r.algorithm, r.runs_as), str(r.nodes), str(r.np),
             "" if pd.isna(r.batch_per_gpu) else f"{r.batch_per_gpu:,}",
             _interval(r.throughput, r.throughput_low, r.throughput_high, ",.1f"), f"{r.speedup:.2f}",
             _interval(r.efficiency * 100, r.efficiency_low * 100, r.efficiency_high * 100, ".0f") + "%",
             f"{r.step_ms:.1f} ({r.step_overlapped_ms:.1f}-{r.step_serial_ms:.1f})",
             "" if pd.isna(r.measured_step_ms) else f"{r.measured_step_ms:.1f}",
             "" if pd.isna(r.error_pct) else f"{r.error_pct:+.1f}%",
             _beyond(r)] for r in table.itertuples()]
    return header, rows


def inputs_lines(p: Projection) -> list[str]:
    """What every number came from: per workload its inputs and overlap, then each link's terms."""
    lines = []
    for w in p.workloads:
        phi, low, high, how = p.overlap[w.label]
        lines.append(f"{w.label} ({w.unit}/s): " + "; ".join(w.inputs)
                     + f"; overlap {phi:.2f} [{low:.2f}-{high:.2f}] {how}")
    for link in p.links.itertuples():
        lines.append(f"{link.link} ({link.system}): alpha {link.alpha_us:.1f} µs, {link.gbs:.3g} GB/s "
                     f"({link.source})")
    notes = [n for n in dict.fromkeys(p.table["link_note"].dropna()) if n]
    lines += [f"measured link between nodes: {n}" for n in notes]
    if CHOSEN in set(p.table["algorithm"]):
        lines.append(f"{CHOSEN}: the algorithm NCCL would pick for the step's largest fused buffer at each node count, "
                     "the fastest by its cost (ring, tree" + "".join(
                         f", {a}" for a in (p.target.nccl_fabric().algorithms()[2:] if p.target else ())) + "); each "
                     "buffer of the step is costed by its own pick")
    lines += p.notes
    if p.target is not None:
        lines.append(p.target.describe())
    below = p.target.efficiency_below if p.target else EFFICIENCY_BELOW
    return lines + efficiency_holds(p.table, below)


def plot_projection(table: pd.DataFrame) -> str | None:
    """Projected efficiency against GPUs: a panel per workload, a line per link and algorithm, the 95%
    interval shaded, measured runs as points."""
    from ..drawing import figure, integer_log_axis, plain, svg_text

    workloads = list(dict.fromkeys(table["workload"]))
    if not workloads:
        return None
    fig, axes = figure(5.5 * len(workloads), 4, cols=len(workloads))
    for ax, name in zip(np.atleast_1d(axes), workloads):
        mine = table[table["workload"] == name]
        single = mine[mine["nodes"] == 1]
        for (link, algorithm), group in mine[mine["nodes"] > 1].groupby(["link", "algorithm"], sort=True):
            group = pd.concat([single, group]).sort_values("np")
            ax.plot(group["np"], group["efficiency"] * 100, marker="o", markersize=3,
                    label=plain(f"{link} {algorithm}"))
            ax.fill_between(group["np"], group["efficiency_low"] * 100, group["efficiency_high"] * 100, alpha=0.15)
        measured = mine.dropna(subset=["measured_throughput"])
        if len(measured):
            speed = measured["throughput"] / measured["speedup"]  # the baseline each row used
            ax.scatter(measured["np"], measured["measured_throughput"] / speed / measured["np"] * 100, color="black",
                       marker="x", zorder=3, label="measured")
        integer_log_axis(ax, sorted(set(int(n) for n in mine["np"])))
        ax.set_title(plain(name), fontsize=9)
        ax.set_xlabel("GPUs (ranks)")
        ax.set_ylabel("projected efficiency (%)")
        ax.set_ylim(0, 110)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    return svg_text(fig)


def write_projection(dirs: Sequence[Path], out: Path, nodes: Sequence[int] | None = None,
                     gpus_per_node: int | None = None, links: Sequence[str] = (),
                     algorithms: Sequence[str] | None = None, warmup: int | None = None,
                     target: Target | None = None, keep_measured_compute: bool = False,
                     batch: BatchAsked | None = None) -> tuple[str, dict[str, Path]]:
    """Project, then write projection.md (a report section), projection.csv, links.csv and projection.svg;
    returns the text printed and the paths. A ``target`` gives the node counts, GPUs per node, the bus
    within a node and the link between nodes, unless ``nodes``/``gpus_per_node`` are given; its GPU model must
    be the one the compute was measured on, unless ``keep_measured_compute`` (then every row says whose it is);
    ``batch``: the batch a GPU at each node count (at_batch.py)."""
    if target is not None:
        nodes, gpus_per_node = nodes or target.nodes, gpus_per_node or target.gpus_per_node
        links = [target.inter_link(), *links]
        algorithms = algorithms or (CHOSEN, "hierarchical")
    nodes = nodes or DEFAULT_NODES
    for text in links:
        parse_link(text)  # a bad spec is one line before any results are read
    collection = collect(dirs)
    result = project(collection, nodes, gpus_per_node, links, algorithms, warmup,
                     target.intra_link() if target else None, fabric=target.nccl_fabric() if target else Fabric(),
                     batch=batch)
    result.target = target
    if target is not None:
        check_target_compute(result, target, keep_measured_compute)
        if target.tree is not None:
            second_opinions(result, target, target.tree)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"cannot create the projection's directory {out}: {exc.strerror}") from None
    paths = {"markdown": out / "projection.md", "csv": out / "projection.csv", "links": out / "projection-links.csv",
             "plot": out / "projection.svg", "to_target": out / "projection-to-target.csv"}
    trained = time_to_target(result.table, result.workloads, collection.runs)
    csv_safe(trained).to_csv(paths["to_target"], index=False)
    csv_safe(result.table).to_csv(paths["csv"], index=False)
    csv_safe(result.links).to_csv(paths["links"], index=False)
    svg = plot_projection(result.table)
    if svg:
        paths["plot"].write_text(svg, encoding="utf-8")
    section = projection_section(result)
    trains = [to_target_section(trained)] if len(trained) else []
    paths["markdown"].write_text("\n".join([*section_markdown(section),
                                            "![projected efficiency](projection.svg)" if svg else "", "",
                                            *[line for t in trains for line in section_markdown(t)]]),
                                 encoding="utf-8")
    head = onto_other_hardware(result)  # the section's first lines: said first in the terminal too
    text = "\n".join([*map(inert, head), "inputs:", *[f"  {inert(line)}" for line in section.lines[len(head):]], "",
                      text_table(section.header, section.rows),
                      *[f"\n{t.title}\n{text_table(t.header, t.rows)}" for t in trains]])
    return text, paths


def second_opinions(result: Projection, target: Target, tree: Tree) -> None:
    """Each workload's ring across nodes simulated on the target's fabric: the ratio to the formula's on the rows over
    the target's link whose exchange across nodes is a ring (ring, hierarchical, NCCL's pick where it is the ring),
    and what was simulated (with its calibration) among the inputs."""
    table = result.table
    counts = sorted({int(n) for n in table["nodes"] if n > 1})
    ring = table["algorithm"].isin(["ring", "hierarchical"]) | (table["runs_as"] == "ring")  # a ring across nodes
    over = (table["link"] == parse_link(target.inter_link()).name) & ring.fillna(False)
    for w in result.workloads:
        found, lines = second_opinion(counts, w.model.grad_bytes, target.inter_gbs, target.inter_latency_us * 1e-6,
                                      tree)
        result.notes += [f"{w.label}: {line}" for line in lines]
        mine = over & (table["workload"] == w.label)
        table.loc[mine, "simulated_x"] = [found[n].ratio if n in found else np.nan for n in table.loc[mine, "nodes"]]


def check_target_compute(result: Projection, target: Target, keep: bool) -> None:
    """A ReportError where a workload's compute was measured on another device than the target's GPU model: its
    rows would be named the target's while their compute is not (unless ``keep``: asked for explicitly)."""
    other = [w for w in result.workloads if not target.matches(w.device)]
    if other and not keep:
        w = other[0]
        raise ReportError(f"--target {target.name}: its GPUs are {target.gpu}, but the compute of {w.label} "
                          "was measured "
                          f"on {w.device}: projecting it would name {w.device}'s speed {target.name}'s. Measure on a "
                          f"{target.gpu}, or give --keep-measured-compute to project the measured compute over the "
                          "target's links, said on every row")


def onto_other_hardware(result: Projection) -> list[str]:
    """The projection's first line where it runs measured compute over a target's links: whose compute it is."""
    if result.target is None:
        return []
    devices = sorted({w.device for w in result.workloads})
    same = all(result.target.matches(d) for d in devices)
    return [f"projected onto {result.target.name}'s links with compute measured on {', '.join(devices)}"
            + ("" if same else f", not on the target's {result.target.gpu}: its figures are not {result.target.gpu} "
               "figures")]


def projection_section(result: Projection) -> Section:
    """The projection as a report section: what it is, the inputs it was fitted from, the table."""
    other = result.target is not None and not all(result.target.matches(w.device) for w in result.workloads)
    header, rows = table_rows(result.table, other)
    return Section("Projection", "Step time per workload between exchange fully overlapped with backward and not "
                   "overlapped, at the overlap the measured runs show; allreduce cost per link class fitted from the "
                   "collectives curves; 95% intervals from resampling the measurements, widened by "
                   f"{ERROR_PER_DOUBLING:.0%} per doubling of the node count beyond the most nodes measured (the "
                   "model's measured error at one doubling). A model, not a measurement: check it against a "
                   "measured run where one exists (the error column). Inputs below.",
                   header, rows, lines=[*onto_other_hardware(result), *inputs_lines(result),
                                        *filter(None, [track_record_line()])])
