"""DeepSpeech2-style speech recognition with CTC on synthetic utterances of varying length.

Throughput in utterances/s; audio seconds/s beside it. Lengths follow ``--utt-seconds`` (default:
normal, mean 12.5 s, sd 5 s, clipped to 2-35 s, at 100 frames/s); ``--bucketing`` batches similar lengths.

    horovodrun -np 8 -H localhost:8 python suite/speech.py --batch-size 16 --rnn-impl fused
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from hvdbench.suite.models.speech import CHARS, FREQ_BINS, DeepSpeech2, conv_lengths
from hvdbench.suite.pytorch import BuildContext, TorchWorkload, main

FRAMES_PER_SECOND = 100
CHARS_PER_SECOND = 14  # about LibriSpeech's transcripts
BUCKET_POOL = 16       # with bucketing, a batch is a run of similar lengths among 16 batches' worth


def draw_seconds(dist: tuple[str, tuple[float, ...]], n: int, g: torch.Generator) -> torch.Tensor:
    """n utterance lengths in seconds."""
    kind, p = dist
    if kind == "fixed":
        return torch.full((n,), p[0])
    if kind == "uniform":
        return p[0] + (p[1] - p[0]) * torch.rand(n, generator=g)
    return (p[0] + p[1] * torch.randn(n, generator=g)).clamp(p[2], p[3])


def make_batch(batch: int, dist: tuple[str, tuple[float, ...]], bucketing: bool,
               g: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Spectrograms (zero past each length), frame counts, character targets and their lengths, seconds."""
    if bucketing:
        pool = draw_seconds(dist, batch * BUCKET_POOL, g).sort().values
        start = int(torch.randint(0, len(pool) - batch + 1, (1,), generator=g))
        seconds = pool[start:start + batch]
    else:
        seconds = draw_seconds(dist, batch, g)
    frames = (seconds * FRAMES_PER_SECOND).round().long().clamp(min=20)
    spect = torch.randn(batch, 1, FREQ_BINS, int(frames.max()), generator=g)
    spect *= (torch.arange(spect.shape[-1]) < frames[:, None]).float()[:, None, None, :]
    target_lengths = torch.minimum((seconds * CHARS_PER_SECOND).round().long().clamp(min=1), conv_lengths(frames))
    targets = torch.randint(1, CHARS, (batch, int(target_lengths.max())), generator=g)
    return spect, frames, targets, target_lengths, seconds


def loss(model: torch.nn.Module, b: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """CTC over the characters."""
    log_probs, lengths = model(b[0], b[1])
    return F.ctc_loss(log_probs.float(), b[2], lengths, b[3], blank=0, zero_infinity=True)


def build(ctx: BuildContext) -> TorchWorkload:
    f = ctx.flags
    return TorchWorkload(
        model=DeepSpeech2(f.rnn_type, f.rnn_impl, f.rnn_layers, f.rnn_hidden),
        make_batch=lambda g: make_batch(f.batch_size, f.utt_seconds, f.bucketing, g),
        loss=loss,
        count=lambda b: {"samples": float(b[0].shape[0]), "audio_s": float(b[4].sum())},
        distinct_batches=8,
    )


if __name__ == "__main__":
    sys.exit(main("speech", build))
