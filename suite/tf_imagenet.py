"""keras.applications ImageNet CNNs (ResNet-50, Inception v3, VGG-16; weights=None, with top) on
synthetic images.

    horovodrun -np 8 -H localhost:8 python suite/tf_imagenet.py --model resnet50 --batch-size 64 --xla
"""

from __future__ import annotations

import sys
from typing import Any

import keras

from hvdbench.suite.models.keras_models import imagenet_cnn
from hvdbench.suite.tfharness import KerasWorkload, TFBuildContext, main


def build(ctx: TFBuildContext) -> KerasWorkload:
    """Model, synthetic images and labels, cross-entropy on logits."""
    f = ctx.flags
    shape = ctx.image_shape(f.image_size or (299 if f.model == "inception_v3" else 224))
    ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    return KerasWorkload(
        model=imagenet_cnn(f.model, shape),
        make_batch=lambda g: (g.standard_normal((f.batch_size, *shape), dtype="float32"),
                              g.integers(0, 1000, f.batch_size, dtype="int32")),
        loss=lambda model, b: ce(b[1], model(b[0], training=True)),
        files=lambda flags, rank, size, device: _files(flags, rank, size, device, shape),
    )


def _files(flags: Any, rank: int, size: int, device: str, shape: tuple[int, ...]) -> Any:
    """The tf.data feed of --data files (ImageFolder or TFRecord shards)."""
    from hvdbench.suite.tffiledata import TFFileFeed

    return TFFileFeed(flags, rank, size, max(shape), shape[0] == 3, device)


if __name__ == "__main__":
    sys.exit(main("tf_imagenet", build))
