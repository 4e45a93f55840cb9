"""A held-out set read from files, for a run to a quality target on a workload that reads images (``imagenet
--data files --data-dir DIR --eval-dir DIR``; ImageNet's val/ and MLPerf's 75.9% top-1 on a cluster, Fashion-MNIST
written out by ``hvdbench data export`` here).

Before anything trains the two sets are checked: neither empty, the held-out classes the training set's (an
ImageFolder's classes matched by folder name, so a val/ holding fewer classes keeps their numbers), no file in both,
and no held-out sample with the bytes of a training one: samples of equal byte size are read and hashed, up to
CHECK_BYTES; the facts say how many of the same-size pairs were compared. An evaluation decodes this rank's share of
the held-out set (every size-th sample from its rank) as ImageNet's evaluation does (the shorter side resized to
side / 0.875, the centre cropped), in DataLoader workers, and returns its sums; a file that cannot be read is
counted and named, never scored."""

from __future__ import annotations

import argparse
import hashlib
import io
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

from hvdbench.core.datasets import Index, Place, index, listed, read_bytes
from hvdbench.core.errors import UsageError
from .filedata import MEAN, NAMED, STD

CHECK_BYTES = 512 << 20  # the most bytes read to compare same-size samples of the two sets
EVAL_BATCH = 100  # held-out images a forward pass
CENTRE = 0.875  # the crop's share of the resized shorter side (ImageNet's 224 of 256)


def held_out_dir(flags: argparse.Namespace) -> Path:
    """--eval-dir, else a ``val/`` beside --data-dir's ``train/`` (ImageNet's own layout); one line where neither."""
    if getattr(flags, "eval_dir", None):
        return Path(flags.eval_dir)
    root = Path(flags.data_dir)
    if (root / "train").is_dir() and (root / "val").is_dir():
        return root / "val"
    raise UsageError(f"a quality target needs a held-out set: --eval-dir DIR (no val/ beside {root}/train to take)")


def class_names(idx: Index) -> list[str] | None:
    """An ImageFolder's class folder names in label order; None for shards (their labels are numbers)."""
    if idx.layout != "folder":
        return None
    return sorted({Path(p.path).parent.name for p in idx.places})


def relabelled(train: Index, held: Index) -> Index:
    """The held-out index with the training set's class numbers; one line where it names a class the training set
    lacks (a model trained without it cannot be scored on it)."""
    names, held_names = class_names(train), class_names(held)
    if names is not None and held_names is not None:
        number = {name: i for i, name in enumerate(names)}
        alien = sorted(set(held_names) - set(number))
        if alien:
            raise UsageError(f"--eval-dir {held.root}: class folder {alien[0]!r} (and {len(alien) - 1} more) is not "
                             f"among the training set's {len(names):,} classes: not one dataset")
        places = tuple(replace(p, label=number[Path(p.path).parent.name]) for p in held.places)
        return replace(held, places=places, classes=len(names))
    labels = {p.label for p in held.places}
    if min(labels) < 0 or max(labels) >= max(train.classes, 1):
        raise UsageError(f"--eval-dir {held.root}: labels {min(labels)}..{max(labels)}, the training set's "
                         f"0..{train.classes - 1}: not one dataset")
    return held


@dataclass(frozen=True)
class Overlap:
    """What the check of the two sets found: held-out samples with a training sample of the same byte size
    (``pairs``), how many of them were compared by content (``compared``), and the shared ones named."""

    pairs: int
    compared: int
    shared: tuple[str, ...]

    def facts(self) -> dict[str, Any]:
        return {"held_out_shared": len(self.shared), "overlap_same_size": self.pairs,
                "overlap_compared": self.compared,
                "overlap_check": "complete" if self.compared == self.pairs else
                f"partial: {self.compared:,} of {self.pairs:,} same-size held-out samples compared "
                f"({CHECK_BYTES >> 20} MiB read at most)"}


def overlap(train: Index, held: Index, budget: int = CHECK_BYTES) -> Overlap:
    """Held-out samples whose bytes a training sample has too: only samples of equal size can be equal, so only
    they are read (each once), in a stable order, until ``budget`` bytes are read."""
    by_size: dict[int, list[Place]] = defaultdict(list)
    for place in train.places:
        by_size[place.size].append(place)
    candidates = [h for h in held.places if h.size in by_size]
    digests: dict[Place, bytes] = {}
    read = compared = 0
    shared: list[str] = []

    def digest(place: Place) -> bytes:
        nonlocal read
        if place not in digests:
            try:
                digests[place] = hashlib.sha256(read_bytes(place)).digest()
            except OSError:
                digests[place] = b""  # unreadable: not equal to anything; the loaders name it
            read += place.size
        return digests[place]

    for held_place in candidates:
        if read + held_place.size * (1 + len(by_size[held_place.size])) > budget and compared:
            break
        mine = digest(held_place)
        if mine and any(digest(t) == mine for t in by_size[held_place.size]):
            shared.append(held_place.name)
        compared += 1
    return Overlap(len(candidates), compared, tuple(shared))


