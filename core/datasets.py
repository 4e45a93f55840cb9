"""Datasets on disk as clusters store them, without a framework: which layout a folder holds (ImageFolder,
WebDataset ``.tar`` shards, TFRecord shards), every sample's place (a file, or a member's bytes inside a shard), the
sample ids each rank reads in an epoch (no sample twice across ranks), and a manifest of what a folder holds.

Layouts, as the real ones are stored:

- ``folder``: ImageFolder, ``train/<class>/<name>.JPEG`` (or ``<class>/<name>`` at the top), the class index the
  sorted order of the class folders; speech ``<name>.wav`` beside ``<name>.txt``; translation ``<name>.src`` beside
  ``<name>.tgt`` (one sentence of token ids each);
- ``webdataset``: ``*.tar`` shards whose members share a key (``000123.jpg`` with ``000123.cls``; ``.wav`` with
  ``.txt``; ``.src`` with ``.tgt``), read by offset: a rank reads only its own samples' bytes;
- ``tfrecord``: ``*.tfrecord*`` shards of ``tf.train.Example`` with ``image/encoded`` and ``image/class/label``
  (read by tf.data; indexed here by record only)."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import tarfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import numpy as np

from .errors import UsageError
from .pagecache import prepare

MANIFEST = "hvdbench-dataset.json"
FORMATS = ("folder", "webdataset", "tfrecord")
KINDS = ("imagenet", "speech", "translation")
IMAGE_SUFFIXES = (".jpeg", ".jpg", ".png")
PAYLOAD = {"imagenet": IMAGE_SUFFIXES, "speech": (".wav",), "translation": (".src",)}
COMPANION = {"imagenet": ".cls", "speech": ".txt", "translation": ".tgt"}  # the label beside each sample
MAX_SAMPLES = 50_000_000  # an index larger than this is a mistake (the folder of a whole file system)


@dataclass(frozen=True)
class Place:
    """Where one sample's bytes are: a file, from ``offset``, ``size`` bytes (a whole file: offset 0); its label
    (a class index), or the place of its companion (a transcript, a target sentence)."""

    path: str
    offset: int
    size: int
    label: int = -1
    companion: tuple[str, int, int] | None = None

    @property
    def name(self) -> str:
        """How a message names it: the file, or the shard and the member's offset."""
        return self.path if self.offset == 0 and self.companion is None else f"{self.path}@{self.offset}"


@dataclass(frozen=True)
class Index:
    """A dataset folder's samples in a stable order, its layout and its kind."""

    root: Path
    layout: str
    kind: str
    places: tuple[Place, ...]
    classes: int

    def __len__(self) -> int:
        return len(self.places)

    @property
    def bytes(self) -> int:
        """Every sample's bytes (their companions' not counted)."""
        return sum(p.size for p in self.places)

    def files(self) -> list[str]:
        """Every file the samples and their companions are read from, once each."""
        return list(dict.fromkeys([p.path for p in self.places] + [p.companion[0] for p in self.places
                                                                    if p.companion is not None]))

    def start(self, mode: str) -> dict[str, object]:
        """The page cache set as ``mode`` asks (core/pagecache.py), and where the run starts from."""
        return prepare(self.files(), mode, self.bytes)


def detect(root: Path) -> str:
    """The layout a dataset folder holds; a UsageError in one line where it holds none (or is no folder)."""
    if not root.is_dir():
        raise UsageError(f"--data-dir {root}: no such folder")
    names = [p.name for p in _files(root)]
    if any(".tfrecord" in n for n in names):
        return "tfrecord"
    if any(n.endswith(".tar") for n in names):
        return "webdataset"
    if names:
        return "folder"
    raise UsageError(f"--data-dir {root}: no files (an empty dataset)")


