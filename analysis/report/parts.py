"""The report's sections in their order, each part a descriptor: a table section (analysis/sections.py's
``TableSection``, declared beside its builder in analysis/tables/ or analysis/verdicts/), or a ``Part``: a name and
the builder of the sections it shows from what the report computed once (``Assembly``), where its sections are more
than one table's (the decision, the headline per system, a matrix per host) or depend on the report's shared
figures. ``build()`` walks ``PARTS``; where a section appears beyond the report (the terminal, the decision page) its
``role`` says, never its title."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Union

import pandas as pd

from hvdbench.core.errors import ReportError

from . import terminal, views
from ..collect import Collection
from ..document import Report, Section
from ..projection.project import DEFAULT_NODES, project
from ..projection.shown import projection_section
from ..sections import Inputs, TableSection, Terminal
from ..tables.comm import COMM_TEXT, horovod_over_mpi, peak_rows, peak_table, ratio_rows
from ..tables.critical_batch import CRITICAL_SECTION
from ..tables.datapath import DATAPATH_SECTION
from ..tables.details import BREAKDOWN_SECTION, DETAILS_SECTION, profile_rows
from ..tables.full_node import THRESHOLD as FULL_THRESHOLD, full_node_rows, full_node_text
from ..tables.p2p import P2P_TEXT, host_rows, matrix_rows, p2p_table
from ..tables.pairs import PAIRS_TEXT, pair_rows
from ..tables.quality import QUALITY_SECTION
from ..tables.scaling import (ADAPTIVE_TEXT, WARMUP_TEXT, adaptive_rows, straggler_rows, straggler_text,
                              warmup_rows)
from ..tables.screening import THRESHOLD, screening_rows, screening_text
from ..tables.summary import CROSS_SECTION, KNOBS_SECTION, best_configurations, best_rows, describe
from ..tables.system import FABRIC_TEXT, SYSTEM_TEXT, fabric_rows
from ..verdicts.decision import weighted_table


@dataclass
class Assembly:
    """What every part is built from, computed once: the table sections' inputs, the collectives, the stragglers,
    the screens, the comparison of systems and its sections, the headline sections, the executive summary's lines
    and the system's description; ``tables``: every table kept (CSV and Parquet), filled as the parts are built."""

    inputs: Inputs
    comm: pd.DataFrame
    slow: pd.DataFrame
    screen: pd.DataFrame
    full: pd.DataFrame
    compared: pd.DataFrame
    decided: list[Section]
    headline: list[Section]
    summary: list[str]
    described: pd.DataFrame
    threshold: float
    warmup: int | None
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)

    @property
    def collection(self) -> Collection:
        return self.inputs.collection


@dataclass(frozen=True)
class Part:
    """Sections one builder makes from the Assembly (none where the runs hold nothing for them)."""

    name: str
    build: Callable[[Assembly], list[Section]]
    terminal: Callable[[Report], Terminal] | None = None  # what it says on the terminal (report/terminal.py)


def _summary(a: Assembly) -> list[Section]:
    return [Section("Executive summary", "", lines=a.summary)] if a.summary else []


def _system(a: Assembly) -> list[Section]:
    """The system under test, where the runs say more of it than its name."""
    if len(a.described.columns) <= 1:
        return []
    return [Section("System under test", SYSTEM_TEXT, list(a.described.columns),
                    a.described.fillna("-").values.tolist(), role="system")]


def _axes(a: Assembly) -> list[Section]:
    return [Section(title, text, header, rows) for title, text, (header, rows) in views.axis_views(a.inputs.table)]


def _best(a: Assembly) -> list[Section]:
    best = best_configurations(a.inputs.table)
    if not (len(best) and (best["np"] > 1).any()):
        return []
    return [Section("Best configuration per workload", "At the largest GPU count each workload was measured.",
                    *best_rows(best, describe))]


def _screens(a: Assembly) -> list[Section]:
    """Screening (each GPU alone against its fleet) and full-node screening, where the runs hold them."""
    sections = []
    if len(a.screen):
        sections.append(Section("Screening", screening_text(THRESHOLD), *screening_rows(a.screen)))
        a.tables["screening"] = a.screen
    if len(a.full):
        sections.append(Section("Full-node screening", full_node_text(FULL_THRESHOLD), *full_node_rows(a.full)))
        a.tables["full_node"] = a.full
    return sections


def _stragglers(a: Assembly) -> list[Section]:
    return [Section("Stragglers", straggler_text(a.slow, a.threshold), *straggler_rows(a.slow))]


def _fabric(a: Assembly) -> list[Section]:
    header, rows = fabric_rows(a.collection.runs)
    pairs = a.tables.get("fabric_pairs")
    return ([Section("The network NCCL used", FABRIC_TEXT, header, rows)] if rows else []) + (
        [Section("Fabric between nodes", PAIRS_TEXT, *pair_rows(pairs))] if pairs is not None and len(pairs) else [])


