"""MNIST-format datasets (Fashion-MNIST as Debian ships it) are read as shipped, byte for byte, and checked before
anything trains: a damaged or cut file, images and labels that disagree, a label that is no class, an empty set, a
FIFO, and a held-out set that shares an image with the training set are each one line naming the file."""

from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from hvdbench.core.catalog import FASHION_SAMPLE, get_benchmark
from hvdbench.core.errors import UsageError
from hvdbench.core.idx import DEBIAN_DIR, SPLITS, read_idx, read_split, train_and_held_out, write_idx


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "set"
    shutil.copytree(FASHION_SAMPLE, folder)
    return folder


def test_the_sample_reads_as_its_ten_balanced_classes() -> None:
    train, held = train_and_held_out(FASHION_SAMPLE)
    assert train.images.shape == (1000, 28, 28) and held.images.shape == (200, 28, 28)
    assert np.bincount(train.labels).tolist() == [100] * 10 and np.bincount(held.labels).tolist() == [20] * 10
    assert train.images.dtype == np.uint8 and 0 < train.images.mean() < 255


def test_what_is_written_reads_back_byte_for_byte_gzipped_or_not(tmp_path: Path) -> None:
    values = np.random.default_rng(1).integers(0, 256, (7, 5, 3), dtype=np.uint8)
    for name in ("a-idx3-ubyte.gz", "a-idx3-ubyte"):
        write_idx(tmp_path / name, values)
        assert np.array_equal(read_idx(tmp_path / name), values)
    first = (tmp_path / "a-idx3-ubyte.gz").read_bytes()
    write_idx(tmp_path / "a-idx3-ubyte.gz", values)
    assert (tmp_path / "a-idx3-ubyte.gz").read_bytes() == first  # no time stamp: the same bytes every time


@pytest.mark.parametrize("damage, said", [
    (lambda p: p.write_bytes(gzip.compress(b"\x00\x00\x0d\x03" + bytes(12))), "not an IDX file of unsigned bytes"),
    (lambda p: p.write_bytes(gzip.compress(gzip.decompress(p.read_bytes())[:-10])), "cut or damaged"),
    (lambda p: p.write_bytes(gzip.compress(gzip.decompress(p.read_bytes()) + b"xx")), "cut or damaged"),
    (lambda p: p.write_bytes(p.read_bytes()[:200]), "cannot read it as IDX"),
    (lambda p: p.write_bytes(b""), "not an IDX file"),
    (lambda p: (p.unlink(), os.mkfifo(p)), "not a regular file"),
])
def test_a_damaged_images_file_is_one_line_naming_it(tmp_path: Path, damage, said: str) -> None:
    folder = _copy(tmp_path)
    images = folder / f"{SPLITS['train'][0]}.gz"
    damage(images)
    with pytest.raises(UsageError, match=said) as caught:
        train_and_held_out(folder)
    assert str(images) in str(caught.value) and "\n" not in str(caught.value)


def test_labels_that_disagree_or_are_no_class_are_refused(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    labels = folder / f"{SPLITS['train'][1]}.gz"
    values = read_idx(labels).copy()
    write_idx(labels, values[:-1])
    with pytest.raises(UsageError, match="1,000 train images but 999 labels"):
        read_split(folder, "train")
    values[17] = 12
    write_idx(labels, values)
    with pytest.raises(UsageError, match="label 12 at sample 17: the classes are 0-9"):
        read_split(folder, "train")


def test_a_held_out_set_sharing_an_image_or_empty_or_missing_is_refused(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    train = read_split(folder, "train")
    test_images = folder / f"{SPLITS['test'][0]}.gz"
    held = read_idx(test_images).copy()
    held[3] = train.images[500]
    write_idx(test_images, held)
    with pytest.raises(UsageError, match=r"1 held-out image.*the first: test sample 3\).*not held out"):
        train_and_held_out(folder)
    write_idx(test_images, held[:0])
    write_idx(folder / f"{SPLITS['test'][1]}.gz", np.zeros(0, dtype=np.uint8))
    with pytest.raises(UsageError, match="dimensions .*none"):
        train_and_held_out(folder)
    (folder / f"{SPLITS['test'][0]}.gz").unlink()
    with pytest.raises(UsageError, match="no t10k-images-idx3-ubyte.gz .*not an MNIST-format dataset folder"):
        train_and_held_out(folder)


def test_the_workload_flags_say_what_applies() -> None:
    info = get_benchmark("fashion_mnist")
    flags = info.check(["--target-accuracy", "0.85"])
    assert (flags.eval_every, flags.max_epochs, flags.lr_scaling, flags.idx_dir) == (1.0, 10.0, "none",
                                                                                      str(DEBIAN_DIR))
    for argv, said in ((["--target-accuracy", "85"], "a fraction of 1"),
                       (["--target-accuracy", "0.8", "--target-loss", "0.3"], "give one target"),
                       (["--eval-every", "0.5"], "--eval-every applies with --target-accuracy"),
                       (["--lr-scaling", "linear"], "--lr-scaling applies with"),
                       (["--data", "loader"], "holds its dataset in memory"),
                       (["--target-accuracy", "0.8", "--target-ci", "2"], "stops at its target")):
        with pytest.raises((UsageError, SystemExit)) as caught:
            info.check(argv)
        if caught.type is UsageError:
            assert said in str(caught.value), argv


@pytest.mark.skipif(not (DEBIAN_DIR / f"{SPLITS['train'][0]}.gz").exists(),
                    reason="dataset-fashion-mnist not installed")
def test_the_full_dataset_reads_as_published_and_its_splits_share_no_image() -> None:
    """Xiao et al. 2017: 60,000 training and 10,000 test images, 6,000 and 1,000 a class; no exact copy across."""
    train, held = train_and_held_out(DEBIAN_DIR)
    assert train.images.shape == (60000, 28, 28) and held.images.shape == (10000, 28, 28)
    assert set(np.bincount(train.labels)) == {6000} and set(np.bincount(held.labels)) == {1000}
    assert train.images.mean() / 255 == pytest.approx(0.2860, abs=5e-4)  # the normalisation the workload uses
