"""CONTRIBUTING.md's rows (which files a change touches) name files and names that exist: every path it writes in
backticks is in the checkout (placeholders such as ``<name>`` and globs aside), and every registry it names by
CAPITALS in a path's parentheses is defined in that file, so its rows cannot drift from the code unseen."""

from __future__ import annotations

import re
from pathlib import Path

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
