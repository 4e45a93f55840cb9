"""Datasets made here, shaped like the real ones, with no download (``hvdbench data make``): what the file system
and the decoders see is what a cluster's copy would give them, while the content is noise of the right size.

- imagenet: JPEGs whose pixel sizes and byte sizes follow ILSVRC-2012's training set: 1,281,167 images in 1,000
  classes, a 147,897,477,120-byte archive (115 kB a file on average) and a mean of about 469 x 387 pixels, most
  500 x 375 or 375 x 500 (IMAGENET below); content a smooth random field with grain whose strength varies from
  image to image, as photographs' compressibility does.
- speech: 16 kHz 16-bit mono WAV utterances with LibriSpeech's training lengths (mean about 12.7 s, 1 to 35 s) and a
  transcript of about 2.7 words a second beside each.
- translation: sentence pairs of subword token ids with WMT14 English-German's lengths (about 28 tokens a sentence
  on average, up to 250), each target 0.8 to 1.2 times its source.

Layouts: ``folder`` (ImageFolder ``train/<class>/``; files beside their companions), ``webdataset`` (``.tar`` shards
of SHARD samples), ``tfrecord`` (imagenet only, ``tf.train.Example`` with ``image/encoded`` and
``image/class/label``: needs TensorFlow to write). A manifest (``hvdbench-dataset.json``) says what was made."""

from __future__ import annotations

import hashlib
import io
import shutil
import tarfile
import tempfile
import wave
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from hvdbench.core.datasets import FORMATS, KINDS, MANIFEST, write_manifest
from hvdbench.core.errors import UsageError
from hvdbench.core.idx import Split, train_and_held_out

IMAGENET = {"images": 1_281_167, "classes": 1000, "archive_bytes": 147_897_477_120, "mean_width": 469,
            "mean_height": 387}  # ILSVRC-2012 train, as published and commonly cited
MEAN_FILE_BYTES = IMAGENET["archive_bytes"] / IMAGENET["images"]  # about 115 kB
SAMPLE_RATE = 16_000
SPEECH_SECONDS = (12.7, 0.45, 1.0, 35.0)  # log-normal mean, its spread, and the clip
WORDS_PER_SECOND = 2.7
TOKENS = (28.0, 0.55, 1, 250)  # mean subword tokens a sentence, log spread, clip
VOCABULARY = 32_000
SHARD = 256  # samples a webdataset shard
MOST_SAMPLES = 2_000_000


def image_size(g: np.random.Generator) -> tuple[int, int]:
    """(width, height) as ILSVRC-2012's training images come: most 500 x 375 or 333 landscape, 375 x 500 portrait,
    the rest spread around 400 x 350."""
    pick = g.random()
    if pick < 0.60:
        return 500, 375
    if pick < 0.75:
        return 500, 333
    if pick < 0.90:
        return 375, 500
    side = float(np.clip(g.lognormal(np.log(400.0), 0.35), 80.0, 1600.0))
    return int(side), int(np.clip(side * g.uniform(0.6, 1.1), 60.0, 1600.0))


