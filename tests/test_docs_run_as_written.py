"""The documentation is current and runs as written: every command line of every code block in README.md,
CONTRIBUTING.md, docs/*.md and slurm/README.md is run here in dry mode (plans printed, arguments parsed by the
benchmark's own parser, analysis commands on recorded run folders, make and pytest without running anything);
the README's report excerpt is what the report of tests/fixtures/runs-v1.tar.xz says today; the README stays
under 150 lines and every link in it reaches a file and a heading that exist."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import BIN, REPO, hvdbench_exe, write_run
from hvdbench.core.catalog import BENCHMARKS, get_benchmark
from hvdbench.core.spec import RunSpec

DOCS = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md")),
        REPO / "slurm" / "README.md"]
GPU_SECTION = "## On a GPU node"  # its commands are run by tests/test_gpu_recipe_runs_as_written.py
TOPOLOGY = REPO / "tests" / "fixtures" / "topology" / "hgx-a100-nv12-mlx5.txt"
SWEEP = REPO / "launchers" / "sweeps" / "demo.yaml"  # what a placeholder sweep file (sweep.yaml) stands for
ANALYSIS = ("report", "status", "compare", "accept", "project")
PARSED_ONLY = ("data", "import")  # write a dataset or runs where the docs say: their arguments checked by the parser


def doc_commands() -> list[tuple[str, str]]:
    """(page, command) for every command line of every bash block, continuation lines joined, comments dropped;
    the GPU-node section left to its own test."""
    found = []
    for page in DOCS:
        text = page.read_text(encoding="utf-8")
        if GPU_SECTION in text:
            head, rest = text.split(GPU_SECTION, 1)
            text = head + rest.split("\n## ", 1)[1] if "\n## " in rest else head
        for block in re.findall(r"```(?:bash|sh|shell)\n(.*?)```", text, re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = re.sub(r"\s+#.*$", "", line).strip()
                if line and not line.startswith("#"):
                    found += [(page.name, part.strip()) for part in line.split("&&")]
    return found


def _placeholder(word: str, results: Path) -> str:
    """A path the docs name for the reader's own (a results root, a sweep file) as one that exists here."""
    if word.endswith((".yaml", ".yml")):
        return str(REPO / word) if (REPO / word).is_file() else str(SWEEP)
    if word.startswith(("results/", "runs/")) and "cifar10-np1" in word:  # a run folder: a recorded one
        return str(min((results / "liked").glob("cifar10-np1-*")))
    if word.startswith(("results/", "runs/")):
        return str(results)
    return word


def _hvdbench(words: list[str], results: Path, tmp: Path) -> list[list[str]]:
    """hvdbench's dry mode: planning commands with --dry-run (before ``--``), topology from a saved matrix, the
    analysis on recorded run folders (measuring nothing)."""
    command, rest = words[0], [_placeholder(w, results) for w in words[1:]]
    if command in ANALYSIS or command in PARSED_ONLY:
        if command != "report":  # compare, accept, project, status: their arguments as the parser reads them
            return [[sys.executable, "-c", "import sys; from hvdbench.cli.parser import build_parser; "
                     "build_parser().parse_args(sys.argv[1:])", command, *rest]]
        return [[hvdbench_exe(), command, *rest, *(["-o", str(tmp / "report")] if command == "report" else [])]]
    if command == "history":  # the recorded runs into a store of the test's own, then the documented query (check
        # and compare, whose exit statuses are verdicts, as the parser reads them; a site into a folder of the test's)
        store = ["--store", str(tmp / "history.sqlite")]
        if rest[:1] in (["check"], ["compare"]):
            return [[sys.executable, "-c", "import sys; from hvdbench.cli.parser import build_parser; "
                     "build_parser().parse_args(sys.argv[1:])", command, *rest]]
        if rest[:1] == ["publish"]:
            rest = ["publish", str(tmp / "site"), *rest[2:]]
        return [[hvdbench_exe(), "history", "import", str(results), *store], [hvdbench_exe(), "history", *rest, *store]]
    if command == "nccl-log":  # reads recorded logs: measures nothing
        return [[hvdbench_exe(), "nccl-log", *rest]]
    if command == "topo":
        rest = [w for i, w in enumerate(rest) if w != "--file" and (i == 0 or rest[i - 1] != "--file")]
        return [[hvdbench_exe(), "topo", "--file", str(TOPOLOGY), *rest]]
    at = rest.index("--") if "--" in rest else len(rest)
    extra = ["--topology", str(TOPOLOGY)] if command == "screen" and "--cpu-slots" not in rest else []
    if command in ("sweep", "submit") and not any(w.endswith(".yaml") for w in rest[:at]):
        extra.append(str(SWEEP))
    output = [] if {"-o", "--output"} & set(rest[:at]) else ["--output", str(tmp / "out")]
    return [[hvdbench_exe(), command, *extra, *rest[:at], *output, "--dry-run", *rest[at:]]]


