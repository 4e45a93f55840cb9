"""The report as one self-contained HTML file: no network, plots inline as SVG, every string escaped."""

from __future__ import annotations

import html

from .document import Report

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 80em; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: .5em 0 1.5em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: .25em .5em; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
code { background: #f3f3f3; padding: 0 .2em; } figure { margin: 1em 0 2em; } figcaption { font-weight: 600; }
figure svg { max-width: 100%; height: auto; }
"""

# Marks the page as rendered: how many plots hold an SVG, and any script error (read by the tests).
CHECK = """
window.addEventListener('error', function (e) { document.body.dataset.errors = (document.body.dataset.errors || '') + e.message + ';'; });
document.addEventListener('DOMContentLoaded', function () {
  var figures = document.querySelectorAll('figure.plot');
  var drawn = 0;
  figures.forEach(function (f) { var s = f.querySelector('svg'); if (s && s.getBBox().width > 0) { drawn += 1; } });
  document.body.dataset.plots = String(figures.length);
  document.body.dataset.plotsDrawn = String(drawn);
});
"""


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(report: Report) -> str:
    """The whole page."""
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>hvdbench scaling report</title>", f"<style>{STYLE}</style>", f"<script>{CHECK}</script>",
             "</head><body>", "<h1>hvdbench scaling report</h1>", f"<p>{html.escape(report.intro)}</p>"]
    for section in report.sections:
        title = html.escape(section.title)
        parts.append(f"<h2><code>{title}</code></h2>" if section.code else f"<h2>{title}</h2>")
        if section.text:
            parts.append(f"<p>{html.escape(section.text)}</p>")
        if section.header:
            parts.append(_table(section.header, section.rows))
    if report.plots:
        parts.append("<h2>Plots</h2>")
    for title, svg in report.plots.items():
        # matplotlib writes the SVG; text inside it comes from logs, which matplotlib escapes as XML
        parts.append(f'<figure class="plot"><figcaption>{html.escape(title)}</figcaption>{svg}</figure>')
    parts.append("</body></html>")
    return "\n".join(parts)
