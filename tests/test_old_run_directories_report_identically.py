"""Run directories written before the one-schema refactor (tests/fixtures/runs-v1.tar.xz: real Horovod runs
of commit 94fc77e, schema 1) still report byte-identical tables and report.md."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from hvdbench.analysis.report import build_report

FIXTURES = Path(__file__).parent / "fixtures"
TABLES = ("runs.csv", "run_stats.csv", "scaling.csv", "stragglers.csv", "profile.csv", "collectives.csv", "report.md")


@pytest.fixture(scope="module")
def old_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("runs-v1")
    with tarfile.open(FIXTURES / "runs-v1.tar.xz") as archive:
        archive.extractall(root, filter="data")
    build_report([root], root / "report")
    return root, root / "report"


@pytest.mark.parametrize("name", TABLES)
def test_old_run_directories_report_identically(old_report: tuple[Path, Path], name: str) -> None:
    root, out = old_report
    expected = (FIXTURES / "runs-v1-report" / name).read_text(encoding="utf-8")
    assert (out / name).read_text(encoding="utf-8").replace(str(root), "{root}") == expected
