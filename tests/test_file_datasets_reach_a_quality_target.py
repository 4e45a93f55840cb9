"""A real dataset written out for the file loaders (Fashion-MNIST as PNGs, ImageFolder or WebDataset) reads back
pixel for pixel with its labels; a held-out set on disk is checked against the training set before anything trains
(the same files, a copied sample, a class the training set lacks, none at all: one line each); and the imagenet
workload trains from those files to a target under Horovod with the held-out set's evaluation on the clock."""

from __future__ import annotations

import argparse
import io
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from conftest import hvdbench_exe
from hvdbench.core.catalog import FASHION_SAMPLE, get_benchmark
from hvdbench.core.datasets import index, read_bytes
from hvdbench.core.errors import UsageError
from hvdbench.core.idx import read_split
from hvdbench.core.records import read_records
from hvdbench.suite.datamake import FASHION_CLASSES, export_fashion
from hvdbench.suite.heldout import centre_crop, checked_sets, overlap

_EXPORTS: dict[str, Path] = {}


def _export(tmp_path_factory: pytest.TempPathFactory, layout: str) -> Path:
    if layout not in _EXPORTS:
        _EXPORTS[layout] = export_fashion(FASHION_SAMPLE, tmp_path_factory.mktemp("fashion") / layout, layout)
    return _EXPORTS[layout]


