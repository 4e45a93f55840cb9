"""CONTRIBUTING.md's rows (which files a change touches) name files and names that exist: every path it writes in
backticks is in the checkout (placeholders such as ``<name>`` and globs aside), and every registry it names by
CAPITALS in a path's parentheses is defined in that file, and every family whose new member shows in a generated doc
says how to make it again, so its rows cannot drift from the code unseen."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TEXT = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
PATHS = sorted({p for p in re.findall(r"`([A-Za-z0-9_./-]+\.(?:py|md|toml|yaml|txt|sh|json))`", TEXT)
                if "/" in p and "<" not in p and "*" not in p})
NAMED = re.findall(r"`([A-Z][A-Z_]{3,})` \(`([A-Za-z0-9_./-]+\.py)`", TEXT)


def test_every_path_it_names_exists() -> None:
    missing = [p for p in PATHS if not (REPO / p).exists()]
    assert PATHS and not missing, missing


def test_every_registry_it_names_is_defined_where_it_says() -> None:
    wrong = [(name, path) for name, path in NAMED
             if not (REPO / path).is_file() or not re.search(rf"^{name}\b", (REPO / path).read_text(), re.M)]
    assert NAMED and not wrong, wrong


REMAKE_RECORDS = "python -m hvdbench.core.run_table > docs/records.md"
# a row's first cell: the registry its new member joins (module, name); a stand-in copy of a member is added there
FAMILIES = {"a PyTorch workload": ("hvdbench.core.catalog", "BENCHMARKS"),
            "a container runtime": ("hvdbench.core.containers", "RUNTIMES"),
            "an exchange": ("hvdbench.core.exchanges", "EXCHANGES"),
            "a collective": ("hvdbench.core.collective_ops", "OPS"),
            "a swept knob": ("hvdbench.core.axes", "AXES"),
            "a scheduler (Flux, LSF)": ("hvdbench.core.job_env", "SCHEDULERS"),
            "a loader": ("hvdbench.core.loaders", "LOADERS")}
GENERATED = """
import dataclasses, importlib, sys
module, registry = sys.argv[1:3]
if module:
    members = getattr(importlib.import_module(module), registry)
    member = next(iter(members.values()))
    if dataclasses.is_dataclass(member) and "name" in {f.name for f in dataclasses.fields(member)}:
        members["standin"] = dataclasses.replace(member, name="standin")
    else:
        members["standin"] = type("Standin", (type(member),), {"name": "standin"})()
from hvdbench.core import run_table
sys.stdout.write(run_table.markdown())
"""


def _rows() -> dict[str, str]:
    """The table of what each kind of change touches: a row's first cell and the rest of it."""
    return {cells[1].strip(): cells[2] for line in TEXT.splitlines()
            if line.startswith("| ") and len(cells := line.split("|", 2)) == 3}


@pytest.mark.slow  # a process a family, each importing the vocabulary with a stand-in in its registry
def test_a_row_whose_member_shows_in_a_generated_doc_says_to_make_it_again() -> None:
    """docs/records.md is made from the vocabulary (tests/test_layout_imports_and_sizes.py fails while it is stale):
    each family whose new member changes it (a stand-in copy added to its registry before the doc is made) says in
    its row how to make it again, so one adding by the row alone is never sent to find out from a failing test."""
    rows = _rows()
    assert set(FAMILIES) <= set(rows), sorted(set(FAMILIES) - set(rows))

    def made(module: str = "", registry: str = "") -> str:
        out = subprocess.run([sys.executable, "-c", GENERATED, module, registry], capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout

    before = made()
    shown = {family for family, where in FAMILIES.items() if made(*where) != before}
    assert {"an exchange", "a loader", "a container runtime"} <= shown, shown  # what the doc lists today
    silent = sorted(family for family in shown if REMAKE_RECORDS not in rows[family])
    assert not silent, f"rows whose new member changes docs/records.md without saying '{REMAKE_RECORDS}': {silent}"


def test_its_layer_rules_are_the_ones_the_layout_test_enforces() -> None:
    from test_layout_imports_and_sizes import ALLOWED, FUNCTION_LINES, MAX_LINES, PRODUCT_LINES

    folder = {"rank": "suite"}  # the layout test names suite/ by what runs there
    said = {cells[0]: set(re.findall(r"`(\w+)/`", cells[1])) for line in TEXT.splitlines()
            if (cells := [c.strip() for c in line.strip("|").split("|")]) and len(cells) == 2
            and re.fullmatch(r"`\w+/`", cells[0])}
    enforced = {f"`{folder.get(layer, layer)}/`": {folder.get(other, other) for other in others}
                for layer, others in ALLOWED.items()}
    assert said == enforced
    sizes = (rf"no product file over {PRODUCT_LINES} lines \({MAX_LINES} anywhere\),\s+"
             rf"no function\s+over {FUNCTION_LINES}\b")
    assert re.search(sizes, TEXT), sizes
