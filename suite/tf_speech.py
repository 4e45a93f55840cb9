"""DeepSpeech2-style recognition in Keras with tf.nn.ctc_loss on synthetic utterances of varying length
(the batches of ``suite/synthetic.py``, as ``speech``: utterances/s, audio seconds/s beside it).

    horovodrun -np 8 -H localhost:8 python suite/tf_speech.py --batch-size 16
"""

from __future__ import annotations

import sys

import numpy as np
import tensorflow as tf

from hvdbench.suite.models.keras_models import deepspeech2
from hvdbench.suite.synthetic import speech_batch, speech_counts
from hvdbench.suite.tfharness import KerasWorkload, TFBuildContext, main


def make_batch(batch: int, dist: tuple[str, tuple[float, ...]], bucketing: bool,
               g: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Spectrograms (batch, frames, 161, 1), frame counts, character targets and their lengths (int32), seconds."""
    spect, frames, targets, target_lengths, seconds = speech_batch(batch, dist, bucketing, g)
    return (spect[..., None], frames.astype("int32"), targets.astype("int32"), target_lengths.astype("int32"),
            seconds)


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
        loss=loss, count=speech_counts, distinct_batches=8,
    )


if __name__ == "__main__":
    sys.exit(main("tf_speech", build))