def _flags(train: Path, held: Path | None, layout: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(data_dir=str(train), eval_dir=str(held) if held else None, data_layout=layout)


@pytest.mark.parametrize("layout", ["folder", "webdataset"])
def test_an_export_reads_back_pixel_for_pixel_with_its_labels(tmp_path_factory: pytest.TempPathFactory,
                                                              layout: str) -> None:
    root = _export(tmp_path_factory, layout)
    for name, split in (("train", "train"), ("val", "test")):
        shipped = read_split(FASHION_SAMPLE, split)
        idx = index(root / name, "imagenet")
        assert idx.layout == layout and len(idx) == len(shipped) and idx.classes == len(FASHION_CLASSES)
        by_key = {Path(p.path).stem if layout == "folder" else (p.path, p.offset): p for p in idx.places}
        places = [by_key[f"{i:05d}"] for i in range(len(shipped))] if layout == "folder" else \
            [by_key[k] for k in sorted(by_key)]
        for i in (0, 1, len(shipped) // 2, len(shipped) - 1):
            with Image.open(io.BytesIO(read_bytes(places[i]))) as image:
                assert np.array_equal(np.asarray(image), shipped.images[i])
            assert places[i].label == int(shipped.labels[i])
        assert json.loads((root / name / "hvdbench-dataset.json").read_text())["samples"] == len(shipped)
    with pytest.raises(UsageError, match="not empty"):
        export_fashion(FASHION_SAMPLE, root, layout)


def test_the_held_out_set_is_checked_before_anything_trains(tmp_path_factory: pytest.TempPathFactory,
                                                           tmp_path: Path) -> None:
    root = _export(tmp_path_factory, "folder")
    train, held, found = checked_sets(_flags(root / "train", root / "val"), "imagenet")
    assert (len(train), len(held)) == (1000, 200) and found.shared == () and found.compared == found.pairs > 0
    assert checked_sets(_flags(root, None), "imagenet")[1].root == root / "val"  # val/ beside train/ by default
    with pytest.raises(UsageError, match="are in the training set too"):
        checked_sets(_flags(root / "train", root / "train"), "imagenet")
    with pytest.raises(UsageError, match="needs a held-out set"):
        checked_sets(_flags(root / "train", None), "imagenet")
    copied = tmp_path / "val"
    shutil.copytree(root / "val", copied)
    leaked = sorted((root / "train" / "3-dress").iterdir())[7]
    shutil.copy(leaked, copied / "3-dress" / "copied.png")
    with pytest.raises(UsageError, match=r"1 held-out sample\(s\) have the bytes of a training sample .*copied\.png"):
        checked_sets(_flags(root / "train", copied), "imagenet")
    (copied / "3-dress" / "copied.png").unlink()
    (copied / "3-dress").rename(copied / "3-gown")
    with pytest.raises(UsageError, match="'3-gown'.* is not among the training set's 10 classes"):
        checked_sets(_flags(root / "train", copied), "imagenet")
    shutil.rmtree(copied / "3-gown")  # a val/ of nine classes keeps the training set's numbers
    held = checked_sets(_flags(root / "train", copied), "imagenet")[1]
    assert {p.label for p in held.places} == set(range(10)) - {3}


def test_the_overlap_check_says_where_it_stopped_reading(tmp_path_factory: pytest.TempPathFactory) -> None:
    root = _export(tmp_path_factory, "webdataset")
    train, held = index(root / "train", "imagenet"), index(root / "val", "imagenet")
    whole, partial = overlap(train, held), overlap(train, held, budget=20_000)
    assert whole.compared == whole.pairs and whole.facts()["overlap_check"] == "complete"
    assert 0 < partial.compared < partial.pairs and partial.facts()["overlap_check"].startswith("partial: ")


def test_a_rank_lists_the_training_set_once_and_rank_0_alone_reads_for_the_overlap(
        tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loader and the held-out check share one listing; the bytes are compared on rank 0 and what it found is
    what every rank refuses or keeps (a node reads them once, every rank refuses alike)."""
    from hvdbench.core import datasets
    from hvdbench.suite import heldout

    root = _export(tmp_path_factory, "folder")
    train = checked_sets(_flags(root / "train", root / "val"), "imagenet")[0]
    assert datasets.listed(root / "train", "imagenet", None) is train  # the loader's listing is this one
    found_on_0 = heldout.Overlap(5, 5, ("val/3-dress/x.png",))
    monkeypatch.setattr(heldout, "overlap", lambda *a: pytest.fail("rank 1 read bytes for the overlap check"))
    sent: list[object] = []

    def share(mine: object) -> heldout.Overlap:
        sent.append(mine)
        return found_on_0

    with pytest.raises(UsageError, match=r"1 held-out sample\(s\) have the bytes .*x\.png"):
        checked_sets(_flags(root / "train", root / "val"), "imagenet", rank=1, share=share)
    assert sent == [None]


def test_the_centre_crop_keeps_an_upscaled_small_image_whole_enough() -> None:
    image = Image.fromarray(np.arange(28 * 28, dtype=np.uint8).reshape(28, 28)).convert("RGB")
    assert centre_crop(image, 32).shape == (32, 32, 3)
    assert centre_crop(Image.new("RGB", (500, 375)), 224).shape == (224, 224, 3)


@pytest.mark.parametrize("args, said", [
    (["--eval-dir", "x"], "--eval-dir applies with --target-accuracy"),
    (["--target-accuracy", "0.5"], "trains on files: --data files"),
    (["--target-accuracy", "0.5", "--data", "files", "--data-dir", "x", "--data-only"], "no --data-only"),
])
def test_a_target_on_imagenet_is_refused_without_what_it_needs(args: list[str], said: str) -> None:
    info = get_benchmark("imagenet")
    with pytest.raises(UsageError, match=said):
        info.check(["--batch-size", "2", *args])


@pytest.mark.slow
@pytest.mark.mpi
def test_imagenet_trains_from_files_to_a_target_evaluated_on_the_clock(tmp_path_factory: pytest.TempPathFactory,
                                                                      tmp_path: Path, hvd_env: dict) -> None:
    root = _export(tmp_path_factory, "folder")
    out = tmp_path / "r"
    proc = subprocess.run(
        [hvdbench_exe(), "run", "imagenet", "--np", "2", "--output", str(out), "--timeout", "300", "--no-report", "--",
         "--model", "resnet18", "--image-size", "32", "--batch-size", "16", "--threads", "1", "--data", "files",
         "--data-dir", str(root / "train"), "--eval-dir", str(root / "val"), "--target-accuracy", "0.4",
         "--max-epochs", "6", "--lr", "0.05", "--loader-workers", "0"],
        capture_output=True, text=True, env=hvd_env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (folder,) = [p.parent for p in out.glob("*/run.json")]
    records = read_records(folder / "rank-0.jsonl")
    summary, evals = records[-1], [r for r in records if r["kind"] == "eval"]
    quality, held = summary["quality"], summary["data"]["held_out"]
    assert quality["converged"] and evals[-1]["accuracy"] >= 0.4 > max([e["accuracy"] for e in evals[:-1]] or [0])
    assert quality["seconds"] == evals[-1]["elapsed_s"] and quality["eval_s"] == pytest.approx(
        sum(e["eval_s"] for e in evals))
    assert quality["global_batch"] == 32 and summary["data"]["corrupt"] == 0
    assert held["samples"] == 200 and held["held_out_shared"] == 0 and held["overlap_check"] == "complete"
    assert (folder / "mllog.txt").read_text().count('"eval_accuracy"') == len(evals)
