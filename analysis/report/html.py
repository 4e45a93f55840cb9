"""The report as one self-contained HTML file: no network, plots inline as SVG, every string escaped.

Made to read on a laptop: headers wrap, a table of many columns (WIDE or more) wraps its cells too, so that every
column fits a 1366-pixel window; a table wider still scrolls inside its own box, and the columns a reader rarely
needs (a section's ``folded`` ones) are folded away until "show every column" is ticked (CSS only, no script
needed)."""

from __future__ import annotations

import html
import re

from hvdbench.core.validate import inert

from ..document import Report, Section


def _h(text: object) -> str:
    """Text from runs or files, inert (one line, control characters as escapes) and HTML-escaped."""
    return html.escape(inert(text))

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 110em; padding: 0 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: .25em .5em; text-align: right; white-space: nowrap; }
th { background: #f3f3f3; white-space: normal; vertical-align: bottom; }
td:first-child, th:first-child { text-align: left; }
table.wide td { white-space: normal; } table.wide { font-size: 12px; }
td.text { white-space: normal; min-width: 12em; text-align: left; }
.scroll { overflow-x: auto; margin: .5em 0 1.5em; max-width: 100%; }
.more { display: none; }
#every-column:checked ~ main .more { display: table-cell; }
label[for=every-column] { font-size: 13px; color: #555; }
code { background: #f3f3f3; padding: 0 .2em; } figure { margin: 1em 0 2em; } figcaption { font-weight: 600; }
figure svg { max-width: 100%; height: auto; }
ul.summary { background: #f7f7f2; border: 1px solid #ddd; padding: .6em 1em .6em 2em; }
ul.summary ul { padding-left: 1.4em; margin: .15em 0; }
p.regression, p.slower { color: #c0392b; font-weight: 600; } p.improvement, p.faster { color: #1e8449; }
div.banner { background: #fff4d6; border: 1px solid #e0b84c; padding: .5em 1em; margin: .5em 0; font-weight: 600; }
p.foot, p.note { font-size: 12px; color: #555; margin: .2em 0; }
figure.forest svg { max-width: 100%; height: auto; }
@page { margin: 12mm; }
@media print {
  body { font-size: 8pt; line-height: 1.25; margin: 0; padding: 0; max-width: none; }
  h1 { font-size: 13pt; margin: 0 0 .3em; } h2 { font-size: 10pt; margin: .6em 0 .25em; }
  #every-column, label[for=every-column] { display: none; }
  .scroll { overflow: visible; margin: .3em 0 .6em; } table, table.wide { font-size: 6.5pt; }
  th, td { white-space: normal; padding: .1em .25em; } td.text { min-width: 0; } p.note { font-size: 7pt; }
  ul.summary { padding: .3em .6em .3em 1.6em; } figure { break-inside: avoid; margin: .4em 0; }
  main > p, section > p { font-size: 7.5pt; } figure.forest svg { width: auto; max-height: 2.2in; }
  div.banner { padding: .2em .6em; margin: .3em 0; } p.foot { font-size: 7pt; }
}
"""

# Marks the page as rendered: how many plots hold an SVG, any script error, whether the page is wider than the
# window, and the headers of the columns a reader cannot see without scrolling sideways (read by the tests).
CHECK = """
window.addEventListener('error', function (e) { document.body.dataset.errors = \
(document.body.dataset.errors || '') + e.message + ';'; });
document.addEventListener('DOMContentLoaded', function () {
  var figures = document.querySelectorAll('figure.plot');
  var drawn = 0;
  figures.forEach(function (f) { var s = f.querySelector('svg'); if (s && s.getBBox().width > 0) { drawn += 1; } });
  document.body.dataset.plots = String(figures.length);
  document.body.dataset.plotsDrawn = String(drawn);
  document.body.dataset.pageWidth = String(document.documentElement.scrollWidth);
  document.body.dataset.windowWidth = String(window.innerWidth);
  var cut = [];
  document.querySelectorAll('table').forEach(function (t) {
    var edge = Math.min(t.parentElement.getBoundingClientRect().right, window.innerWidth);
    t.querySelectorAll('thead th').forEach(function (th) {
      if (th.offsetParent !== null && th.getBoundingClientRect().right > edge + 1) { cut.push(th.textContent); }
    });
  });
  document.body.dataset.cutColumns = cut.join('|');
});
"""


def _cell(tag: str, value: str, index: int, section: Section, href: str | None = None) -> str:
    classes = ["more"] if index in section.folded else []
    if tag == "td" and len(value) > 40:
        classes.append("text")  # long prose (evidence, reasons) wraps instead of widening the table
    attr = f' class="{" ".join(classes)}"' if classes else ""
    inner = _h(value) if href is None else f'<a href="{_h(href)}">{_h(value)}</a>'
    return f"<{tag}{attr}>{inner}</{tag}>"


WIDE = 9  # columns shown from which a table's cells wrap as its headers do


def _row(section: Section, index: int, row: list[str]) -> str:
    """A table row; its first cell a link where the section names a page for the row."""
    link = section.links[index] if index < len(section.links) else None
    return "<tr>" + "".join(_cell("td", c, i, section, link if i == 0 else None) for i, c in enumerate(row)) + "</tr>"


def _table(section: Section) -> str:
    head = "".join(_cell("th", h, i, section) for i, h in enumerate(section.header))
    body = "".join(_row(section, i, row) for i, row in enumerate(section.rows))
    wide = ' class="wide"' if len(section.header) - len(section.folded) >= WIDE else ""
    return f'<div class="scroll"><table{wide}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _inline(line: str) -> str:
    """A line of prose, escaped, its `code` spans rendered as code."""
    escaped = _h(line.strip())
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


def _lines(lines: list[str]) -> str:
    """Summary lines as a list; a line indented by two spaces nests under the line before it."""
    out, nested = ['<ul class="summary">'], False
    for line in lines:
        inner = line.startswith("  ")
        if inner and not nested:
            out.append("<ul>")
        elif not inner and nested:
            out.append("</ul></li>")
        elif not inner and len(out) > 1:
            out.append("</li>")
        nested = inner
        out.append(f"<li>{_inline(line)}" + ("</li>" if inner else ""))
    out.append("</ul></li></ul>" if nested else "</li></ul>")
    return "".join(out)


def render_html(report: Report) -> str:
    """The whole page."""
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>{_h(report.title)}</title>", f"<style>{STYLE}</style>",
             *([f"<script>{CHECK}</script>"] if report.script else []), "</head><body>",
             *([f'<p><a href="{_h(report.back[1])}">{_h(report.back[0])}</a></p>'] if report.back else []),
             f"<h1>{_h(report.title)}</h1>",
             *(['<input type="checkbox" id="every-column"> <label for="every-column">show every column</label>']
               if any(section.folded for section in report.sections) else []),  # only where a column folds away
             "<main>", *([f"<p>{_h(report.intro)}</p>"] if report.intro else [])]
    for section in report.sections:
        title = _h(section.title)
        parts.append(f"<h2><code>{title}</code></h2>" if section.code else f"<h2>{title}</h2>")
        parts += [f'<div class="banner">{_h(line)}</div>' for line in section.banner]
        if section.text:
            parts.append(f'<p class="{_h(section.mark)}">{_h(section.text)}</p>' if section.mark else
                         f"<p>{_h(section.text)}</p>")
        if section.lines:
            parts.append(_lines(section.lines))
        if section.header:
            parts.append(_table(section))
        parts += [f'<p class="note">{_h(line)}</p>' for line in section.notes]
        if section.figure is not None:  # drawn by hvdbench itself: every text in it escaped (decision_view)
            parts.append(f'<figure class="plot forest">{section.figure[1]}</figure>')
        parts += [f'<p class="foot">{_h(line)}</p>' for line in section.foot]
    if report.plots:
        parts.append("<h2>Plots</h2>")
    for title, svg in report.plots.items():
        # matplotlib writes the SVG; text inside it comes from logs, which matplotlib escapes as XML
        parts.append(f'<figure class="plot"><figcaption>{_h(title)}</figcaption>{svg}</figure>')
    parts.append("</main></body></html>")
    return "\n".join(parts)
