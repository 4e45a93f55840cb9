"""DeepSpeech2-style recognition in Keras with tf.nn.ctc_loss on synthetic utterances of varying length
(the same length distributions and counts as suite/speech.py: utterances/s, audio seconds/s beside it).

    horovodrun -np 8 -H localhost:8 python suite/tf_speech.py --batch-size 16
"""

from __future__ import annotations

import sys

import numpy as np
import tensorflow as tf

from hvdbench.suite.models.keras_models import CHARS, FREQ_BINS, deepspeech2
from hvdbench.suite.tfharness import KerasWorkload, TFBuildContext, main

FRAMES_PER_SECOND = 100
CHARS_PER_SECOND = 14
BUCKET_POOL = 16


def draw_seconds(dist: tuple[str, tuple[float, ...]], n: int, g: np.random.Generator) -> np.ndarray:
    """n utterance lengths in seconds."""
    kind, p = dist
    if kind == "fixed":
        return np.full(n, p[0])
    if kind == "uniform":
        return g.uniform(p[0], p[1], n)
    return np.clip(g.normal(p[0], p[1], n), p[2], p[3])


def make_batch(batch: int, dist: tuple[str, tuple[float, ...]], bucketing: bool, g: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Spectrograms (zero past each length), frame counts, character targets and their lengths, seconds."""
    if bucketing:
        pool = np.sort(draw_seconds(dist, batch * BUCKET_POOL, g))
        start = int(g.integers(0, len(pool) - batch + 1))
        seconds = pool[start:start + batch]
    else:
        seconds = draw_seconds(dist, batch, g)
    frames = np.maximum(np.round(seconds * FRAMES_PER_SECOND), 20).astype("int32")
    spect = g.standard_normal((batch, int(frames.max()), FREQ_BINS, 1), dtype="float32")
    spect *= (np.arange(spect.shape[1])[None, :] < frames[:, None])[:, :, None, None]
    out_steps = (frames + 2 * 5 - 11) // 2 + 1
    target_lengths = np.minimum(np.maximum(np.round(seconds * CHARS_PER_SECOND), 1), out_steps).astype("int32")
    targets = g.integers(1, CHARS, (batch, int(target_lengths.max())), dtype="int32")
    return spect, frames, targets, target_lengths, seconds.astype("float32")


def loss(model: tf.keras.Model, b: tuple[tf.Tensor, ...]) -> tf.Tensor:
    """CTC over the characters."""
    logits, lengths = model([b[0], b[1]], training=True)
    return tf.reduce_mean(tf.nn.ctc_loss(labels=b[2], logits=tf.cast(logits, tf.float32), label_length=b[3],
                                         logit_length=lengths, logits_time_major=False, blank_index=0))


def build(ctx: TFBuildContext) -> KerasWorkload:
    f = ctx.flags
    return KerasWorkload(
        model=deepspeech2(f.rnn_type, f.rnn_impl, f.rnn_layers, f.rnn_hidden),
        make_batch=lambda g: make_batch(f.batch_size, f.utt_seconds, f.bucketing, g),
        loss=loss,
        count=lambda b: {"samples": float(b[0].shape[0]), "audio_s": float(b[4].sum())},
        distinct_batches=8,
    )


if __name__ == "__main__":
    sys.exit(main("tf_speech", build))
