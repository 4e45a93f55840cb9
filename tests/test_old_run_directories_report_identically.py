"""Run directories written before the one-schema refactor (tests/fixtures/runs-v1.tar.xz: real Horovod runs
of commit 94fc77e, schema 1) still report identically: every column those tables had and every section of
report.md the report has not deliberately grown since holds the same text, numbers equal within a relative
1e-9 (tests/report_text.py: a library that sums in another order moves the last digit, not a result)."""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from report_text import REL_TOL, table_differences, text_differences

from hvdbench.analysis.report.build import build_report

FIXTURES = Path(__file__).parent / "fixtures"
TABLES = ("runs.csv", "run_stats.csv", "scaling.csv", "stragglers.csv", "profile.csv", "collectives.csv")
# report.md sections grown on purpose since the fixture was recorded, and why; every other section is unchanged.
GROWN = {"Stragglers": "evidence columns (power, clock events, what differs from the other ranks and the GPU's limits)",
         "By node count": "speedups and efficiencies with their 95% intervals",
         "Cost of communication": "the cost with its 95% interval",
         "Collectives": "busbw as a share of the link's nominal rate; how the curve was timed; a call's own cost",
         "Horovod against raw MPI": "how the curves were timed (calls back to back, or each call alone)",
         "Warm-up": "each run's system, and the block of steps its interval resamples together",
         "Run details": "each run's system",
         "(intro)": "how a configuration of several runs is combined, and what its interval resamples"}
HEADLINE = "| framework | benchmark | model |"
# table columns whose meaning was corrected on purpose since, and why
CORRECTED = {"mean_power_w": "GPU power averaged over the timed window only (it took warm-up and set-up samples too)",
             "ci_method": "names the level the interval resamples: one run's steps (within-run only), or runs and "
                          "blocks of steps within each"}


@pytest.fixture(scope="module")
def old_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runs-v1")
    with tarfile.open(FIXTURES / "runs-v1.tar.xz") as archive:
        archive.extractall(root, filter="data")
    build_report([root], root / "report")
    return root, root / "report"


def _text(path: Path, root: Path | None = None) -> str:
    text = path.read_text(encoding="utf-8")
    return text.replace(str(root), "{root}") if root else text


@pytest.mark.parametrize("name", TABLES)
def test_old_run_directories_report_identically(old_report: tuple[Path, Path], name: str) -> None:
    root, out = old_report
    expected = pd.read_csv(FIXTURES / "runs-v1-report" / name, dtype=str, keep_default_na=False)
    actual = pd.read_csv(io.StringIO(_text(out / name, root)), dtype=str, keep_default_na=False)
    assert list(actual.columns[: len(expected.columns)]) == list(expected.columns)  # new columns only at the end
    kept = [c for c in expected.columns if c not in CORRECTED]
    if "ci_method" in actual:
        _repeats_as_geometric_means(actual, expected, root)
    problems = table_differences(actual[kept], expected[kept])
    assert not problems, "\n".join(problems[:10])


def _repeats_as_geometric_means(actual: pd.DataFrame, expected: pd.DataFrame, root: Path) -> None:
    """Changed on purpose: a configuration of several runs is their geometric mean now (the median of two was their
    arithmetic mean), its interval Student's over runs with blocks of steps within each; a row whose 1-GPU baseline
    is such a configuration moves its speedup and efficiency by the same factor. Checked exactly, then taken as
    recorded so that every other cell still compares."""
    stats = pd.read_csv(FIXTURES / "runs-v1-report" / "run_stats.csv").set_index("run_id")["throughput"]
    repeated = ~actual["ci_method"].str.startswith("steps of one run")
    factors = {1.0}
    for i in actual.index[repeated]:
        runs = stats[str(actual.at[i, "runs"]).split(",")]
        geometric = float(np.exp(np.log(runs).mean()))
        assert float(actual.at[i, "throughput"]) == pytest.approx(geometric, rel=REL_TOL)
        factors.add(float(expected.at[i, "throughput"]) / geometric)
        for column in ("throughput", "per_rank", "ci_low", "ci_high", "ci_method"):
            actual.at[i, column] = expected.at[i, column]
    for column in ("speedup", "efficiency", "node_speedup", "node_efficiency"):
        for i in actual.index:
            mine, theirs = actual.at[i, column], expected.at[i, column]
            if mine and theirs and mine != theirs:
                moved = float(mine) / float(theirs)
                assert any(moved == pytest.approx(f, rel=REL_TOL) or moved == pytest.approx(1 / f, rel=REL_TOL)
                           for f in factors), (column, i, mine, theirs)
                actual.at[i, column] = theirs


def _sections(text: str) -> dict[str, str]:
    """Sections by title; plot references (numbered by which plots exist) left out."""
    text = "\n".join(line for line in text.splitlines() if not line.startswith("!["))
    parts = text.split("\n## ")
    return {part.split("\n", 1)[0].strip("`"): part.rstrip() for part in parts[1:]} | {"(intro)": parts[0]}


def test_old_report_md_sections_are_byte_identical(old_report: tuple[Path, Path]) -> None:
    root, out = old_report
    expected = _sections(_text(FIXTURES / "runs-v1-report" / "report.md"))
    actual = _sections(_text(out / "report.md", root))
    assert set(expected) <= set(actual)
    for title, section in expected.items():
        if title not in GROWN and HEADLINE not in section:
            problems = text_differences(actual[title], section, where=title)
            assert not problems, "\n".join(problems[:10])


def _perturbed(text: str, digit: int) -> str:
    """``text`` with the first value of 16 significant digits changed by one unit at significant ``digit``."""
    match = re.search(r"\d\.\d{15,}|\d{2,}\.\d{13,}", text)
    assert match, "no long value in the fixture"
    value = match.group()
    first = next(i for i, c in enumerate(value) if c in "123456789")
    significant = [i for i, c in enumerate(value) if c.isdigit() and i >= first]
    i = significant[digit - 1]
    changed = value[:i] + str((int(value[i]) + 1) % 10) + value[i + 1:]
    return text[:match.start()] + changed + text[match.end():]


@pytest.mark.parametrize("digit, same", [(16, True), (15, True), (6, False), (8, False)])
def test_a_moved_last_digit_is_the_same_report_and_a_sixth_digit_change_is_not(digit: int, same: bool) -> None:
    """The comparison above at work on the recorded tables themselves (relative tolerance REL_TOL)."""
    assert REL_TOL == 1e-9
    for name in ("run_stats.csv", "scaling.csv"):
        text = (FIXTURES / "runs-v1-report" / name).read_text(encoding="utf-8")
        expected = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
        changed = pd.read_csv(io.StringIO(_perturbed(text, digit)), dtype=str, keep_default_na=False)
        assert not changed.equals(expected)
        assert (not table_differences(changed, expected)) is same, (name, digit)
