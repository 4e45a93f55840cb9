"""The README's report excerpt, made from the run folders in tests/fixtures/runs-v1.tar.xz: the report is built
into a scratch folder and its executive summary and the table of the real Horovod resnet20 runs are cut
out. Without arguments it prints the excerpt; ``--write`` puts it into README.md between its excerpt markers
(a test fails while they differ)."""

from __future__ import annotations

import argparse
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "runs-v1.tar.xz"
START = "<!-- excerpt: scripts/docs_excerpt.py writes what follows, up to the end marker -->"
END = "<!-- end of excerpt -->"


def _section(markdown: str, title: str) -> str:
    """The section whose heading starts with ``title`` (heading included), up to the next heading of its level."""
    head = markdown.index("\n## " + title) + 1
    rest = markdown.find("\n## ", head)
    return markdown[head:rest if rest >= 0 else len(markdown)].strip()


def excerpt() -> str:
    """The excerpt as Markdown: the report's executive summary and the resnet20 workload section, headings one
    level down."""
    from hvdbench.analysis.report.build import build_report

    with tempfile.TemporaryDirectory() as scratch:
        with tarfile.open(FIXTURE) as archive:
            archive.extractall(scratch, filter="data")
        build_report([Path(scratch)], Path(scratch) / "report")
        markdown = (Path(scratch) / "report" / "report.md").read_text(encoding="utf-8")
    parts = [_section(markdown, "Executive summary"), _section(markdown, "`cpu-2core: --model resnet20")]
    return "\n\n".join(part.replace("\n## ", "\n### ").replace("## ", "### ", 1) for part in parts)


def readme_with(text: str, readme: str) -> str:
    """README text with ``text`` between the excerpt markers."""
    before, rest = readme.split(START, 1)
    _, after = rest.split(END, 1)
    return f"{before}{START}\n{text}\n{END}{after}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="put the excerpt into README.md")
    args = parser.parse_args()
    text = excerpt()
    if args.write:
        path = REPO / "README.md"
        path.write_text(readme_with(text, path.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
