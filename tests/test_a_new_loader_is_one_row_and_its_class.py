"""A loader is its row in core/loaders.py and its batches class, as CONTRIBUTING's table says: a stand-in written
here alone (a row naming its class; a class reading the dataset's real files in order, with the batches protocol and
the one data record) is offered by --loader, chosen by the trainer, trains a rank from those files, and its record
reaches the run table, the report's data-path columns and the run's details as any loader's does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from hvdbench.analysis.collect import collect
from hvdbench.analysis.tables.details import batches_said

STANDIN = '''
import io

import numpy as np
import torch
from PIL import Image

from hvdbench.core.datasets import check_enough, index, read_bytes
from hvdbench.core.loaders import LOADERS, Loader, data_record


class InOrder:
    """Every size-th sample from this rank, in order, decoded here (no workers): the plainest loader."""

    def __init__(self, kind, flags, rank, size, device, classes):
        self.idx = index(flags.data_dir, kind, flags.data_layout)
        check_enough(self.idx, size, flags.batch_size)
        self.cache = self.idx.start(flags.data_cache)
        self.mine = list(range(rank, len(self.idx), size))
        self.batch, self.side, self.device = flags.batch_size, flags.image_size or 32, device
        self.at, self.read, self.bytes = 0, 0, 0

    def next(self):
        images, labels, nbytes = [], [], 0
        for _ in range(self.batch):
            place = self.idx.places[self.mine[self.at % len(self.mine)]]
            self.at += 1
            data = read_bytes(place)
            nbytes += len(data)
            image = Image.open(io.BytesIO(data)).convert("RGB").resize((self.side, self.side))
            images.append(torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1).float() / 255)
            labels.append(place.label)
        self.read, self.bytes = self.read + self.batch, self.bytes + nbytes
        return (torch.stack(images), torch.tensor(labels)), {"input_wait_s": 0.0, "bytes_read": float(nbytes)}

    def facts(self):
        return data_record(self.idx, "inorder", read=self.read, nbytes=self.bytes, corrupt=0, named=[], wait_s=0.0,
                           cache=self.cache, shard="every size-th sample from this rank, in order")


LOADERS["inorder"] = Loader("inorder", "pytorch", ("imagenet",), ("folder",), "files in order, decoded by the rank",
                            "standin_loader:InOrder")
'''


@pytest.mark.slow
def test_a_stand_in_loader_trains_a_rank_from_files_by_its_row_alone(tmp_path: Path) -> None:
    (tmp_path / "standin_loader.py").write_text(STANDIN)
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{os.environ.get('PYTHONPATH', '')}"}
    made = subprocess.run([sys.executable, "-m", "hvdbench.cli", "data", "make", "imagenet", "--to",
                           str(tmp_path / "ds"), "--samples", "12"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert made.returncode == 0, made.stderr
    args = ["--data", "files", "--data-dir", str(tmp_path / "ds" / "train"), "--loader", "inorder", "--model",
            "resnet18", "--image-size", "32", "--batch-size", "2", "--steps", "3", "--warmup-steps", "1",
            "--threads", "1", "--log-dir", str(tmp_path / "runs" / "one")]
    rank = ("import sys, standin_loader\nfrom hvdbench.suite.pytorch import main\n"
            "from hvdbench.suite.imagenet import build\nsys.exit(main('imagenet', build, sys.argv[1:]))")
    helped = subprocess.run([sys.executable, "-c", rank, "--help"], capture_output=True, text=True, env=env,
                            timeout=120)
    assert "inorder: files in order, decoded by the rank" in " ".join(helped.stdout.split())
    done = subprocess.run([sys.executable, "-c", rank, *args], capture_output=True, text=True, env=env,
                          timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    run = collect([tmp_path / "runs"]).runs.iloc[0]
    assert run["status"] == "ok" and run["data_loader"] == "inorder" and run["data"] == "files"
    assert batches_said(run) == "files (folder, inorder, 2 workers)"
