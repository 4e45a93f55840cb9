"""Synthetic speech and translation batches in NumPy, and their constants: one source for the PyTorch and
the TensorFlow workloads (each framework only changes layout and integer width).

Speech: utterance lengths from a distribution (default like LibriSpeech's, 2-35 s) at 100 frames/s,
161 frequency bins, zero past each utterance's length, about 14 characters per second of 29 (CTC blank,
space, apostrophe, a-z). Translation: source lengths uniform in [max_len/4, max_len], each target
0.8-1.2 x its source, padded with PAD, decoder inputs shifted right behind BOS.
"""

from __future__ import annotations

from typing import Any

import numpy as np

FREQ_BINS = 161
CHARS = 29  # blank, space, apostrophe, a-z
FRAMES_PER_SECOND = 100
CHARS_PER_SECOND = 14  # about LibriSpeech's transcripts
BUCKET_POOL = 16       # with bucketing, a batch is a run of similar lengths among 16 batches' worth
MIN_FRAMES = 20
# The speech front end's time axis: kernel 11, stride 2, padding 5 (the first convolution; the second keeps time).
TIME_KERNEL, TIME_STRIDE, TIME_PADDING = 11, 2, 5

PAD, BOS = 0, 1
FIRST_WORD = 3  # ids 0..2: padding, begin, end

Distribution = tuple[str, tuple[float, ...]]


def front_end_frames(frames: Any) -> Any:
    """Output time steps of the speech front end for input frames (ints, NumPy or torch integer arrays)."""
    return (frames + 2 * TIME_PADDING - TIME_KERNEL) // TIME_STRIDE + 1


def draw_seconds(dist: Distribution, n: int, g: np.random.Generator) -> np.ndarray:
    """n utterance lengths in seconds: ``fixed`` (s), ``uniform`` (min, max) or ``normal`` (mean, sd, min, max)."""
    kind, p = dist
    if kind == "fixed":
        return np.full(n, p[0])
    if kind == "uniform":
        return g.uniform(p[0], p[1], n)
    return np.clip(g.normal(p[0], p[1], n), p[2], p[3])


def speech_batch(batch: int, dist: Distribution, bucketing: bool, g: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Spectrograms (batch, frames, FREQ_BINS) float32, zero past each length; frame counts; character
    targets (batch, longest) and their lengths; each utterance's seconds (float32)."""
    if bucketing:
        pool = np.sort(draw_seconds(dist, batch * BUCKET_POOL, g))
        start = int(g.integers(0, len(pool) - batch + 1))
        seconds = pool[start:start + batch]
    else:
        seconds = draw_seconds(dist, batch, g)
    frames = np.maximum(np.round(seconds * FRAMES_PER_SECOND), MIN_FRAMES).astype(np.int64)
    spect = g.standard_normal((batch, int(frames.max()), FREQ_BINS), dtype=np.float32)
    spect *= (np.arange(spect.shape[1])[None, :] < frames[:, None])[:, :, None]
    target_lengths = np.minimum(np.maximum(np.round(seconds * CHARS_PER_SECOND), 1).astype(np.int64),
                                front_end_frames(frames))
    targets = g.integers(1, CHARS, (batch, int(target_lengths.max())), dtype=np.int64)
    return spect, frames, targets, target_lengths, seconds.astype(np.float32)


def translation_batch(batch: int, max_len: int, vocab: int, g: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Source tokens and lengths, decoder inputs (BOS-shifted targets) and targets, int64, padded with PAD."""
    src_len = g.integers(max(1, max_len // 4), max_len + 1, batch)
    tgt_len = np.clip(np.round(src_len * (0.8 + 0.4 * g.random(batch))), 1, max_len).astype(np.int64)

    def tokens(lengths: np.ndarray) -> np.ndarray:
        ids = g.integers(FIRST_WORD, vocab, (batch, int(lengths.max())), dtype=np.int64)
        return np.where(np.arange(ids.shape[1])[None, :] >= lengths[:, None], PAD, ids)

    src, tgt = tokens(src_len), tokens(tgt_len)
    tgt_in = np.concatenate([np.full((batch, 1), BOS, dtype=np.int64), tgt[:, :-1]], axis=1)
    tgt_in = np.where(np.arange(tgt.shape[1])[None, :] >= tgt_len[:, None], PAD, tgt_in)
    return src, src_len.astype(np.int64), tgt_in, tgt


def speech_counts(batch: tuple[Any, ...]) -> dict[str, float]:
    """What a speech batch counts: utterances (samples) and audio seconds."""
    return {"samples": float(batch[0].shape[0]), "audio_s": float(batch[4].sum())}


def translation_counts(target: Any) -> dict[str, float]:
    """What a translation batch counts, from its targets: words (target tokens, not padding) and sentences."""
    return {"samples": float((target != PAD).sum()), "sentences": float(target.shape[0])}
