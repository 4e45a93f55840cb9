"""NVIDIA DALI as the loader of PyTorch's ImageNet CNNs (``--data files --loader dali``): its file or WebDataset
reader (each rank its shard: ``shard_id``, ``num_shards``), its JPEG decoder with a random crop (on the GPU where the
rank has one, ``mixed``; its CPU pipeline otherwise), resize, flip and normalise, ``--loader-workers`` CPU threads.
DALI reads and decodes in its own threads: a step's wait for its batch is counted as with PyTorch's loader, the bytes
as the dataset's mean bytes a sample; a file DALI cannot decode stops the run with DALI's own message.

DALI comes as NVIDIA's wheel (``pip install nvidia-dali-cuda120``; its CPU pipeline runs without a GPU)."""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch

from hvdbench.core.datasets import check_enough, listed
from hvdbench.core.errors import UsageError
from hvdbench.core.loaders import data_record
from .filedata import MEAN, STD


class DaliBatches:
    """One rank's batches from DALI; ``next`` as FileBatches' (the host batch, or already on the GPU)."""

    def __init__(self, kind: str, flags: argparse.Namespace, rank: int, size: int, device: torch.device,
                 classes: int | None = None) -> None:
        try:
            from nvidia.dali import fn, pipeline_def, types
            from nvidia.dali.plugin.pytorch import DALIGenericIterator
        except ImportError:
            raise UsageError("--loader dali needs NVIDIA DALI (pip install nvidia-dali-cuda120)") from None
        self.idx = listed(flags.data_dir, kind, flags.data_layout)
        if self.idx.layout == "tfrecord":
            raise UsageError("--loader dali reads ImageFolder or WebDataset here; TFRecords go through tf_imagenet")
        check_enough(self.idx, size, flags.batch_size)
        self.cache = self.idx.start(flags.data_cache)
        gpu, side = device.type == "cuda", flags.image_size or 224
        top = self.idx.root / "train" if (self.idx.root / "train").is_dir() else self.idx.root

        @pipeline_def(batch_size=flags.batch_size, num_threads=max(1, flags.loader_workers),
                      device_id=device.index or 0 if gpu else None, seed=flags.seed + rank)
        def pipe() -> Any:
            if self.idx.layout == "folder":
                jpegs, labels = fn.readers.file(file_root=str(top), shard_id=rank, num_shards=size,
                                                random_shuffle=True, name="Reader")
            else:
                jpegs = fn.readers.webdataset(paths=sorted({p.path for p in self.idx.places}), ext=["jpeg"],
                                              shard_id=rank, num_shards=size, random_shuffle=True, name="Reader")
                labels = fn.random.uniform(range=(0, max(self.idx.classes, 1)), dtype=types.INT64)
            images = fn.decoders.image_random_crop(jpegs, device="mixed" if gpu else "cpu", output_type=types.RGB)
            images = fn.resize(images, resize_x=side, resize_y=side)
            images = fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_layout="CHW", mean=MEAN.tolist(),
                                              std=STD.tolist(), mirror=fn.random.coin_flip())
            return images, labels

        self.iterator = DALIGenericIterator([pipe()], ["images", "labels"], reader_name="Reader", auto_reset=True)
        self.per_sample = self.idx.bytes / len(self.idx)
        self.read, self.wait_s = 0, 0.0

    def next(self) -> tuple[tuple[torch.Tensor, ...], dict[str, float]]:
        start = time.perf_counter()
        try:
            out = next(self.iterator)
        except StopIteration:  # an epoch ended: auto_reset begins the next
            out = next(self.iterator)
        waited = time.perf_counter() - start
        images, labels = out[0]["images"], out[0]["labels"].reshape(-1).long()
        self.read += int(images.shape[0])
        self.wait_s += waited
        return (images, labels), {"input_wait_s": waited, "bytes_read": self.per_sample * images.shape[0]}

    def facts(self) -> dict[str, Any]:
        """The summary's data record (core/loaders.data_record): DALI stops on a file it cannot decode, so none is
        counted corrupt."""
        return data_record(self.idx, "dali", read=self.read, nbytes=int(self.per_sample * self.read), corrupt=0,
                           named=(), wait_s=self.wait_s, cache=self.cache,
                           shard="DALI's reader: shard_id of num_shards")
