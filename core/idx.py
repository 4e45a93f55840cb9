"""Image datasets in the IDX format (MNIST's and Fashion-MNIST's ``*-idx3-ubyte[.gz]`` images beside
``*-idx1-ubyte[.gz]`` labels), read as they are shipped, without a framework, into memory.

An IDX file is two zero bytes, a type byte (0x08: unsigned bytes, the only one these datasets use), the number of
dimensions, each dimension as a big-endian 32-bit count, then the values. Fashion-MNIST (Xiao, Rasul and Vollgraf
2017; Debian's ``dataset-fashion-mnist`` installs it in DEBIAN_DIR) holds 60,000 training and 10,000 test images
of 28x28 grey levels in 10 classes, 6,000 and 1,000 a class. A set is checked before it is used: images and labels
of one count, labels within the classes, a held-out set that shares no image with the training set (an exact copy
would count as learnt), and neither set empty."""

from __future__ import annotations

import gzip
import hashlib
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import UsageError
from .validate import regular_file

DEBIAN_DIR = Path("/usr/share/datasets/fashion-mnist")
SPLITS = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
          "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
CLASSES = 10
UNSIGNED_BYTE = 0x08
MOST_BYTES = 1 << 31  # an IDX file of these datasets is tens of MB; more is a mistake (or a gzip bomb)


def read_idx(path: Path) -> np.ndarray:
    """One IDX file of unsigned bytes (gzip or not) as an array of its shape; a UsageError of one line naming the
    file where it is no such file: no regular file, another magic or type, or fewer or more bytes than its
    dimensions say."""
    try:
        regular_file(path)
        with (gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")) as handle:
            head = handle.read(4)
            if len(head) < 4 or head[:2] != b"\0\0" or head[2] != UNSIGNED_BYTE or not 1 <= head[3] <= 4:
                raise UsageError(f"{path}: not an IDX file of unsigned bytes (its first bytes {head.hex() or 'none'})")
            dims = struct.unpack(f">{head[3]}I", handle.read(4 * head[3]).ljust(4 * head[3], b"\0"))
            expected = int(np.prod(dims, dtype=np.int64))
            if not 0 < expected <= MOST_BYTES:
                raise UsageError(f"{path}: dimensions {'x'.join(map(str, dims))}: {expected:,} values, none or more "
                                 f"than {MOST_BYTES:,}")
            data = handle.read(expected + 1)
    except (OSError, EOFError, ValueError) as exc:  # a damaged gzip stream, or a FIFO, a folder
        raise UsageError(f"{path}: cannot read it as IDX ({str(exc).splitlines()[0] if str(exc) else 'damaged'})") \
            from None
    if len(data) != expected:
        raise UsageError(f"{path}: {len(data):,}{'+' if len(data) > expected else ''} bytes of values, its "
                         f"dimensions {'x'.join(map(str, dims))} say {expected:,}: cut or damaged")
    return np.frombuffer(data, dtype=np.uint8).reshape(dims)


def write_idx(path: Path, values: np.ndarray) -> None:
    """An array of unsigned bytes as an IDX file (gzipped where ``path`` ends in .gz), written aside and renamed."""
    data = np.ascontiguousarray(values, dtype=np.uint8)
    head = bytes((0, 0, UNSIGNED_BYTE, data.ndim)) + struct.pack(f">{data.ndim}I", *data.shape)
    aside = path.with_name(f".{path.name}.part")
    with open(aside, "wb") as raw:
        if path.suffix == ".gz":
            with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as packed:  # the same bytes every time
                packed.write(head + data.tobytes())
        else:
            raw.write(head + data.tobytes())
    aside.rename(path)


@dataclass(frozen=True)
class Split:
    """Images (N, H, W) and labels (N,) of one split, where they came from and a digest of their bytes."""

    images: np.ndarray
    labels: np.ndarray
    source: str
    sha256: str

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def _found(folder: Path, stem: str) -> Path:
    """``stem`` in ``folder``, gzipped as shipped or unpacked; a UsageError where neither is there."""
    for name in (f"{stem}.gz", stem):
        if (folder / name).exists():
            return folder / name
    raise UsageError(f"{folder}: no {stem}.gz (or {stem}): not an MNIST-format dataset folder"
                     + (" (Debian: apt-get install dataset-fashion-mnist)" if folder == DEBIAN_DIR else ""))


def read_split(folder: Path, split: str) -> Split:
    """One split (``train`` or ``test``) of an IDX dataset folder, checked: a UsageError of one line where images
    and labels disagree in count, a label is no class, or the split is empty."""
    images_path, labels_path = (_found(folder, stem) for stem in SPLITS[split])
    images, labels = read_idx(images_path), read_idx(labels_path)
    if images.ndim != 3 or labels.ndim != 1:
        raise UsageError(f"{folder}: {split} images of {images.ndim} dimension(s), labels of {labels.ndim}: images are "
                         "N x height x width, labels N")
    if images.shape[0] != labels.shape[0]:
        raise UsageError(f"{folder}: {images.shape[0]:,} {split} images but {labels.shape[0]:,} labels")
    if labels.size and int(labels.max()) >= CLASSES:
        raise UsageError(f"{labels_path}: label {int(labels.max())} at sample {int(labels.argmax())}: the classes are "
                         f"0-{CLASSES - 1}")
    digest = hashlib.sha256(images.tobytes() + labels.tobytes()).hexdigest()
    return Split(images, labels, str(folder), digest)


def shared_images(train: Split, held: Split) -> np.ndarray:
    """Indices of held-out images whose bytes are exactly a training image's."""
    seen = {hashlib.blake2b(row.tobytes(), digest_size=16).digest() for row in train.images}
    return np.flatnonzero([hashlib.blake2b(row.tobytes(), digest_size=16).digest() in seen for row in held.images])


def train_and_held_out(data_dir: Path, eval_dir: Path | None = None) -> tuple[Split, Split]:
    """The training split of ``data_dir`` and the held-out split (``eval_dir``'s test split, else ``data_dir``'s),
    checked before anything trains: neither empty, images of one shape, and no held-out image a training one."""
    train = read_split(data_dir, "train")
    held = read_split(eval_dir or data_dir, "test")
    for name, split in (("training", train), ("held-out", held)):
        if not len(split):
            raise UsageError(f"{split.source}: the {name} set is empty")
    if train.images.shape[1:] != held.images.shape[1:]:
        raise UsageError(f"{held.source}: held-out images {held.images.shape[1:]}, training "
                         f"{train.images.shape[1:]}: not one dataset")
    shared = shared_images(train, held)
    if len(shared):
        raise UsageError(f"{held.source}: {len(shared):,} held-out image(s) are training images too (the first: test "
                         f"sample {int(shared[0])}): an accuracy on them is not held out")
    return train, held
