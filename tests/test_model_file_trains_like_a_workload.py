"""A buyer's own model (``custom --model-file``) is a workload like the suite's: a file that does not define the
interface, cannot be read or whose batch does not fit its model is one line before any rank trains; the example
file trains through hvdbench run with an exchange other than Horovod, its UNIT in the report, its FLOPs counted.
(The catalog's smoke run trains the example under horovodrun -np 2 too: test_pytorch_workloads_train.)"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import torch

from conftest import REPO, hvdbench_exe
from hvdbench.core.catalog import EXAMPLE_MODEL_FILE, get_benchmark
from hvdbench.core.errors import UsageError
from hvdbench.suite.custom import build
from hvdbench.suite.flops import flops_of
from hvdbench.suite.torchdata import BuildContext

GOOD = EXAMPLE_MODEL_FILE.read_text()
WRONG_SHAPE = GOOD.replace("torch.randn(batch_size, 3, 64, 64", "torch.randn(batch_size, 5, 64, 64")


@pytest.mark.bad_input
@pytest.mark.parametrize("source,says", [
    ("import torch\ndef model():\n    return torch.nn.Linear(2, 2)\n", "defines no batch()"),
    ("def model(:\n", "not Python (line 1"),
    (None, "a FIFO, not a regular file"),
    ("", "defines no model() or batch()"),
])
def test_a_model_file_without_the_interface_is_refused_before_any_rank(tmp_path: Path, source: str | None,
                                                                       says: str) -> None:
    path = tmp_path / "mine.py"
    if source is None:
        os.mkfifo(path)
    else:
        path.write_text(source)
    with pytest.raises(UsageError) as caught:
        get_benchmark("custom").check(["--model-file", str(path)])
    assert says in str(caught.value) and "\n" not in str(caught.value)


def _build(path: Path) -> None:
    flags = get_benchmark("custom").check(["--model-file", str(path), "--batch-size", "2"])
    build(BuildContext(flags, torch.device("cpu"), 0, 1))


@pytest.mark.bad_input
@pytest.mark.parametrize("source,says", [
    (WRONG_SHAPE, "its batch does not fit its model: RuntimeError"),
    (GOOD + "\ndef batch(n, g):\n    return [torch.zeros(n)]\n", "batch() must return a tuple of tensors"),
    (GOOD.replace('UNIT = "images"', 'UNIT = "images/s\\x1b[31m"'), "UNIT must be a short word"),
    (GOOD + "\nraise RuntimeError('no licence server')\n", "importing it failed: RuntimeError: no licence server"),
])
def test_a_batch_that_does_not_fit_its_model_is_one_line_naming_the_file(tmp_path: Path, source: str,
                                                                          says: str) -> None:
    path = tmp_path / "mine.py"
    path.write_text(source)
    with pytest.raises(UsageError) as caught:
        _build(path)
    assert says in str(caught.value) and str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_the_flops_of_a_model_file_follow_its_source_not_its_path(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HVDBENCH_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "mine.py"
    flags = get_benchmark("custom").check(["--model-file", str(path := _write(path, GOOD)), "--batch-size", "2"])
    small = flops_of("custom", flags)["flops_per_sample"]
    _write(path, GOOD.replace("nn.Conv2d(32, 64, 3", "nn.Conv2d(32, 128, 3").replace("nn.Linear(64", "nn.Linear(128"))
    large = flops_of("custom", flags)["flops_per_sample"]  # the same path, another model: counted again
    assert small and large and large > small


def _write(path: Path, source: str) -> Path:
    path.write_text(source)
    return path


@pytest.mark.slow
def test_the_example_trains_through_ddp_and_reports_its_own_unit(tmp_path: Path, hvd_env: dict) -> None:
    root = tmp_path / "mine"
    out = subprocess.run([hvdbench_exe(), "run", "custom", "--np", "2", "-o", str(root), "--",
                          "--model-file", "examples/model_file.py", "--batch-size", "4", "--steps", "4",
                          "--warmup-steps", "1", "--exchange", "ddp", "--threads", "1"],
                         capture_output=True, text=True, env=hvd_env, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    runs = pd.read_csv(root / "report" / "runs.csv")
    assert list(runs["status"]) == ["ok"] and bool(runs.loc[0, "params_agree"])
    assert runs.loc[0, "unit"] == "images" and runs.loc[0, "exchange"] == "ddp"
    assert runs.loc[0, "flops_per_sample"] > 0
    assert "images/s" in out.stdout