def _benchmark_args(words: list[str]) -> list[str] | None:
    """``python suite/X.py ARGS`` inside a launcher's command: the benchmark's arguments, checked by its parser."""
    for i, word in enumerate(words):
        if word.startswith("suite/") and word.endswith(".py"):
            name = Path(word).stem
            info = BENCHMARKS.get(name) or next(b for b in BENCHMARKS.values() if b.script == Path(word).name)
            info.check(words[i + 1:])
            return [word]
    return None


def dry(command: str, results: Path, tmp: Path) -> list[list[str]]:
    """The dry-mode form of one documented command: the processes that check it (none where it is checked here)."""
    words = shlex.split(command.replace("$PWD", str(REPO)).replace("$SLURM_JOB_ID", "1"))
    while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
        words = words[1:]
    head = words[0].removeprefix(".venv/bin/")
    if head == "hvdbench":
        return _hvdbench(words[1:], results, tmp)
    if head == "make":
        return [["make", "-n", "-C", str(REPO), *words[1:]]]
    if head == "python" and words[1:3] == ["-m", "pytest"]:
        return [[str(BIN / "python"), "-m", "pytest", "--collect-only", "-q", *words[3:]]]
    if head in ("horovodrun", "mpirun", "srun", "python") and _benchmark_args(words) is not None:
        return []
    if head == "sbatch":
        script = next(w for w in words if w.endswith(".sbatch"))
        after = words[words.index(script) + 1:]
        return [["bash", "-n", str(REPO / script)], *_hvdbench(["sweep", *after], results, tmp)]
    raise AssertionError(f"no dry-mode check for the documented command: {command}")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Recorded run folders (tests/fixtures/runs-v1.tar.xz) where the docs name a results root."""
    root = tmp_path_factory.mktemp("runs")
    with tarfile.open(REPO / "tests" / "fixtures" / "runs-v1.tar.xz") as archive:
        archive.extractall(root, filter="data")
    # a training run that recorded its gradient sizes, for the docs' --like (runs-v1 predates the field)
    write_run(root / "liked", RunSpec(benchmark="cifar10", np=1, args=("--model", "resnet20")), [[0.1] * 6],
              env={"gradient_sizes": [432, 16, 16, 2304, 64, 10]})
    return root


@pytest.mark.slow  # starts hvdbench, make and pytest; no ranks
def test_every_documented_command_runs_in_dry_mode(recorded: Path, tmp_path: Path) -> None:
    commands = doc_commands()
    assert len(commands) >= 50 and {page for page, _ in commands} >= {"README.md", "benchmarks.md", "clusters.md",
                                                                       "procurement.md", "CONTRIBUTING.md"}
    tried: set[tuple[str, ...]] = set()  # a command the pages show more than once (a report of one root) runs once
    for page, command in commands:
        for argv in dry(command, recorded, tmp_path):
            if tuple(argv) in tried:
                continue
            tried.add(tuple(argv))
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO,
                                  env={**os.environ, "HVDBENCH_VENV": str(BIN.parent)})
            said = f"{proc.stdout[-800:]}{proc.stderr[-800:]}"
            assert proc.returncode == 0, f"{page}: {command}\n{shlex.join(argv)}\n{said}"
    assert not (tmp_path / "out").exists()  # dry: nothing measured


def test_documented_benchmark_arguments_are_the_benchmarks_own() -> None:
    for page, command in doc_commands():
        words = shlex.split(command.replace("$SLURM_JOB_ID", "1"))
        if words[0] in ("horovodrun", "mpirun", "srun", "python"):
            _benchmark_args(words)  # a flag a benchmark does not have is a UsageError naming it
    with pytest.raises(Exception, match="--no-such-flag"):
        get_benchmark("imagenet").check(["--no-such-flag"])


@pytest.mark.slow  # builds a report
def test_the_readme_excerpt_is_what_the_report_says_today() -> None:
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from docs_excerpt import END, START, excerpt
    finally:
        sys.path.remove(str(REPO / "scripts"))
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    shown = readme.split(START, 1)[1].split(END, 1)[0].strip()
    assert shown == excerpt().strip(), "the README's excerpt is stale: python scripts/docs_excerpt.py --write"


def _slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def test_the_readme_is_short_and_every_link_reaches_a_heading() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    assert len(links) >= 20
    for link in links:
        target, _, anchor = link.partition("#")
        path = REPO / target
        assert path.is_file(), link
        if anchor:
            headings = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.M)
            assert anchor in {_slug(h) for h in headings}, f"{link}: no such heading"


PRINTED = re.compile(r"<!-- printed by: (.+?) -->\n+```\n(.*?)```", re.S)


def printed_blocks() -> list[tuple[str, str, str]]:
    """(page, command, the output block under it) for every output the docs show with the command that printed it."""
    return [(page.name, m.group(1).strip(), m.group(2)) for page in DOCS
            for m in PRINTED.finditer(page.read_text(encoding="utf-8"))]


def _columns(line: str) -> list[str]:
    return [cell for cell in re.split(r"\s{2,}", line.strip()) if cell]


@pytest.mark.slow  # runs hvdbench on recorded runs
def test_every_documented_output_has_the_columns_and_words_its_command_prints_today(recorded: Path,
                                                                                   tmp_path: Path) -> None:
    """The docs' printed outputs are measurements of their day, so their figures differ from a run here; what the
    command prints must not: the same columns in the same order, and only verdict words the command still says."""
    sys.path.insert(0, str(REPO / "tests"))
    from test_projection_model import _results

    roots = {"accept": recorded / "cifar", "project": _results(tmp_path / "projected")}  # one system each
    blocks = printed_blocks()
    assert {command.split()[1] for _, command, _ in blocks} >= {"accept", "project"}
    for page, command, block in blocks:
        words = shlex.split(command)
        argv = [hvdbench_exe(), *[str(roots[words[1]]) if w.startswith("results/") else w for w in words[1:]],
                "-o", str(tmp_path / words[1])]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO,
                              env={**os.environ, "HVDBENCH_STORE": "none"})
        assert proc.returncode in (0, 1, 4), f"{page}: {command}\n{proc.stderr[-800:]}"
        documented = _columns(block.splitlines()[0])
        header = next((line for line in proc.stdout.splitlines() if _columns(line)[:2] == documented[:2]), "")
        assert _columns(header) == documented, f"{page}: {command}: printed today:\n{header}"
        if words[1] == "accept":
            verdicts = {"pass", "fail", "undecided", "not judged", "not measured"}
            rows = [line for line in block.splitlines()[2:] if line.strip()]
            assert rows and all(any(f"  {v}  " in row for v in verdicts) for row in rows), page
