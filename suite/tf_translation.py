"""The LSTM sequence-to-sequence model in Keras on synthetic sentence pairs; words/s counts target
tokens, not padding (the batches of ``suite/synthetic.py``, as ``translation``).

    horovodrun -np 8 -H localhost:8 python suite/tf_translation.py --batch-size 128 --src-max-len 50
"""

from __future__ import annotations

import sys

import numpy as np
import tensorflow as tf

from hvdbench.suite.models.keras_models import seq2seq
from hvdbench.suite.synthetic import PAD, translation_batch, translation_counts
from hvdbench.suite.tfharness import KerasWorkload, TFBuildContext, main


def make_batch(batch: int, max_len: int, vocab: int, g: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Source tokens, decoder inputs (BOS-shifted targets) and targets (int32), padded with PAD."""
    src, _, tgt_in, tgt = translation_batch(batch, max_len, vocab, g)
    return src.astype("int32"), tgt_in.astype("int32"), tgt.astype("int32")


def loss(model: tf.keras.Model, b: tuple[tf.Tensor, ...]) -> tf.Tensor:
    """Cross-entropy per target token, padding excluded."""
    logits = model([b[0], b[1]], training=True)
    per_token = tf.keras.losses.sparse_categorical_crossentropy(b[2], logits, from_logits=True)
    mask = tf.cast(tf.not_equal(b[2], PAD), per_token.dtype)
    return tf.reduce_sum(per_token * mask) / tf.reduce_sum(mask)


def build(ctx: TFBuildContext) -> KerasWorkload:
    f = ctx.flags
    return KerasWorkload(
        model=seq2seq(f.vocab, f.hidden, f.layers, f.attention, f.rnn_impl),
        make_batch=lambda g: make_batch(f.batch_size, f.src_max_len, f.vocab, g),
        loss=loss, count=lambda b: translation_counts(b[2]), distinct_batches=8,
    )


if __name__ == "__main__":
    sys.exit(main("tf_translation", build))
