"""The MLP (default 1024 -> 4096 -> 4096 -> 10) in Keras on synthetic vectors.

    horovodrun -np 2 -H localhost:2 python suite/tf_mlp.py --batch-size 256
"""

from __future__ import annotations

import sys

import keras

from hvdbench.suite.models.keras_models import mlp
from hvdbench.suite.tfharness import KerasWorkload, TFBuildContext, main


def build(ctx: TFBuildContext) -> KerasWorkload:
    """Model, synthetic vectors and labels, cross-entropy."""
    f = ctx.flags
    ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    return KerasWorkload(
        model=mlp(f.mlp_input, f.mlp_widths, f.mlp_classes),
        make_batch=lambda g: (g.standard_normal((f.batch_size, f.mlp_input), dtype="float32"),
                              g.integers(0, f.mlp_classes, f.batch_size, dtype="int32")),
        loss=lambda model, b: ce(b[1], model(b[0], training=True)),
    )


if __name__ == "__main__":
    sys.exit(main("tf_mlp", build))
