"""Run directories written before the one-schema refactor (tests/fixtures/runs-v1.tar.xz: real Horovod runs
of commit 94fc77e, schema 1) still report identically: every column those tables had holds the same text,
and every section of report.md the report has not deliberately grown since is byte-identical."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from hvdbench.analysis.report import build_report

FIXTURES = Path(__file__).parent / "fixtures"
TABLES = ("runs.csv", "run_stats.csv", "scaling.csv", "stragglers.csv", "profile.csv", "collectives.csv")
# report.md sections grown on purpose since the fixture was recorded, and why; every other section is unchanged.
GROWN = {"Stragglers": "evidence columns (power, clock events, what differs from the other ranks and the GPU's limits)",
         "By node count": "speedups and efficiencies with their 95% intervals",
         "Cost of communication": "the cost with its 95% interval",
         "Collectives": "busbw as a share of the link's nominal rate"}
HEADLINE = "| framework | benchmark | model |"
# table columns whose meaning was corrected on purpose since, and why
CORRECTED = {"mean_power_w": "GPU power averaged over the timed window only (it took warm-up and set-up samples too)"}  # headline tables: speedup and efficiency with 95% intervals


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
    pd.testing.assert_frame_equal(actual[kept], expected[kept])


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
            assert actual[title] == section, title
