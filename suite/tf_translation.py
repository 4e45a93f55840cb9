"""The LSTM sequence-to-sequence model in Keras on synthetic sentence pairs; words/s counts target
tokens, not padding (the same sentence lengths as suite/translation.py).

    horovodrun -np 8 -H localhost:8 python suite/tf_translation.py --batch-size 128 --src-max-len 50
"""

from __future__ import annotations

import sys

import numpy as np
import tensorflow as tf

from hvdbench.suite.models.keras_models import BOS, PAD, seq2seq
from hvdbench.suite.tfharness import KerasWorkload, TFBuildContext, main

FIRST_WORD = 3  # ids 0..2: padding, begin, end


def make_batch(batch: int, max_len: int, vocab: int, g: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Source tokens, decoder inputs (BOS-shifted targets) and targets, padded with PAD."""
    src_len = g.integers(max(1, max_len // 4), max_len + 1, batch)
    tgt_len = np.clip(np.round(src_len * (0.8 + 0.4 * g.random(batch))), 1, max_len).astype(int)

    def tokens(lengths: np.ndarray) -> np.ndarray:
        ids = g.integers(FIRST_WORD, vocab, (batch, int(lengths.max())), dtype="int32")
        return np.where(np.arange(ids.shape[1])[None, :] >= lengths[:, None], PAD, ids).astype("int32")

    src, tgt = tokens(src_len), tokens(tgt_len)
    tgt_in = np.concatenate([np.full((batch, 1), BOS, dtype="int32"), tgt[:, :-1]], axis=1)
    tgt_in = np.where(np.arange(tgt.shape[1])[None, :] >= tgt_len[:, None], PAD, tgt_in).astype("int32")
    return src, tgt_in, tgt


def loss(model: tf.keras.Model, b: tuple[tf.Tensor, ...]) -> tf.Tensor:
    """Cross-entropy per target token, padding excluded."""
    logits = model([b[0], b[1]], training=True)
    per_token = tf.keras.losses.sparse_categorical_crossentropy(b[2], logits, from_logits=True)
    mask = tf.cast(tf.not_equal(b[2], PAD), per_token.dtype)
    return tf.reduce_sum(per_token * mask) / tf.reduce_sum(mask)


def build(ctx: TFBuildContext) -> KerasWorkload:
    f = ctx.flags
    return KerasWorkload(
        model=seq2seq(f.vocab, f.hidden, f.layers, f.attention),
        make_batch=lambda g: make_batch(f.batch_size, f.src_max_len, f.vocab, g),
        loss=loss,
        count=lambda b: {"samples": float((b[2] != PAD).sum()), "sentences": float(b[2].shape[0])},
        distinct_batches=8,
    )


if __name__ == "__main__":
    sys.exit(main("tf_translation", build))
