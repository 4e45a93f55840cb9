"""What each part of the report says on the terminal after a report (``Terminal``: blocks under the headline tables,
one-line notes at the end), each hook beside its part's descriptor in ``PARTS``; ``output.terminal_text`` walks
them in order and adds what the collection itself says (runs left out, unreadable, malformed)."""

from __future__ import annotations

from hvdbench.core.validate import inert

from . import decision_view
from ..document import Report, text_table
from ..sections import Terminal
from ..tables.comm import TIMED, peak_table
from ..tables.efficiency import disturbed_baselines, ranks_title
from ..verdicts.decision import cost_verdict_lines, decision_lines


def decision(report: Report) -> Terminal:
    """The decision between systems (its verdicts and costs), then the systems side by side."""
    blocks = []
    section = next((s for s in report.sections if s.role == "decision"), None)
    decided = report.tables.get("decision")
    if section is not None:
        said = [*section.banner, *decision_lines(decided), *cost_verdict_lines(decided),
                *decision_view.cost_figures(report.tables["compare"])] if decided is not None else []
        blocks.append(inert(section.title) + "\n" + "\n".join(inert(line) for line in [*said, *section.lines]))
    if "compare" in report.tables:
        compared = report.tables["compare"]
        blocks.append("systems side by side\n" + text_table(*decision_view.compare_rows(compared,
                                                                                        compared.attrs["baseline"])))
    return Terminal(blocks)


def headline(report: Report) -> Terminal:
    """A stalled baseline, beside the figures it spoils."""
    return Terminal(notes=disturbed_baselines(report.tables["scaling"]) if "scaling" in report.tables else [])


def collectives(report: Report) -> Terminal:
    """Each collective's peak bus bandwidth."""
    if "collectives" not in report.tables:
        return Terminal()
    table = report.tables["collectives"]
    header = [ranks_title(table.attrs.get("devices", [])), "op", "through", "dtype", "timed", "peak busbw GB/s",
              "at bytes"]
    return Terminal([text_table(header, [[str(r.np), r.op, r.path, r.dtype, TIMED[r.timing], f"{r.peak_busbw_gbs:.3f}",
                                          f"{r.at_bytes:,}"] for r in peak_table(table).itertuples()])])


def screens(report: Report) -> Terminal:
    """How many GPUs or nodes each screen flagged, and which."""
    notes = []
    if "screening" in report.tables:
        screen = report.tables["screening"]
        flagged = screen[screen["flagged"]]
        notes.append(f"screening: {len(flagged)} of {len(screen)} GPU(s)/node(s) flagged"
                     + (": " + ", ".join(f"{r.host} {r.unit}" for r in flagged.itertuples()) if len(flagged) else ""))
    if "full_node" in report.tables:
        full = report.tables["full_node"]
        flagged = full[full["flagged"] & (full["level"] == "gpu")]
        notes.append(f"full-node screening: {len(flagged)} of {(full['level'] == 'gpu').sum()} GPU(s) flagged under "
                     "full load" + (": " + ", ".join(f"{r.host} {r.unit}" for r in flagged.itertuples())
                                    if len(flagged) else ""))
    return Terminal(notes=notes)


def stragglers(report: Report) -> Terminal:
    """How many ranks straggled."""
    slow = report.tables.get("stragglers")
    return Terminal(notes=[f"{len(slow)} straggling rank(s) (see report.md)"] if slow is not None and len(slow) else [])
