"""What runs and then judges lives below the command line (workflows/): the command line parses, calls one function
and prints what it returns; every subcommand names its function on its own parser (one registry); a finished plan is
read once for its record in the history store and its report."""

from __future__ import annotations

import ast
import argparse
from pathlib import Path

import numpy as np
import pytest

from conftest import write_run
from hvdbench.core.spec import RunSpec, RunStatus

REPO = Path(__file__).resolve().parents[1]
# what only a workflow does: record runs or verdicts, build a report
WORKFLOWS_ONLY = {"record_and_say", "record_roots", "record_collection", "keep_verdict", "build_report",
                  "run_until_decided"}


def test_the_command_line_records_and_reports_only_through_the_workflows() -> None:
    called = [f"{path.relative_to(REPO)}:{node.lineno}: {name}" for path in sorted((REPO / "cli").glob("*.py"))
              for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(node, ast.Call)
              and (name := ast.unparse(node.func).rpartition(".")[2]) in WORKFLOWS_ONLY]
    assert not called, "\n".join(called)


def _commands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every leaf command under a parser (history's actions as history check, ...)."""
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, command in action.choices.items():
                nested = _commands(command, f"{prefix}{name} ")
                out.update(nested or {f"{prefix}{name}": command})
    return out


def test_every_subcommand_names_its_function_on_its_own_parser() -> None:
    from hvdbench.cli.parser import build_parser

    commands = _commands(build_parser())
    missing = [name for name, command in commands.items() if not callable(command.get_default("func"))]
    assert not missing and len(commands) >= 20 and "history check" in commands, missing
    takes_rest = sorted(name for name, command in commands.items() if command.get_default("benchmark_args"))
    assert takes_rest == ["run", "screen"]
    assert not (REPO / "cli" / "commands.py").exists()


def test_history_actions_refuse_each_others_flags_and_a_bare_history_lists(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    from hvdbench.cli import main

    store = str(tmp_path / "h.sqlite")
    write_run(tmp_path / "r", RunSpec(benchmark="cifar10", args=("--model", "resnet20")), [[0.1] * 20])
    assert main(["history", "import", str(tmp_path / "r"), "--store", store]) == 0
    capsys.readouterr()
    assert main(["history", "--store", store, "--format", "csv"]) == 0
    assert "cifar10" in capsys.readouterr().out
    for wrong in (["history", "check", "--a", "system=x", "--store", store], ["history", "import", "--store", store],
                  ["history", "list", str(tmp_path / "r"), "--store", store],
                  ["history", "verdicts", "--margin", "3", "--store", store]):
        assert main(wrong) == 2, wrong
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("hvdbench: error: "), (wrong, err)


def test_a_finished_plan_is_read_once_for_its_record_and_its_report(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from hvdbench.analysis import collect as collecting
    from hvdbench.workflows import here

    rng = np.random.default_rng(3)
    statuses = []
    for repeat in range(3):
        spec = RunSpec(benchmark="cifar10", args=("--model", "resnet20"), repeat=repeat)
        folder = write_run(tmp_path / "r", spec, [list(rng.uniform(0.1, 0.11, 20))])
        statuses.append(RunStatus("ok", 0, 1.0))
        assert folder.is_dir()
    reads = []
    real = collecting.collect
    monkeypatch.setattr(here, "collect", lambda roots: reads.append(list(roots)) or real(roots))
    monkeypatch.setattr("hvdbench.analysis.report.build.collect", lambda roots: pytest.fail("read again"))
    outcome = here.finish(statuses, tmp_path / "r", here.Here(store=str(tmp_path / "h.sqlite")))
    said = [text for _, text in outcome.lines]
    assert reads == [[tmp_path / "r"]] and outcome.status == 0, said
    assert said[0].startswith("sweep: 3 ok") and any(text.startswith("history: 3 added") for text in said)
    assert any(text.startswith("report: ") for text in said)


def test_a_report_that_cannot_be_made_leaves_the_counts_and_the_record_said(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from hvdbench.core.errors import ReportError
    from hvdbench.workflows import here

    spec = RunSpec(benchmark="cifar10", args=("--model", "resnet20"))
    folder = write_run(tmp_path / "r", spec, [[0.1] * 20])

    def broken(*_: object, **__: object) -> None:
        raise ReportError("planted: the report's folder is full")

    monkeypatch.setattr(here, "report", broken)
    assert folder.is_dir()
    outcome = here.finish([RunStatus("ok", 0, 1.0)], tmp_path / "r", here.Here(store="off"))
    assert outcome.status == 2 and outcome.lines[0][1].startswith("sweep: 1 ok")
    assert outcome.lines[-1] == (True, "hvdbench: error: planted: the report's folder is full")
