"""The path a reader follows from a sweep file to the executor and back to the printed result is short and runs
one way: a real one-rank sweep run in process, the product files on the call stack wherever something happens
(the sweep file read, a process started, the results collected, recorded and reported, a line printed) number no
more than 12, and no frame on those stacks calls up a layer (a launcher into the workflows, a workflow into the
command line)."""

from __future__ import annotations

import builtins
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
LAYER = {"core": 0, "readers": 1, "suite": 2, "launchers": 2, "analysis": 2, "workflows": 3, "cli": 4}
MOST_FILES = 12  # the bound the path is held to (12 files on these stacks when this test was written)
LANDMARKS = {("launchers/runs.py", "load"): "the sweep file read", ("analysis/collect.py", "collect"): "collected",
             ("analysis/history/recording.py", "record_and_say"): "recorded",
             ("analysis/report/build.py", "build_report"): "reported"}
SWEEP = """name: path
system: here
launcher: mpirun
workloads: [{benchmark: mlp, args: [--steps, "5", --warmup-steps, "1", --device, cpu, --batch-size, "4",
             --mlp-input, "32", --mlp-widths, "64,64"]}]
axes: {np: [1]}
"""


def _product_stack(frame: FrameType | None) -> list[str]:
    """The product files on the stack, outermost first, one entry a frame."""
    out = []
    while frame is not None:
        path = Path(frame.f_code.co_filename).resolve()
        if path.is_relative_to(REPO) and path.relative_to(REPO).parts[0] in LAYER:
            out.append(str(path.relative_to(REPO)))
        frame = frame.f_back
    return out[::-1]


@pytest.mark.slow
def test_a_sweep_file_reaches_its_run_and_its_printed_result_through_few_files_one_way(tmp_path: Path) -> None:
    from hvdbench.cli import main

    stacks: list[tuple[str, list[str]]] = []

    def watch(frame: FrameType, event: str, arg: Any) -> None:
        name, where = frame.f_code.co_name, frame.f_code.co_filename
        landmark = next((said for (file, function), said in LANDMARKS.items()
                         if name == function and where.endswith(file)), None) if event == "call" else None
        if landmark is not None:
            stacks.append((landmark, _product_stack(frame)))
        elif event == "call" and name == "__init__" and where.endswith("subprocess.py"):
            stacks.append(("a process started", _product_stack(frame)))
        elif event == "c_call" and arg is builtins.print:
            stacks.append(("a line printed", _product_stack(frame)))

    (tmp_path / "s.yaml").write_text(SWEEP)
    threading.setprofile(watch)
    sys.setprofile(watch)
    try:
        status = main(["sweep", str(tmp_path / "s.yaml"), "-o", str(tmp_path / "out"), "--store", "off"])
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    assert status == 0
    seen = {kind for kind, stack in stacks if stack}
    assert {*LANDMARKS.values(), "a process started", "a line printed"} <= seen
    files = sorted({f for _, stack in stacks for f in stack})
    upward = sorted({f"{a} -> {b}" for _, stack in stacks for a, b in zip(stack, stack[1:])
                     if LAYER[b.split("/")[0]] > LAYER[a.split("/")[0]]})
    print(f"{len(files)} files on the path: {', '.join(files)}")
    assert len(files) <= MOST_FILES, files
    assert not upward, upward