def checked_sets(flags: argparse.Namespace, kind: str, rank: int = 0,
                 share: Callable[[Any], Any] | None = None) -> tuple[Index, Index, Overlap]:
    """The training and held-out indexes, checked: a UsageError of one line where the held-out set is missing,
    empty, of other classes, or shares a file or a sample's bytes with the training set. The training set is listed
    once (its loader reads the same listing); the bytes are compared on rank 0 alone and what it found given to every
    rank (``share``: the runtime's broadcast), so every rank refuses alike and a node reads them once."""
    train = listed(Path(flags.data_dir), kind, flags.data_layout)
    where = held_out_dir(flags)
    if not where.is_dir():
        raise UsageError(f"--eval-dir {where}: no such folder")
    held = relabelled(train, index(where, kind, None))
    same = sorted({p.path for p in held.places} & {p.path for p in train.places})
    if same:
        raise UsageError(f"--eval-dir {where}: {len(same):,} file(s) are in the training set too (the first: "
                         f"{same[0]}): an accuracy on them is not held out")
    if share is None:
        found = overlap(train, held)
    else:  # rank 0 reads; every rank gets what it found
        found = share(overlap(train, held) if rank == 0 else None)
    if found.shared:
        raise UsageError(f"--eval-dir {where}: {len(found.shared):,} held-out sample(s) have the bytes of a training "
                         f"sample (the first: {found.shared[0]}): an accuracy on them is not held out")
    return train, held, found


class _Centred(Dataset):
    """This rank's held-out samples, decoded and centre-cropped; an unreadable one as its name."""

    def __init__(self, places: list[Place], side: int) -> None:
        self.places, self.side = places, side

    def __len__(self) -> int:
        return len(self.places)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int] | str:
        from PIL import Image

        place = self.places[i]
        try:
            with Image.open(io.BytesIO(read_bytes(place))) as image:
                pixels = centre_crop(image.convert("RGB"), self.side)
        except Exception as exc:  # noqa: BLE001 - a decoder's own error or a vanished file: named, not scored
            return f"{place.name}: {type(exc).__name__}: {str(exc)[:80]}"[:300]
        array = (pixels.astype(np.float32) - MEAN) / STD
        return torch.from_numpy(array.transpose(2, 0, 1).copy()), place.label


def centre_crop(image: Any, side: int) -> np.ndarray:
    """The shorter side resized to side / CENTRE, the centre ``side`` x ``side`` cut out: (side, side, 3) uint8."""
    from PIL import Image

    width, height = image.size
    short = max(side, round(side / CENTRE))
    scale = short / min(width, height)
    size = (max(side, round(width * scale)), max(side, round(height * scale)))
    image = image.resize(size, Image.Resampling.BILINEAR)
    left, top = (size[0] - side) // 2, (size[1] - side) // 2
    return np.asarray(image.crop((left, top, left + side, top + side)), dtype=np.uint8)


def _collate(items: list[Any]) -> tuple[torch.Tensor | None, torch.Tensor | None, list[str]]:
    good = [i for i in items if not isinstance(i, str)]
    bad = [i for i in items if isinstance(i, str)]
    if not good:
        return None, None, bad
    return torch.stack([g[0] for g in good]), torch.tensor([g[1] for g in good], dtype=torch.int64), bad


class FileHeldOut:
    """This rank's share of a held-out set on disk, evaluated whole at every call (``Epochs.evaluate``)."""

    def __init__(self, held: Index, rank: int, size: int, side: int, workers: int) -> None:
        mine = list(held.places[rank::size])
        self.loader = DataLoader(_Centred(mine, side), batch_size=EVAL_BATCH, num_workers=workers,
                                 collate_fn=_collate, persistent_workers=workers > 0)
        self.unreadable: list[str] = []
        self.unreadable_count = 0

    def evaluate(self, model: nn.Module) -> tuple[float, float, float]:
        """Correct answers, images scored and the summed loss over this rank's share."""
        correct = seen = loss = 0.0
        weights = next(model.parameters())
        for images, labels, bad in self.loader:
            self.unreadable_count += len(bad)
            self.unreadable += bad[:max(0, NAMED - len(self.unreadable))]
            if images is None:
                continue
            out = model(images.to(weights.device, weights.dtype))
            logits = (out[0] if isinstance(out, tuple) else out).float()
            labels = labels.to(weights.device)
            loss += float(F.cross_entropy(logits, labels, reduction="sum"))
            correct += float((logits.argmax(1) == labels).sum())
            seen += float(len(labels))
        return correct, seen, loss


def held_out_facts(held: Index, found: Overlap, evaluator: FileHeldOut | None = None) -> dict[str, Any]:
    """The summary's ``data.held_out``: where the held-out set is, its size, the overlap check, unreadable files."""
    out = {"dir": str(held.root), "layout": held.layout, "samples": len(held), "classes": held.classes,
           **found.facts()}
    if evaluator is not None:
        out.update(unreadable=evaluator.unreadable_count, unreadable_named=evaluator.unreadable)
    return out
