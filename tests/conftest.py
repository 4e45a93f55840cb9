"""Shared test helpers: write real run directories in the project's own record format."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Sequence

import pytest

from hvdbench.suite.records import RecordWriter, rank_log_name
from hvdbench.suite.spec import RunSpec

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def write_run(root: Path, spec: RunSpec, durations: Sequence[Sequence[float]], *, samples: int = 32,
              warmup: int = 2, summary: bool = True, telemetry: dict | None = None, unit: str = "images") -> Path:
    """A run directory as the harness writes it: run.json and one log per rank.

    ``durations[r]`` are rank r's timed step durations; ``warmup`` slow steps come first.
    """
    run_dir = root / spec.id
    spec.write(run_dir)
    for rank, steps in enumerate(durations):
        with RecordWriter(run_dir / rank_log_name(rank), rank=rank, local_rank=rank, size=len(durations)) as w:
            w.write("env", benchmark=spec.benchmark, model="resnet20", unit=unit)
            for _ in range(3 if telemetry else 0):
                w.write("telemetry", **telemetry)
            for i in range(warmup):
                w.write("step", step=i, warmup=True, duration=5.0, samples=samples, loss=2.3)
            for i, d in enumerate(steps, warmup):
                w.write("step", step=i, warmup=False, duration=d, samples=samples, loss=2.3)
            if summary:
                w.write("summary", steps=len(steps), samples=samples * len(steps), window_s=sum(steps),
                        median_step_s=sorted(steps)[len(steps) // 2], throughput=samples * len(steps) / sum(steps))
    return run_dir


@pytest.fixture
def hvd_env() -> dict[str, str]:
    """Environment for subprocesses: this interpreter's bin first; Open MPI allowed as root."""
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", PYTHONUNBUFFERED="1")
    return env


def hvdbench_exe() -> str:
    """The installed console script."""
    exe = BIN / "hvdbench"
    return str(exe) if exe.exists() else shutil.which("hvdbench") or "hvdbench"
