"""How the report writes a cell: numbers, intervals, ratios, percentages and missing values, alike in every
section (each section's own rows and text stand beside its builder, in analysis/tables/ and analysis/verdicts/)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd


def missing(value: Any) -> bool:
    """None, pandas' NA or NaN."""
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def fmt(value: Any, digits: int = 1) -> str:
    """A number for a table; n/a where missing."""
    return "n/a" if missing(value) else f"{value:,.{digits}f}"


def interval(low: Any, high: Any) -> str:
    """A 95% interval's cell: n/a where it could not be computed (fewer steady steps than an interval needs)."""
    if missing(low) or missing(high):
        return "n/a (too few steps)"
    return f"{fmt(low)} – {fmt(high)}"


def text(value: Any) -> str:
    """A string cell; n/a where missing."""
    return "n/a" if missing(value) else str(value)


def pct(value: Any) -> str:
    """A fraction as a whole percentage; n/a where missing."""
    return "n/a" if missing(value) else f"{value:.0%}"


def tflops(value: Any) -> str:
    """Achieved TFLOP/s with three significant digits (CPU runs are small: 0.0123)."""
    return "n/a" if missing(value) else f"{value:.3g}"


def ratio(value: Any, low: Any, high: Any, digits: int = 2) -> str:
    """``1.86 [1.80–1.92]``; the value alone where there is no interval (or it is a point)."""
    if missing(value):
        return "n/a"
    if missing(low) or missing(high) or np.isclose(low, high):
        return fmt(value, digits)
    return f"{fmt(value, digits)} [{fmt(low, digits)}–{fmt(high, digits)}]"


def dash(value: Any) -> str:
    """A cell of text; - where missing or empty."""
    return "-" if missing(value) or value == "" else str(value)


Rows = tuple[list[str], list[list[str]]]
