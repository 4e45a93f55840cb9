"""The report as a document: sections of formatted tables and prose, plots as SVG text; rendered here as
Markdown and terminal text (``html.py`` renders the same document as one HTML page)."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

import pandas as pd

from hvdbench.core.validate import inert, spreadsheet_safe


@dataclass
class Section:
    """One part of the report: a title, prose, and optionally a table."""

    title: str
    text: str = ""
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    code: bool = False  # the title is a literal (arguments), shown as code
    lines: list[str] = field(default_factory=list)  # a list of short lines (the executive summary)
    folded: tuple[int, ...] = ()  # columns a reader rarely needs: folded away on a narrow page (HTML)
    banner: list[str] = field(default_factory=list)  # what a reader must see before any figure (CPU stand-ins ...)
    figure: tuple[str, str] | None = None  # (file name, SVG) drawn inside the section
    foot: list[str] = field(default_factory=list)  # small print after the section: what its verdicts rest on
    notes: list[str] = field(default_factory=list)  # what a table's marked cells ([1]) say in full, under the table
    role: str = ""  # what it is where another page finds it (ROLES), never by its title; "": the report's alone
    links: list[str] = field(default_factory=list)  # the page each row's first cell links to (HTML; a site's index)
    mark: str = ""  # what the text says, for its colour on a page: a finding (regression, improvement, ...)


# the sections the decision page carries (and the terminal's decision), found by their role
ROLES = ("decision", "unpaired", "system")


@dataclass
class Report:
    """Everything the renderers need."""

    intro: str
    sections: list[Section]
    tables: dict[str, pd.DataFrame]
    plots: dict[str, str]
    headline: list[Section]
    title: str = "hvdbench scaling report"
    back: tuple[str, str] | None = None  # (text, page): a link above the title, to the page this one belongs to
    script: bool = True  # the page's rendering check (CHECK); off for a site read where scripts may not run


def csv_safe(table: pd.DataFrame) -> pd.DataFrame:
    """A table for CSV: its text cells made inert (control characters as escapes) and those a spreadsheet
    would run as a formula neutralised (Parquet keeps them as they are)."""
    out = table.copy()
    for column in out.columns:
        if out[column].dtype == object or isinstance(out[column].dtype, pd.StringDtype):
            out[column] = out[column].map(lambda v: spreadsheet_safe(inert(v)) if isinstance(v, str) else v)
    return out


_MARKUP = re.compile(r"\]\(|!\[|\*|~~|(?<!\w)_|_(?!\w)")  # a link or image, emphasis, strike-through (code spans stay)


def md_text(text: object) -> str:
    """Text from logs made inert in Markdown: one line, control characters as escapes (``inert``), HTML
    (``<script>``, ``<img onerror>``) as entities, pipes escaped, and Markdown's markup that acts (a link or image,
    emphasis, strike-through) escaped, so a label such as ``[x](http://…)`` or ``**DGX**`` reads as written; a code
    span stays one (it shows its text literally)."""
    escaped = html.escape(inert(text), quote=False).replace("|", "\\|")
    return _MARKUP.sub(lambda m: "".join("\\" + c if c in "[(*~_" else c for c in m.group()), escaped)


def md_code(text: object) -> str:
    """Text as a Markdown code span, fenced with more backticks than it holds (nothing inside is rendered)."""
    value = inert(text)
    fence = "`" * (1 + max((len(r) for r in re.findall(r"`+", value)), default=0))
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def markdown_table(header: list[str], rows: list[list[str]]) -> str:
    """A GitHub-flavoured Markdown table; every cell made inert (``md_text``)."""
    cell = md_text
    lines = ["| " + " | ".join(map(cell, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines)


def text_table(header: list[str], rows: list[list[str]]) -> str:
    """Aligned plain-text table for the terminal; every cell one line, made inert (a newline from a run's
    files would otherwise start a forged row)."""
    header, rows = [inert(x) for x in header], [[inert(x) for x in row] for row in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    return "\n".join([fmt.format(*header), fmt.format(*("-" * w for w in widths))]
                     + [fmt.format(*row) for row in rows])


def section_markdown(section: Section) -> list[str]:
    """One section as Markdown lines, every piece of text from the logs made inert."""
    # a code span shows HTML literally on GitHub but not in every renderer: markup goes escaped instead
    title = md_code(section.title) if section.code and not re.search(r"[<>&]", section.title) \
        else md_text(section.title)
    out = [f"## {title}", ""]
    out += [f"> **{md_text(line)}**" for line in section.banner] + ([""] if section.banner else [])
    if section.text:
        out += [md_text(section.text), ""]
    if section.lines:
        out += [f"- {md_text(line.strip())}" if not line.startswith("  ") else f"  - {md_text(line.strip())}"
                for line in section.lines] + [""]
    if section.header:
        out += [markdown_table(section.header, section.rows), ""]
    if section.notes:
        out += [f"<sub>{md_text(line)}</sub>  " for line in section.notes] + [""]
    if section.figure is not None:
        out += [f"![{md_text(section.title).replace(']', ')')}]({section.figure[0]})", ""]
    if section.foot:
        out += [f"<sub>{md_text(line)}</sub>  " for line in section.foot] + [""]
    return out


def render_markdown(report: Report) -> str:
    """The whole report as Markdown (plots referenced as SVG files beside it)."""
    out = [f"# {md_text(report.title)}", "", md_text(report.intro), ""]
    for section in report.sections:
        out += section_markdown(section)
    for i, title in enumerate(report.plots):
        out += [f"![{md_text(title).replace(']', ')')}](plot-{i + 1}.svg)", ""]
    return "\n".join(out)
