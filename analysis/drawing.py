"""Drawing helpers every plot shares (matplotlib off screen, SVG text without metadata, integer log axes,
literal text): the report's, the collectives' and the projection's plots draw through these."""

from __future__ import annotations

import io
from typing import Any


def figure(width: float = 6.4, height: float = 3.8, *, rows: int = 1, cols: int = 1) -> tuple[Any, Any]:
    """A figure and its axes (a flat array when there are several), off screen."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    matplotlib.rcParams["svg.hashsalt"] = "hvdbench"  # element ids from content: a report built twice is the same
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(rows, cols, figsize=(width, height), layout="constrained", squeeze=False)
    flat = axes.ravel()
    return fig, (flat if len(flat) > 1 else flat[0])


def svg_text(fig: Any) -> str:
    """The figure as an SVG element (no XML prolog, no metadata), and the figure closed."""
    from matplotlib import pyplot as plt

    fig.set_dpi(72)
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Creator": None, "Date": None, "Format": None, "Type": None})
    plt.close(fig)
    text = buffer.getvalue()
    return text[text.index("<svg"):]


def integer_log_axis(ax: Any, values: list[int], axis: str = "x") -> None:
    """A log2 axis ticked at the values measured, labelled as plain integers (1, 2, 4, not 2⁰, 2¹, 2²)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=2)
    target.set_major_locator(FixedLocator([float(v) for v in values]))
    target.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    target.set_minor_locator(NullLocator())


def plain(text: object) -> str:
    """Text from logs as matplotlib shows it literally: control characters as escapes (an ESC in a label would make
    the SVG unreadable), and a ``$`` would start math mode."""
    from hvdbench.core.validate import inert

    return inert(text).replace("$", r"\$")
