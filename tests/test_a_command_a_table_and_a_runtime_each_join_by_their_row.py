"""CONTRIBUTING's rows, each exercised by a stand-in added the way its row says and nothing else: a CLI command (its
``declare`` in the command line's order: parsed, its function called, a wrong flag refused in one line), a report
table (its ``TableSection`` in ``PARTS``: its section in the report and its CSV beside it) and a container runtime (its
class in ``RUNTIMES``: a sweep's container block takes it and a launcher wraps each rank with it). The scheduler, the
loader, the exchange and the store backend have files of their own (tests/test_a_third_*.py, tests/test_a_new_*.py,
tests/test_an_exchanges_own_option_*.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from conftest import write_run
from hvdbench.analysis.report import build
from hvdbench.analysis.sections import Inputs, TableSection
from hvdbench.cli import main
from hvdbench.cli import parser as command_line
from hvdbench.core import containers
from hvdbench.core.spec import RunSpec
from hvdbench.launchers.base import LaunchContext, get_launcher
from hvdbench.launchers.sweep import load_sweep


def test_a_command_declared_in_the_order_is_parsed_and_calls_its_function(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def declare(sub: Any) -> None:
        parser = sub.add_parser("standin", help="a stand-in command")
        parser.add_argument("--say", required=True, help="what it prints")
        parser.set_defaults(func=lambda args: print(f"standin says {args.say}") or 0)

    monkeypatch.setattr(command_line, "COMMANDS", (*command_line.COMMANDS, declare))
    assert main(["standin", "--say", "hello"]) == 0
    assert capsys.readouterr().out == "standin says hello\n"
    assert main(["standin", "--say", "hello", "--shout"]) == 2
    err = capsys.readouterr().err
    assert "--shout" in err and err.count("\n") == 1
    assert "standin" in command_line.build_parser().format_help()


def _runs_per_size(inputs: Inputs) -> pd.DataFrame:
    runs = inputs.collection.runs
    return runs.groupby("np").size().rename("runs").reset_index()


STANDIN_TABLE = TableSection("standin_sizes", "Runs per size (a stand-in table)", "How many runs each size has.",
                             lambda t: (["ranks", "runs"], [[str(r.np), str(r.runs)] for r in t.itertuples()]),
                             _runs_per_size)


def test_a_table_section_placed_in_the_parts_is_in_the_report_with_its_csv(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(5)
    for np_ in (1, 2):
        for repeat in range(2):
            write_run(tmp_path / "runs", RunSpec(benchmark="cifar10", args=("--model", "resnet20"), np=np_,
                                                 repeat=repeat), [list(rng.uniform(0.1, 0.11, 30)) for _ in range(np_)])
    monkeypatch.setattr(build, "PARTS", (*build.PARTS, STANDIN_TABLE))
    _text, paths = build.build_report([tmp_path / "runs"], tmp_path / "out")
    markdown = paths["markdown"].read_text()
    assert "Runs per size (a stand-in table)" in markdown and "How many runs each size has." in markdown
    written = pd.read_csv(tmp_path / "out" / "standin_sizes.csv")
    assert written[["np", "runs"]].values.tolist() == [[1, 2], [2, 2]]
    assert "Runs per size (a stand-in table)" in (tmp_path / "out" / "report.html").read_text()


class Standin(containers.Podman):
    """A runtime that starts each rank through its own tool (podman's flags under another name)."""

    name = "standin"
    tool = "standin-run"

    def wrap(self, container: containers.Container, root: Path, inner: list[str], gpu: bool) -> list[str]:
        return [self.tool, "--image", container.image, "--", *inner]


def test_a_runtime_in_the_registry_is_taken_by_a_sweep_and_wraps_each_rank(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(containers.RUNTIMES, Standin.name, Standin())
    sweep = tmp_path / "s.yaml"
    sweep.write_text("name: s\nlauncher: mpirun\ncontainer: {image: /images/hvdbench, runtime: standin}\n"
                     "workloads: [{benchmark: mlp}]\naxes: {np: [2]}\n")
    loaded = load_sweep(sweep)
    assert loaded.container is not None and loaded.container.runtime == "standin"
    spec = RunSpec(benchmark="mlp", np=2, launcher="mpirun", controller="mpi", image="/images/hvdbench",
                   runtime="standin")
    argv = get_launcher("mpirun").command(spec, LaunchContext(python="/venv/bin/python", run_dir=tmp_path / "r"))
    start = argv.index("standin-run")
    assert argv[start:start + 4] == ["standin-run", "--image", "/images/hvdbench", "--"]
    assert "hvdbench.suite.mlp" in argv[start + 4:]
    monkeypatch.delitem(containers.RUNTIMES, Standin.name)
    with pytest.raises(Exception, match="standin"):
        load_sweep(sweep)  # taken out of the registry, the block refuses it again
