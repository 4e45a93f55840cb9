"""Real data for the PyTorch workloads (``--data files --data-dir DIR``): each rank reads its own shard of the
dataset's samples every epoch (core/datasets.py: no sample twice across ranks), DataLoader workers read and decode
them (JPEGs through Pillow's libjpeg-turbo, WAVs, sentences of token ids), augment (random-resized crop and flip to
the model's size), and the batches arrive pinned. How long each step waited for its batch, the bytes read and every
corrupt or vanished file are counted; a file that cannot be read is named, never silently skipped."""

from __future__ import annotations

import argparse
import io
import math
import time
import wave
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset

from hvdbench.core.datasets import Index, Place, check_enough, listed, read_bytes, read_companion, shard_ids
from hvdbench.core.errors import UsageError
from hvdbench.core.loaders import data_record
from .synthetic import BOS, CHARS, FIRST_WORD, FRAMES_PER_SECOND, FREQ_BINS, PAD

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32) * 255  # ImageNet's channel means and spreads
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32) * 255
NAMED = 5  # unreadable files named in a summary; the rest counted
Decode = Callable[[bytes, bytes, int, np.random.Generator], Any]


def random_resized_crop(image: Any, side: int, g: np.random.Generator) -> np.ndarray:
    """Inception's crop (8-100% of the area, aspect 3/4 to 4/3; the centre where ten draws fit none), resized to
    ``side`` x ``side``, flipped half the time: (side, side, 3) uint8."""
    from PIL import Image

    width, height = image.size
    box = (0, 0, width, height)
    for _ in range(10):
        area = width * height * g.uniform(0.08, 1.0)
        ratio = math.exp(g.uniform(math.log(3 / 4), math.log(4 / 3)))
        w, h = int(round(math.sqrt(area * ratio))), int(round(math.sqrt(area / ratio)))
        if 0 < w <= width and 0 < h <= height:
            left, top = int(g.integers(0, width - w + 1)), int(g.integers(0, height - h + 1))
            box = (left, top, left + w, top + h)
            break
    out = image.resize((side, side), Image.Resampling.BILINEAR, box=box)
    if g.random() < 0.5:
        out = out.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    return np.asarray(out, dtype=np.uint8)


def decode_image(side: int, classes: int | None = None) -> Decode:
    """JPEG bytes to a normalised (3, side, side) float tensor and its label; a sample without a label, or with one
    the model has no output for (``classes``), is damaged (counted and named as corrupt, never trained on as class 0
    nor failing the step mid-run with "Target out of bounds")."""
    def decode(data: bytes, _: bytes, label: int, g: np.random.Generator) -> tuple[torch.Tensor, int]:
        from PIL import Image

        if label < 0 or (classes is not None and label >= classes):
            raise ValueError(f"label {label} outside the model's classes 0..{(classes or 1) - 1}" if label >= 0 else
                             "no label")
        with Image.open(io.BytesIO(data)) as image:
            pixels = random_resized_crop(image.convert("RGB"), side, g)
        array = (pixels.astype(np.float32) - MEAN) / STD
        return torch.from_numpy(array.transpose(2, 0, 1).copy()), label
    return decode


def classifier_outputs(model: torch.nn.Module) -> int | None:
    """How many classes a model tells apart: its last linear layer's outputs (None without one)."""
    linear = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    return linear[-1].out_features if linear else None


def spectrogram(samples: np.ndarray) -> np.ndarray:
    """(frames, FREQ_BINS) log power at FRAMES_PER_SECOND frames, 20 ms windows (320 samples at 16 kHz)."""
    signal = torch.from_numpy(samples)
    hop = 16_000 // FRAMES_PER_SECOND
    spec = torch.stft(signal, n_fft=2 * (FREQ_BINS - 1), hop_length=hop, window=torch.hann_window(2 * (FREQ_BINS - 1)),
                      return_complex=True)
    return torch.log1p(spec.abs() ** 2).T.contiguous().numpy()


