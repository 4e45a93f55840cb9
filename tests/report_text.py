"""Recorded reports compared the way a reader compares them: text identical where it is text, numbers
equal within a stated relative tolerance. A value whose last digit moved because a library summed in
another order is not a regression; a change at the sixth significant digit is."""

from __future__ import annotations

import math
import re

import pandas as pd

REL_TOL = 1e-9  # relative: 16th-digit moves pass, 10th-digit changes fail
ABS_TOL = 1e-15  # only so that a zero and a summation's 1e-17 compare equal
# a number that does not continue a word or another number: "ResNet-50" reads as text "ResNet" and -50
_NUMBER = re.compile(r"((?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w.]))")


def text_differences(actual: str, expected: str, *, where: str = "") -> list[str]:
    """Where ``actual`` differs from ``expected``: text pieces must match exactly, numbers within REL_TOL."""
    got, want = _NUMBER.split(actual), _NUMBER.split(expected)
    if len(got) != len(want):
        return [f"{where}: {actual!r} != {expected!r}"]
    problems = []
    for i, (a, e) in enumerate(zip(got, want)):
        same = a == e if i % 2 == 0 else math.isclose(float(a), float(e), rel_tol=REL_TOL, abs_tol=ABS_TOL)
        if not same:
            problems.append(f"{where}: {a!r} != {e!r} (in {actual[:120]!r})")
    return problems


def table_differences(actual: pd.DataFrame, expected: pd.DataFrame) -> list[str]:
    """Cell by cell over ``expected``'s columns (both read with ``dtype=str``): same shape, same text,
    numbers within REL_TOL."""
    if list(actual.columns) != list(expected.columns) or len(actual) != len(expected):
        return [f"shape or columns differ: {actual.shape} {list(actual.columns)} != {expected.shape} "
                f"{list(expected.columns)}"]
    problems = []
    for column in expected.columns:
        for row, (a, e) in enumerate(zip(actual[column], expected[column])):
            problems += text_differences(str(a), str(e), where=f"row {row}, {column}")
    return problems
