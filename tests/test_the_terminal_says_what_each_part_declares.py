"""The terminal's text after a report is the headline, then what each part's descriptor says it shows there (its
``terminal`` hook, in the report's order), then what the collection left out: a part added with a hook is on the
terminal by its descriptor alone, and no terminal line finds its table by name outside its part."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from conftest import write_run
from hvdbench.analysis.collect import collect
from hvdbench.analysis.report import output, parts
from hvdbench.analysis.report.build import build
from hvdbench.analysis.sections import Terminal
from hvdbench.core.spec import RunSpec

REPO = Path(__file__).resolve().parents[1]


def test_a_part_with_a_terminal_hook_is_said_by_its_descriptor_alone(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(4)
    for np_ in (1, 2):
        write_run(tmp_path, RunSpec(benchmark="cifar10", args=("--model", "resnet20"), np=np_),
                  [list(rng.uniform(0.1, 0.11, 30)) for _ in range(np_)])
    collection = collect([tmp_path])
    report = build(collection)
    before = output.terminal_text(report, collection)
    assert before.startswith(report.headline[0].title)
    hooked = parts.Part("runs counted", lambda a: [], lambda r: Terminal([f"{len(r.tables['runs'])} runs counted"],
                                                                          ["a note of the new part"]))
    monkeypatch.setattr(output, "PARTS", (*parts.PARTS, hooked))
    after = output.terminal_text(report, collection)
    assert after.startswith(before.split("\n")[0]) and "\n\n2 runs counted" in after
    assert after.rstrip().endswith("a note of the new part")
    quiet = tuple(replace(p, terminal=None) for p in parts.PARTS)
    monkeypatch.setattr(output, "PARTS", quiet)
    assert output.terminal_text(report, collection).strip() == before.split("\n\n")[0].strip()


def test_the_terminal_text_reads_no_table_by_name() -> None:
    tree = ast.parse((REPO / "analysis" / "report" / "output.py").read_text(encoding="utf-8"))
    function = next(node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                    and node.name == "terminal_text")
    named = [ast.unparse(node) for node in ast.walk(function) if isinstance(node, ast.Subscript)
             and ast.unparse(node.value).endswith("tables")]
    assert not named, named