def _profile(a: Assembly) -> list[Section]:
    if not len(a.collection.profile):
        return []
    return [Section("Top operators (--profile)", "Rank 0's five most expensive operators per profiled run; every "
                    "rank's in profile.csv, the traces beside the logs.", *profile_rows(a.collection.profile))]


def _runs(a: Assembly) -> list[Section]:
    """Warm-up, the adaptive run lengths and what was left out."""
    runs, stats = a.collection.runs, a.inputs.stats
    out = [Section("Warm-up", WARMUP_TEXT, *warmup_rows(runs, stats))]
    if runs["target_ci_pct"].notna().any():
        out.append(Section("Adaptive run length", ADAPTIVE_TEXT, *adaptive_rows(runs, stats)))
    return out + [Section(title, text, header, rows) for title, text, header, rows in views.problems(a.collection)]


def _kept(a: Assembly) -> list[Section]:
    """No section: the comparison (compare.csv), the decision's rows and weights, and the profiles kept as tables."""
    if not a.compared.empty:
        a.tables["compare"] = a.compared
        if a.compared.attrs.get("decided") is not None:
            a.tables["decision"] = a.compared.attrs["decided"]
        if a.compared.attrs.get("weighted"):
            a.tables["weighted"] = weighted_table(a.compared.attrs["weighted"])
    if len(a.collection.profile):
        a.tables["profile"] = a.collection.profile
    return []


def _collectives(a: Assembly) -> list[Section]:
    """The collectives' peaks and Horovod against raw MPI."""
    if not len(a.comm):
        return []
    a.tables["collectives"] = a.comm
    devices = a.comm.attrs.get("devices", [])
    out = [Section("Collectives", COMM_TEXT, *peak_rows(peak_table(a.comm), a.inputs.table, devices))]
    ratio = horovod_over_mpi(a.comm)
    if len(ratio):
        out.append(Section("Horovod against raw MPI", "busbw through Horovod / through mpi4py, near 64 MiB.",
                           *ratio_rows(ratio, devices)))
    return out


def _p2p(a: Assembly) -> list[Section]:
    """Each host's peer-to-peer and host-GPU matrices."""
    p2p = p2p_table(a.collection)
    if not len(p2p):
        return []
    a.tables["p2p"] = p2p
    out = []
    for (run_id, host), cases in p2p.groupby(["run_id", "host"], sort=True, dropna=False):
        where = f"{host} ({run_id})"
        out.append(Section(f"Peer-to-peer bandwidth, {where}", P2P_TEXT, *matrix_rows(cases, "uni")))
        if (cases["mode"] == "bi").any():
            out.append(Section(f"Both directions at once, {where}", "", *matrix_rows(cases, "bi")))
        out.append(Section(f"Host and GPU, {where}", "Pinned host memory.", *host_rows(cases)))
    return out


def _projection(a: Assembly) -> list[Section]:
    """The projection to 1-64 nodes where the results allow one (training runs with their independent twin and
    allreduce curves within and across nodes); none where they do not (``hvdbench project`` says what is missing)."""
    collection = a.collection
    if collection.comm.empty or not (collection.runs["nodes"] > 1).any():
        return []
    try:
        return [projection_section(project(collection, DEFAULT_NODES, warmup=a.warmup, stats=a.inputs.stats))]
    except ReportError:
        return []


def walk(part: Union[Part, TableSection], a: Assembly) -> list[Section]:
    """A part's sections: a table section built, kept as its table and shown where it has rows; a Part's own."""
    if isinstance(part, Part):
        return part.build(a)
    table = part.build(a.inputs)
    if not len(table):
        return []
    a.tables[part.name] = table
    return [Section(part.title, part.text, *part.rows(table), folded=part.folded,
                    banner=part.banner(table) if part.banner is not None else [])]


PARTS: tuple[Union[Part, TableSection], ...] = (
    Part("executive summary", _summary),
    # the verdicts, systems side by side, what one system measured alone
    Part("decision", lambda a: a.decided, terminal.decision),
    Part("system under test", _system),
    Part("headline", lambda a: a.headline, terminal.headline),  # a table per system and arguments
    Part("swept axes", _axes),
    # what a buyer compares, after the headline
    QUALITY_SECTION, CRITICAL_SECTION, KNOBS_SECTION, CROSS_SECTION, DATAPATH_SECTION,
    Part("best configuration", _best),
    Part("screening", _screens, terminal.screens),
    Part("stragglers", _stragglers, terminal.stragglers),
    # everything else the runs recorded
    BREAKDOWN_SECTION, DETAILS_SECTION,
    Part("network NCCL used", _fabric),
    Part("top operators", _profile),
    Part("warm-up, run length, left out", _runs),
    Part("kept tables", _kept),
    Part("collectives", _collectives, terminal.collectives),
    Part("peer-to-peer", _p2p),
    Part("projection", _projection),
)
