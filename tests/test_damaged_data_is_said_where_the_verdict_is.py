"""Damaged real data is never reported as whole: corrupt or vanished reads stand as a banner and a column where the
data path's verdict is (not in runs.csv alone); a label the model has no output for, or none at all, is damage
counted and named (never trained on as class 0, never a step failing mid-run), and class folders beyond the model's
outputs are refused before the first step; a dataset maker that fails leaves nothing a run could take for a
dataset, and says so in one line."""

from __future__ import annotations

import io
import os
import resource
import signal
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hvdbench.analysis.tables.datapath import damage_banner, datapath_table
from hvdbench.core.datasets import index
from hvdbench.core.errors import UsageError


def test_corrupt_reads_stand_where_the_data_paths_verdict_is() -> None:
    base = {"system": "s", "framework": "pytorch", "benchmark": "imagenet", "model": "resnet50", "inputs": "",
            "nodes": 1, "np": 2, "repeats": 3, "unit": "images"}
    table = pd.DataFrame([{**base, "args": "--model resnet50", "data": "device", "runs": "a1,a2,a3",
                           "throughput": 100.0},
                          {**base, "args": "--model resnet50 --data files --data-dir /d", "data": "files",
                           "runs": "b1,b2,b3", "throughput": 99.0}])
    runs = pd.DataFrame([{"run_id": f"{k}{i}", "input_wait_s": 0.0, "step_time_s": 100.0, "bytes_read": 1e9,
                          "dataset_bytes": 1e9, "dataset_samples": 1e4, "data_only": False,
                          "loader_workers": 2 if k == "b" else None, "data_layout": None, "data_loader": None,
                          "data_corrupt": 500 if k == "b" else None, "data_read": 500 if k == "b" else None,
                          "data_named": "/d/train/n1/3.JPEG: corrupt (UnidentifiedImageError)" if k == "b" else None}
                         for k in "ab" for i in (1, 2, 3)])
    rng = np.random.default_rng(0)
    draws = {f"{k}{i}": (100.0 if k == "a" else 99.0) / 3 * (1 + 0.002 * rng.standard_normal(500))
             for k in "ab" for i in (1, 2, 3)}
    table_ = datapath_table(table, runs, draws)
    [row] = table_.itertuples()
    assert row.damaged == 1500 and row.verdict.startswith(
        "damaged: 1,500 of 3,000 samples read were corrupt or vanished (first: /d/train/n1/3.JPEG: corrupt")
    [banner] = damage_banner(table_)
    assert banner.startswith("s imagenet resnet50 at 2 rank(s) met 1,500 corrupt or vanished sample(s)")


def _shard(path: Path, labels: list[str]) -> None:
    from PIL import Image

    with tarfile.open(path, "w") as tar:
        for i, label in enumerate(labels):
            buffer = io.BytesIO()
            Image.new("RGB", (40, 40), (i * 20, 0, 0)).save(buffer, format="JPEG")
            for name, data in ((f"{i:06d}.jpg", buffer.getvalue()), (f"{i:06d}.cls", label.encode())):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


def test_a_label_past_the_models_outputs_or_none_at_all_is_damage_counted(tmp_path: Path) -> None:
    from hvdbench.suite.filedata import Samples, decode_image

    (tmp_path / "wds").mkdir()
    _shard(tmp_path / "wds" / "shard-000000.tar", ["0", "1", "1363", "x", "0", "1"])
    idx = index(tmp_path / "wds", "imagenet")
    stream = iter(Samples(idx, 0, 1, 4, 1, decode_image(32, classes=2), lambda s: [label for _, label in s]))
    labels, named, corrupt = [], [], 0
    for _ in range(2):  # two batches of four: the first epoch's six samples, and two of the next
        batch, tally = next(stream)
        labels += batch
        named += tally.named
        corrupt += tally.corrupt
    assert set(labels) == {0, 1} and corrupt >= 2, (labels, named)  # 1363 and "x" never among the labels trained on
    assert any("label 1363 outside the model's classes 0..1" in n for n in named), named
    assert any("no label" in n for n in named), named


def test_class_folders_beyond_the_models_outputs_are_refused_before_the_first_step(tmp_path: Path) -> None:
    import argparse

    import torch

    from hvdbench.suite.filedata import FileBatches

    for label in range(3):
        (tmp_path / "train" / f"n{label}").mkdir(parents=True)
        for i in range(4):
            (tmp_path / "train" / f"n{label}" / f"{i}.JPEG").write_bytes(b"\xff\xd8")
    flags = argparse.Namespace(data_dir=tmp_path, data_layout=None, batch_size=2, data_cache="warm", image_size=32,
                               seed=0, loader_workers=0)
    with pytest.raises(UsageError, match=r"3 class folders, and the model has 2 outputs: a label past them would "
                                         r"fail a step mid-run"):
        FileBatches("imagenet", flags, 0, 1, torch.device("cpu"), classes=2)


def _small_files() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as a full disk does
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 10, 64 << 10))


@pytest.mark.slow
@pytest.mark.bad_input
def test_a_dataset_maker_that_fails_leaves_nothing_and_says_why_in_one_line(tmp_path: Path) -> None:
    target = tmp_path / "imagenet"
    done = subprocess.run([sys.executable, "-m", "hvdbench.suite.datamake", "imagenet", "--to", str(target),
                           "--format", "webdataset", "--samples", "200"], capture_output=True, text=True,
                          preexec_fn=_small_files, timeout=300)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"hvdbench: error: --to {target}: File too large while making "
                                                   "it; nothing was left there"), done.stderr
    assert not target.exists() and os.listdir(tmp_path) == []  # no half dataset, no folder beside it


@pytest.mark.bad_input
@pytest.mark.parametrize("change", ["a file changed in place", "a file added", "no manifest, a file removed"])
def test_a_dataset_changed_since_its_runs_makes_other_runs_never_the_old_ones(tmp_path: Path, change: str) -> None:
    """What a run read is part of its identity: a dataset changed in place (its manifest untouched), grown, or one
    without a manifest thinned, gives runs of other ids, so resume runs them instead of taking the old runs for the
    new data."""
    from hvdbench.core.datasets import MANIFEST, listing_digest
    from hvdbench.launchers.plan import plan
    from hvdbench.launchers.runs import benchmark_sweep

    data = tmp_path / "data"
    for label in range(2):
        (data / "train" / f"n{label}").mkdir(parents=True)
        for i in range(4):
            (data / "train" / f"n{label}" / f"{i}.JPEG").write_bytes(b"\xff\xd8" + bytes([i]) * 10)
    if change != "no manifest, a file removed":
        (data / MANIFEST).write_text('{"kind": "imagenet"}\n')

    def ids() -> set[str]:
        listing_digest.cache_clear()  # a new command plans afresh
        sweep = benchmark_sweep("imagenet", ("--model", "resnet50", "--batch-size", "2", "--data", "files",
                                             "--data-dir", str(data)), np=(1,), launcher="horovodrun",
                                controller=None, repeats=1, system="s", timeout=60.0, devices=None, topology=None)
        return {spec.id for spec in plan(sweep).specs}

    before = ids()
    target = data / "train" / "n0" / "1.JPEG"
    if change == "a file changed in place":
        stat = target.stat()
        target.write_bytes(b"\xff\xd8" + b"\x09" * 10)  # the same size
        os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    elif change == "a file added":
        (data / "train" / "n1" / "9.JPEG").write_bytes(b"\xff\xd8")
    else:
        target.unlink()
    assert ids().isdisjoint(before) and ids() == ids()
