"""Real data for TensorFlow's ImageNet CNNs (``--data files``): a tf.data pipeline reading ImageFolder files or
TFRecord shards (``image/encoded``, ``image/class/label``), ``tf.io.decode_jpeg``, a random-resized crop and flip to
the model's size, batched and prefetched, ``--loader-workers`` parallel calls. Each rank reads its own samples (files:
core/datasets.py's shard of each epoch; TFRecords: every size-th record from this rank's); each step's wait for its
batch and the bytes it read are counted, and files that fail to decode are counted and named."""

from __future__ import annotations

import argparse
import itertools
import time
from typing import Any, Iterator

import numpy as np
import tensorflow as tf

from hvdbench.core.datasets import check_enough, listed, shard_ids
from hvdbench.core.loaders import data_record

MEAN = tf.constant([0.485, 0.456, 0.406]) * 255.0
STD = tf.constant([0.229, 0.224, 0.225]) * 255.0


def _augment(raw: tf.Tensor, label: tf.Tensor, side: int, channels_first: bool) -> tuple[tf.Tensor, ...]:
    """Decode, crop 8-100% of the area at aspect 3/4-4/3, resize, flip, normalise; the bytes read; 1 where the
    bytes were no image (a zero image stands in, counted)."""
    ok = tf.image.is_jpeg(raw) | tf.strings.regex_full_match(tf.strings.substr(raw, 0, 4), "\x89PNG")
    image = tf.cond(ok, lambda: tf.io.decode_image(raw, channels=3, expand_animations=False),
                    lambda: tf.zeros((side, side, 3), tf.uint8))
    begin, size, _ = tf.image.sample_distorted_bounding_box(
        tf.shape(image), tf.zeros((1, 0, 4)), area_range=(0.08, 1.0), aspect_ratio_range=(3 / 4, 4 / 3),
        max_attempts=10, use_image_if_no_bounding_boxes=True)
    crop = tf.image.resize(tf.slice(image, begin, size), (side, side))
    crop = (tf.image.random_flip_left_right(crop) - MEAN) / STD
    if channels_first:
        crop = tf.transpose(crop, (2, 0, 1))
    return crop, tf.cast(label, tf.int32), tf.cast(tf.strings.length(raw), tf.float64), tf.cast(~ok, tf.float64)


def _parse(record: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    example = tf.io.parse_single_example(record, {"image/encoded": tf.io.FixedLenFeature([], tf.string),
                                                  "image/class/label": tf.io.FixedLenFeature([], tf.int64)})
    return example["image/encoded"], example["image/class/label"]


class TFFileFeed:
    """One rank's batches from files through tf.data; ``next`` returns the batch on the device and what reading it
    took (the step's wait for it, its bytes, samples that were no image)."""

    def __init__(self, flags: argparse.Namespace, rank: int, size: int, side: int, channels_first: bool,
                 device: str) -> None:
        self.idx = listed(flags.data_dir, "imagenet", flags.data_layout)
        workers = max(1, flags.loader_workers)
        self.cache = self.idx.start(flags.data_cache)
        if self.idx.layout == "tfrecord":
            records = tf.data.TFRecordDataset([p.path for p in self.idx.places]).repeat()
            pairs = records.shard(size, rank).map(_parse, num_parallel_calls=workers)
        else:
            check_enough(self.idx, size, flags.batch_size)
            places, seed = self.idx.places, flags.seed

            def files() -> Iterator[tuple[bytes, int]]:
                for epoch in itertools.count():
                    for i in shard_ids(len(places), rank, size, epoch, seed):
                        yield places[int(i)].path.encode(), places[int(i)].label
            pairs = tf.data.Dataset.from_generator(
                files, output_signature=(tf.TensorSpec((), tf.string), tf.TensorSpec((), tf.int64)))
            pairs = pairs.map(lambda path, label: (tf.io.read_file(path), label), num_parallel_calls=workers)
        data = pairs.map(lambda raw, label: _augment(raw, label, side, channels_first), num_parallel_calls=workers)
        data = data.batch(flags.batch_size, drop_remainder=True)
        if "GPU" in device:
            data = data.apply(tf.data.experimental.prefetch_to_device(device, buffer_size=2))
        self._stream = iter(data.prefetch(tf.data.AUTOTUNE))
        self.read = self.bytes = self.corrupt = 0
        self.wait_s = 0.0

    def next(self) -> tuple[tuple[tf.Tensor, ...], dict[str, float]]:
        start = time.perf_counter()
        images, labels, nbytes, bad = next(self._stream)
        waited = time.perf_counter() - start
        read = float(np.sum(nbytes.numpy()))
        self.read += int(images.shape[0])
        self.bytes += int(read)
        self.corrupt += int(np.sum(bad.numpy()))
        self.wait_s += waited
        return (images, labels), {"samples": float(images.shape[0]), "input_wait_s": waited, "bytes_read": read}

    def facts(self) -> dict[str, Any]:
        """The summary's data fields (tf.data names no file it could not decode: it counts them)."""
        return data_record(self.idx, "tfdata", read=self.read, nbytes=self.bytes, corrupt=self.corrupt, named=(),
                           wait_s=self.wait_s, cache=self.cache, counted=self.idx.layout != "tfrecord",
                           shard="tf.data: files, every size-th id of each epoch's permutation from this rank; "
                                 "TFRecords, every size-th record from this rank")
