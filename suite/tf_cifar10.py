"""CIFAR-10 ResNets (ResNet-20 ... ResNet-110) in Keras on synthetic 32x32x3 images.

    horovodrun -np 2 -H localhost:2 python suite/tf_cifar10.py --model resnet20 --batch-size 32 --steps 20
"""

from __future__ import annotations

import sys

import keras

from hvdbench.suite.models.keras_models import cifar_resnet
from hvdbench.suite.tfharness import KerasWorkload, TFBuildContext, main


def build(ctx: TFBuildContext) -> KerasWorkload:
    """Model, synthetic images and labels, cross-entropy."""
    batch, shape = ctx.flags.batch_size, ctx.image_shape(32)
    ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    return KerasWorkload(
        model=cifar_resnet(int(ctx.flags.model.removeprefix("resnet")), shape),
        make_batch=lambda g: (g.standard_normal((batch, *shape), dtype="float32"),
                              g.integers(0, 10, batch, dtype="int32")),
        loss=lambda model, b: ce(b[1], model(b[0], training=True)),
    )


if __name__ == "__main__":
    sys.exit(main("tf_cifar10", build))