def jpeg(g: np.random.Generator) -> bytes:
    """One JPEG: a smooth random field with grain, its strength drawn per image."""
    from PIL import Image

    width, height = image_size(g)
    low = g.uniform(0, 255, (max(2, height // 32), max(2, width // 32), 3)).astype(np.uint8)
    base = np.asarray(Image.fromarray(low).resize((width, height), Image.Resampling.BICUBIC), dtype=np.float32)
    base += g.normal(0.0, float(np.clip(g.lognormal(np.log(21.0), 0.35), 4.0, 48.0)), base.shape).astype(np.float32)
    out = io.BytesIO()
    Image.fromarray(np.clip(base, 0, 255).astype(np.uint8)).save(out, "JPEG", quality=92)
    return out.getvalue()


def utterance(g: np.random.Generator) -> tuple[bytes, bytes]:
    """One WAV utterance and its transcript."""
    mean, spread, least, most = SPEECH_SECONDS
    seconds = float(np.clip(g.lognormal(np.log(mean) - spread ** 2 / 2, spread), least, most))
    n = int(seconds * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    signal = 0.2 * np.sin(2 * np.pi * g.uniform(100, 300) * t) * (1 + np.sin(2 * np.pi * 3 * t)) + \
        0.05 * g.standard_normal(n)
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes((np.clip(signal, -1, 1) * 32767).astype("<i2").tobytes())
    words = max(1, int(round(seconds * WORDS_PER_SECOND)))
    letters = "abcdefghijklmnopqrstuvwxyz"
    text = " ".join("".join(letters[i] for i in g.integers(0, 26, int(g.integers(2, 9)))) for _ in range(words))
    return out.getvalue(), text.encode()


def sentence_pair(g: np.random.Generator) -> tuple[bytes, bytes]:
    """One source sentence and its target as token ids (3 and up: 0-2 are padding, begin and end)."""
    mean, spread, least, most = TOKENS
    length = int(np.clip(round(g.lognormal(np.log(mean) - spread ** 2 / 2, spread)), least, most))
    target = int(np.clip(round(length * g.uniform(0.8, 1.2)), least, most))
    def ids(k: int) -> bytes:
        return " ".join(map(str, g.integers(3, VOCABULARY, k))).encode()
    return ids(length), ids(target)


def _samples(kind: str, samples: int, seed: int, classes: int) -> Iterator[tuple[str, bytes, bytes, int]]:
    """(key, payload, companion, label) of every sample, from one seed."""
    g = np.random.default_rng(seed)
    for i in range(samples):
        if kind == "imagenet":
            yield f"{i:08d}", jpeg(g), b"", int(g.integers(0, classes))
        elif kind == "speech":
            audio, text = utterance(g)
            yield f"{i:08d}", audio, text, -1
        else:
            source, target = sentence_pair(g)
            yield f"{i:08d}", source, target, -1


SUFFIX = {"imagenet": (".JPEG", ".cls"), "speech": (".wav", ".txt"), "translation": (".src", ".tgt")}


def make_dataset(kind: str, to: Path, layout: str, samples: int, seed: int,
                 report: Callable[[str], None] = lambda line: None) -> Path:
    """Make ``samples`` of ``kind`` under ``to`` in ``layout``; the manifest's path. ``to`` must be new or empty. The
    dataset is made in a folder beside ``to`` and put in its place whole: a full disk, or a maker stopped, leaves
    nothing a run could take for a dataset (a UsageError of one line says what failed)."""
    if kind not in KINDS or layout not in FORMATS:
        raise UsageError(f"data make {kind} --format {layout}: kinds {', '.join(KINDS)}; formats {', '.join(FORMATS)}")
    if not 1 <= samples <= MOST_SAMPLES:
        raise UsageError(f"--samples {samples}: from 1 to {MOST_SAMPLES:,}")
    if layout == "tfrecord" and kind != "imagenet":
        raise UsageError("--format tfrecord: imagenet only (ImageNet's own TFRecord layout)")
    _staged(Path(to), lambda staging: _make(kind, staging, layout, samples, seed))
    report(f"made {samples} {kind} sample(s) as {layout} in {to}")
    return to / MANIFEST


def _staged(to: Path, write: Callable[[Path], object]) -> None:
    """``write`` into a folder made beside ``to`` (new or empty), put in its place whole once written: a full disk,
    or a writer stopped, leaves nothing a run could take for a dataset (a UsageError of one line says what failed)."""
    if to.exists() and (not to.is_dir() or any(to.iterdir())):
        raise UsageError(f"--to {to}: exists and is not empty; give a new folder")
    try:
        to.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{to.name}.making-", dir=to.parent))
    except OSError as exc:
        raise UsageError(f"--to {to}: cannot make a folder beside it ({exc.strerror or exc})") from None
    try:
        write(staging)
        if to.exists():
            to.rmdir()
        staging.rename(to)
    except OSError as exc:
        raise UsageError(f"--to {to}: {exc.strerror or exc} while making it; nothing was left there") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


FASHION_CLASSES = ("t-shirt-top", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag",
                   "ankle-boot")  # Fashion-MNIST's labels 0-9, in order


def export_fashion(idx_dir: Path, to: Path, layout: str, report: Callable[[str], None] = lambda line: None) -> Path:
    """Fashion-MNIST as read from ``idx_dir`` (core/idx.py, checked: no held-out image a training one) written under
    ``to`` for the file loaders: ``train/`` and ``val/``, each an ImageFolder (``<label>-<name>/<index>.png``, so
    the folders sort in label order) or WebDataset shards (``<index>.png`` + ``<index>.cls``), each with its
    manifest. PNG keeps every pixel as shipped. Returns ``to``."""
    if layout not in ("folder", "webdataset"):
        raise UsageError(f"--format {layout}: fashion-mnist is written as folder or webdataset")
    splits = train_and_held_out(Path(idx_dir))
    _staged(Path(to), lambda staging: [_fashion_split(staging / name, split, layout)
                                       for name, split in zip(("train", "val"), splits)])
    report(f"wrote Fashion-MNIST ({len(splits[0]):,} training and {len(splits[1]):,} held-out images) as {layout} in "
           f"{to}: --data files --data-dir {Path(to) / 'train'} --eval-dir {Path(to) / 'val'}")
    return Path(to)


def _fashion_split(to: Path, split: Split, layout: str) -> Path:
    """One split's images as PNGs in ``layout`` under ``to``, and its manifest."""
    from PIL import Image

    digest = hashlib.sha256()

    def made() -> Iterator[tuple[str, bytes, bytes, int]]:
        for i, (pixels, label) in enumerate(zip(split.images, split.labels)):
            out = io.BytesIO()
            Image.fromarray(pixels).save(out, "PNG")
            yield f"{i:05d}", out.getvalue(), b"", int(label)

    to.mkdir(parents=True)
    if layout == "folder":
        for key, data, _, label in made():
            folder = to / f"{label}-{FASHION_CLASSES[label]}"
            folder.mkdir(exist_ok=True)
            (folder / f"{key}.png").write_bytes(data)
            digest.update(data)
    else:
        _webdataset(to, "imagenet", made(), digest, payload=".png")
    return write_manifest(to, "imagenet", layout, len(split), digest.hexdigest(),
                          {"classes": len(FASHION_CLASSES), "shaped_like": "Fashion-MNIST, as shipped",
                           "source": split.source, "source_sha256": split.sha256})


def _make(kind: str, to: Path, layout: str, samples: int, seed: int) -> Path:
    """The samples and their manifest written under ``to``."""
    classes = min(IMAGENET["classes"], max(2, samples // 8))
    digest = hashlib.sha256()
    made = _samples(kind, samples, seed, classes)
    write = {"folder": _folder, "webdataset": _webdataset, "tfrecord": _tfrecord}[layout]
    write(to, kind, made, digest)
    extra: dict[str, object] = {"seed": seed, "classes": classes if kind == "imagenet" else None,
             "shaped_like": "ILSVRC-2012 train" if kind == "imagenet" else
             "LibriSpeech train" if kind == "speech" else "WMT14 en-de"}
    return write_manifest(to, kind, layout, samples, digest.hexdigest(), extra)


def _folder(to: Path, kind: str, made: Iterator[tuple[str, bytes, bytes, int]], digest: "hashlib._Hash") -> None:
    payload, beside = SUFFIX[kind]
    for key, data, companion, label in made:
        folder = to / "train" / f"n{label:08d}" if kind == "imagenet" else to / "train"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{key}{payload}").write_bytes(data)
        if companion:
            (folder / f"{key}{beside}").write_bytes(companion)
        digest.update(data + companion)


def _webdataset(to: Path, kind: str, made: Iterator[tuple[str, bytes, bytes, int]],
                digest: "hashlib._Hash", payload: str | None = None) -> None:
    payload, beside = payload or SUFFIX[kind][0], SUFFIX[kind][1]
    tar: tarfile.TarFile | None = None
    for i, (key, data, companion, label) in enumerate(made):
        if i % SHARD == 0:
            if tar is not None:
                tar.close()
            tar = tarfile.open(to / f"shard-{i // SHARD:06d}.tar", "w")
        assert tar is not None
        extra = str(label).encode() if kind == "imagenet" else companion
        for name, content in ((f"{key}{payload.lower()}", data), (f"{key}{beside}", extra)):
            info = tarfile.TarInfo(name)
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
        digest.update(data + extra)
    if tar is not None:
        tar.close()


def _tfrecord(to: Path, kind: str, made: Iterator[tuple[str, bytes, bytes, int]], digest: "hashlib._Hash") -> None:
    try:
        import tensorflow as tf
    except ImportError:
        raise UsageError("--format tfrecord needs TensorFlow to write the records (pip install tensorflow)") from None
    writers: list[Any] = []  # one a shard, the last open
    for i, (_, data, _, label) in enumerate(made):
        if i % SHARD == 0:
            if writers:
                writers[-1].close()
            writers.append(tf.io.TFRecordWriter(str(to / f"train-{i // SHARD:05d}.tfrecord")))
        feature = {"image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[data])),
                   "image/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=[label]))}
        writers[-1].write(tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString())
        digest.update(data)
    if writers:
        writers[-1].close()


def main(argv: list[str] | None = None) -> int:
    """``python -m hvdbench.suite.datamake KIND --to DIR --format F --samples N --seed S`` (what ``hvdbench data make``
    runs) or ``... fashion-mnist --to DIR --format F [--idx-dir DIR]`` (``hvdbench data export``): the dataset, a line
    saying what was made, and its manifest's figures; a problem is one line, status 2."""
    import argparse
    import json
    import sys

    parser = argparse.ArgumentParser(prog="hvdbench data")
    parser.add_argument("kind", choices=(*KINDS, "fashion-mnist"))
    parser.add_argument("--to", type=Path, required=True)
    parser.add_argument("--format", choices=FORMATS, default="folder")
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--idx-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    try:
        if args.kind == "fashion-mnist":
            from hvdbench.core.idx import DEBIAN_DIR

            export_fashion(args.idx_dir or DEBIAN_DIR, args.to, args.format, report=print)
            return 0
        manifest = make_dataset(args.kind, args.to, args.format, args.samples, args.seed, report=print)
    except UsageError as exc:
        print(f"hvdbench: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a maker's own failure: one line, never a cut traceback
        print(f"hvdbench: error: data {args.kind} failed: {type(exc).__name__}: {str(exc)[:300]}", file=sys.stderr)
        return 1
    facts = json.loads(manifest.read_text(encoding="utf-8"))
    print(f"{facts['samples']} samples, {facts['files']} files, {facts['bytes'] / 1e6:,.1f} MB; manifest {manifest}")
    return 0


__all__ = ["IMAGENET", "MANIFEST", "export_fashion", "make_dataset", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