def decode_speech(data: bytes, companion: bytes, _: int, g: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """WAV bytes to a spectrogram; the transcript to character ids (1..CHARS-1)."""
    with wave.open(io.BytesIO(data)) as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1:
            raise ValueError("not 16-bit mono")
        samples = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768
    text = companion.decode("ascii", "replace").lower()
    chars = np.array([2 if c == "'" else 1 if c == " " else 3 + ord(c) - 97 for c in text
                      if c == " " or c == "'" or "a" <= c <= "z"] or [1], dtype=np.int64)
    return spectrogram(samples), np.clip(chars, 1, CHARS - 1)


@dataclass
class Tally:
    """What a rank's reading came to: samples and bytes read, corrupt or vanished files (the first few named), the
    epochs begun, the time steps waited for their batch."""

    read: int = 0
    bytes: int = 0
    corrupt: int = 0
    named: list[str] = field(default_factory=list)
    epochs: int = 0
    wait_s: float = 0.0

    def bad(self, place: Place, why: str) -> None:
        self.corrupt += 1
        if len(self.named) < NAMED:
            self.named.append(f"{place.name}: {why}"[:300])


class Samples(IterableDataset):
    """This rank's samples, epoch after epoch, split between the DataLoader's workers; each yielded batch carries
    what reading it took (bytes, corrupt files)."""

    def __init__(self, idx: Index, rank: int, size: int, batch: int, seed: int, decode: Decode,
                 collate: Callable[[list[Any]], tuple[torch.Tensor, ...]]) -> None:
        self.idx, self.rank, self.size, self.batch, self.seed = idx, rank, size, batch, seed
        self.decode, self.collate = decode, collate

    def __iter__(self) -> Iterator[tuple[tuple[torch.Tensor, ...], Tally]]:
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        g = np.random.default_rng([self.seed, self.rank, worker])
        epoch, pending, tally = 0, [], Tally()
        while True:
            ids = shard_ids(len(self.idx), self.rank, self.size, epoch, self.seed)[worker::workers]
            tally.epochs += 1
            for i in ids:
                place = self.idx.places[int(i)]
                try:
                    data, companion = read_bytes(place), read_companion(place)
                except OSError as exc:
                    tally.bad(place, f"unreadable ({exc.strerror or exc})")
                    continue
                try:
                    sample = self.decode(data, companion, place.label, g)
                except Exception as exc:  # noqa: BLE001 - a decoder's own error (Pillow's are OSErrors): corrupt
                    tally.bad(place, f"corrupt ({type(exc).__name__}: {str(exc)[:80]})")
                    continue
                tally.read += 1
                tally.bytes += place.size
                pending.append(sample)
                if len(pending) == self.batch:
                    yield self.collate(pending), tally
                    pending, tally = [], Tally()
            epoch += 1
            if tally.corrupt and tally.corrupt >= len(ids) and not tally.read:
                raise ValueError(f"every sample of this rank's shard failed to read: {'; '.join(tally.named)}")


def collate_images(samples: list[tuple[torch.Tensor, int]]) -> tuple[torch.Tensor, ...]:
    return torch.stack([s[0] for s in samples]), torch.tensor([s[1] for s in samples], dtype=torch.int64)


def collate_speech(samples: list[tuple[np.ndarray, np.ndarray]]) -> tuple[torch.Tensor, ...]:
    """As the synthetic speech batch: (batch, 1, FREQ_BINS, frames), frames, targets, target lengths, seconds."""
    frames = np.array([s[0].shape[0] for s in samples], dtype=np.int64)
    spect = np.zeros((len(samples), int(frames.max()), FREQ_BINS), dtype=np.float32)
    for i, (s, _) in enumerate(samples):
        spect[i, :s.shape[0]] = s
    from .synthetic import front_end_frames

    lengths = np.minimum(np.array([len(s[1]) for s in samples], dtype=np.int64), front_end_frames(frames))
    targets = np.zeros((len(samples), int(lengths.max())), dtype=np.int64)
    for i, (_, chars) in enumerate(samples):
        targets[i, :lengths[i]] = chars[:lengths[i]]
    return (torch.from_numpy(spect).transpose(1, 2).unsqueeze(1).contiguous(), torch.from_numpy(frames),
            torch.from_numpy(targets), torch.from_numpy(lengths),
            torch.from_numpy((frames / FRAMES_PER_SECOND).astype(np.float32)))


def decode_sentences(vocab: int, longest: int) -> Decode:
    """A source and a target line of token ids to id arrays, cut at ``longest`` tokens, ids beyond the model's
    vocabulary folded into it (the words stay words: ids FIRST_WORD and up)."""
    def ids(text: bytes) -> np.ndarray:
        tokens = np.array(text.split()[:longest], dtype=np.int64)
        if not len(tokens) or (tokens < 0).any():
            raise ValueError("no token ids" if not len(tokens) else "negative token ids")
        return np.where(tokens >= vocab, FIRST_WORD + tokens % max(vocab - FIRST_WORD, 1), tokens)

    def decode(data: bytes, companion: bytes, _: int, __: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return ids(data), ids(companion)
    return decode


def collate_sentences(samples: list[tuple[np.ndarray, np.ndarray]]) -> tuple[torch.Tensor, ...]:
    """As the synthetic translation batch: source ids and lengths, decoder inputs (BOS-shifted targets), targets,
    padded with PAD."""
    def padded(rows: list[np.ndarray], width: int, first: int | None = None) -> np.ndarray:
        out = np.full((len(rows), width), PAD, dtype=np.int64)
        for i, row in enumerate(rows):
            row = row if first is None else np.concatenate([[first], row[:-1]])
            out[i, :len(row)] = row
        return out

    src, tgt = [s[0] for s in samples], [s[1] for s in samples]
    width = max(len(t) for t in tgt)
    return tuple(torch.from_numpy(a) for a in (
        padded(src, max(len(s) for s in src)), np.array([len(s) for s in src], dtype=np.int64),
        padded(tgt, width, BOS), padded(tgt, width)))


Reader = Callable[[argparse.Namespace, "int | None"], tuple[Decode, Callable[[list[Any]], tuple[torch.Tensor, ...]]]]
READERS: dict[str, Reader] = {
    "imagenet": lambda f, classes: (decode_image(f.image_size or 224, classes), collate_images),
    "speech": lambda f, _: (decode_speech, collate_speech),
    "translation": lambda f, _: (decode_sentences(f.vocab, f.src_max_len), collate_sentences),
}


class FileBatches:
    """Batches read from files for one rank (``--data files``), pinned on the way where there is a GPU; ``next``
    returns the host batch and what waiting for it and reading it took."""

    def __init__(self, kind: str, flags: argparse.Namespace, rank: int, size: int, device: torch.device,
                 classes: int | None = None) -> None:
        pin = device.type == "cuda"
        self.idx = listed(flags.data_dir, kind, flags.data_layout)
        check_enough(self.idx, size, flags.batch_size)
        if kind == "imagenet" and self.idx.layout == "folder" and classes is not None and self.idx.classes > classes:
            raise UsageError(f"--data-dir {flags.data_dir}: {self.idx.classes:,} class folders, and the model has "
                             f"{classes:,} outputs: a label past them would fail a step mid-run; give a dataset of "
                             f"at most {classes:,} classes")
        self.cache = self.idx.start(flags.data_cache)
        decode, collate = READERS[kind](flags, classes)
        dataset = Samples(self.idx, rank, size, flags.batch_size, flags.seed, decode, collate)
        self.loader = iter(DataLoader(dataset, batch_size=None, num_workers=flags.loader_workers, pin_memory=pin,
                                      persistent_workers=flags.loader_workers > 0,
                                      prefetch_factor=4 if flags.loader_workers > 0 else None))
        self.total = Tally()

    def next(self) -> tuple[tuple[torch.Tensor, ...], dict[str, float]]:
        """The next batch, and the seconds this step waited for it, the bytes and files read for it."""
        start = time.perf_counter()
        batch, tally = next(self.loader)
        waited = time.perf_counter() - start
        self.total.read += tally.read
        self.total.bytes += tally.bytes
        self.total.corrupt += tally.corrupt
        self.total.named += tally.named[:max(0, NAMED - len(self.total.named))]
        self.total.epochs = max(self.total.epochs, tally.epochs)
        self.total.wait_s += waited
        return batch, {"input_wait_s": waited, "bytes_read": float(tally.bytes)}

    def facts(self) -> dict[str, Any]:
        """The summary's data fields: the dataset, this rank's shard and what reading it came to."""
        t = self.total
        return data_record(self.idx, "torch", read=t.read, nbytes=t.bytes, corrupt=t.corrupt, named=t.named,
                           wait_s=t.wait_s, cache=self.cache,
                           shard="every size-th id of a permutation seeded by the epoch, from this rank")