def _files(root: Path) -> Iterable[Path]:
    """Every file below ``root`` (its manifest left out), in a stable order; anything else there is refused in one line
    naming it, before the first step: a FIFO would hang the rank that opens it, a device fill its memory, and a link
    could read a file twice, or one outside the dataset."""
    count = 0
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        linked = next((d for d in dirs if os.path.islink(os.path.join(folder, d))), None)
        if linked is not None:
            raise UsageError(f"--data-dir {root}: {Path(folder) / linked} is a link to a folder, which is not "
                             "followed; a dataset is read from its own files only: put the folder itself there")
        for name in sorted(files):
            if name == MANIFEST:
                continue
            count += 1
            if count > MAX_SAMPLES:
                raise UsageError(f"--data-dir {root}: more than {MAX_SAMPLES:,} files; give the dataset's own folder")
            path = Path(folder) / name
            mode = os.lstat(path).st_mode
            if not stat.S_ISREG(mode):
                what = "a link" if stat.S_ISLNK(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
                raise UsageError(f"--data-dir {root}: {path} is {what}, not a regular file; a dataset is read from its "
                                 "own files only: remove it (or copy the file it stands for into its place)")
            yield path


@lru_cache(maxsize=64)
def listing_digest(root: Path) -> str:
    """What a dataset folder holds now, as a digest: every file's place, size and modification time (its manifest's
    bytes among them): a dataset changed in place, or remade, or one without a manifest, gives another digest, so a
    run of it is another run, never the old one's (a UsageError where the folder holds what no dataset may)."""
    digest = hashlib.sha256()
    for path in _files(root):
        info = os.lstat(path)
        digest.update(f"{path.relative_to(root)}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    manifest = root / MANIFEST
    if manifest.is_file() and not manifest.is_symlink():
        digest.update(manifest.read_bytes()[:1 << 20])
    return digest.hexdigest()


def index(root: Path, kind: str, layout: str | None = None) -> Index:
    """The samples of ``root`` for workload ``kind`` in ``layout`` (detected where None); a UsageError where it holds
    none of that kind, naming what it holds."""
    root = Path(root)
    layout = layout or detect(root)
    if layout not in FORMATS:
        raise UsageError(f"--data-layout {layout!r}: one of {', '.join(FORMATS)}")
    if layout == "tfrecord":
        shards = sorted(str(p) for p in _files(root) if ".tfrecord" in p.name)
        return Index(root, layout, kind, tuple(Place(s, 0, os.path.getsize(s)) for s in shards), 0)
    found, classes = (_folder(root, kind) if layout == "folder" else _shards(root, kind))
    if not found:
        wanted = "/".join(PAYLOAD[kind])
        raise UsageError(f"--data-dir {root}: no {kind} samples ({wanted}) in its {layout} layout")
    return Index(root, layout, kind, tuple(found), classes)


@lru_cache(maxsize=8)
def _listed(root: str, kind: str, layout: str | None) -> Index:
    return index(Path(root), kind, layout)


def listed(root: Path, kind: str, layout: str | None = None) -> Index:
    """A rank's one listing of a dataset: its loader and a run to target's checks of the same folder read the same
    index, listed once per process (a run never changes the dataset it reads)."""
    return _listed(str(Path(root).resolve()), kind, layout)


def _folder(root: Path, kind: str) -> tuple[list[Place], int]:
    """ImageFolder (``train/`` if there is one), or files beside their companions."""
    top = root / "train" if (root / "train").is_dir() else root
    files = [p for p in _files(top)]
    if kind == "imagenet":
        wanted = [p for p in files if p.suffix.lower() in IMAGE_SUFFIXES and p.parent != top]
        names = sorted({p.parent.name for p in wanted})
        number = {name: i for i, name in enumerate(names)}
        return [Place(str(p), 0, p.stat().st_size, number[p.parent.name]) for p in wanted], len(names)
    suffix, beside = PAYLOAD[kind][0], COMPANION[kind]
    out = []
    for p in files:
        if p.suffix.lower() == suffix:
            other = p.with_suffix(beside)
            companion = (str(other), 0, other.stat().st_size) if other.is_file() else None
            out.append(Place(str(p), 0, p.stat().st_size, companion=companion))
    return out, 0


def _shards(root: Path, kind: str) -> tuple[list[Place], int]:
    """Every sample of every ``.tar`` shard, by the offset of its member's bytes; labels read from ``.cls``."""
    out: list[Place] = []
    labels: set[int] = set()
    for shard in (p for p in _files(root) if p.name.endswith(".tar")):
        try:
            with tarfile.open(shard) as tar:
                members = {m.name: m for m in tar.getmembers() if m.isfile()}
                for name, member in members.items():
                    stem, dot, suffix = name.rpartition(".")
                    if not dot or f".{suffix.lower()}" not in PAYLOAD[kind]:
                        continue
                    beside = members.get(stem + COMPANION[kind])
                    label = -1
                    companion = None
                    if beside is not None and kind == "imagenet":
                        handle = tar.extractfile(beside)
                        text = handle.read(32).decode("ascii", "replace").strip() if handle else ""
                        label = int(text) if text.isdigit() else -1
                        labels.add(label)
                    elif beside is not None:
                        companion = (str(shard), beside.offset_data, beside.size)
                    out.append(Place(str(shard), member.offset_data, member.size, label, companion))
        except (tarfile.TarError, OSError) as exc:
            raise UsageError(f"--data-dir {root}: shard {shard.name} is not a readable tar ({exc})") from None
    return out, (max(labels) + 1 if labels else 0)


def read_bytes(place: Place) -> bytes:
    """One sample's bytes (an OSError where its file is gone or unreadable: the caller counts and names it)."""
    with open(place.path, "rb") as handle:
        handle.seek(place.offset)
        data = handle.read(place.size)
    if len(data) != place.size:
        raise OSError(f"{place.name}: {len(data)} of {place.size} bytes (the file shrank)")
    return data


def read_companion(place: Place) -> bytes:
    """The bytes of a sample's companion (a transcript, a target sentence); empty where it has none."""
    if place.companion is None:
        return b""
    return read_bytes(Place(*place.companion))


def shard_ids(count: int, rank: int, size: int, epoch: int, seed: int) -> np.ndarray:
    """The sample ids rank ``rank`` of ``size`` reads in ``epoch``: a permutation of all ``count`` ids seeded by
    (seed, epoch), the same on every rank, rank r taking every size-th from r, cut so every rank reads as many.
    No id twice in one epoch, across ranks or within one."""
    order = np.random.default_rng([seed, epoch]).permutation(count)
    each = count // size
    return order[rank::size][:each]


def check_enough(idx: Index, size: int, batch: int) -> None:
    """One line where the dataset cannot give every rank a batch in an epoch."""
    if len(idx) < size * batch:
        raise UsageError(f"--data-dir {idx.root}: {len(idx)} samples, fewer than {size} rank(s) x batch {batch} = "
                         f"{size * batch}: every rank needs a full batch each step")


def write_manifest(root: Path, kind: str, layout: str, samples: int, digest: str, extra: dict[str, object]) -> Path:
    """What a made dataset holds: kind, layout, samples, bytes, files and a digest of their contents."""
    files = [p for p in _files(root)]
    total = sum(p.stat().st_size for p in files)
    path = root / MANIFEST
    path.write_text(json.dumps({"kind": kind, "layout": layout, "samples": samples, "files": len(files),
                                "bytes": total, "sha256": digest, **extra}, indent=2) + "\n", encoding="utf-8")
    return path
