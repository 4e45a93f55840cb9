"""DeepSpeech2-style speech recognition with CTC on synthetic utterances of varying length.

Throughput in utterances/s; audio seconds/s beside it. Lengths follow ``--utt-seconds`` (default:
normal, mean 12.5 s, sd 5 s, clipped to 2-35 s, at 100 frames/s); ``--bucketing`` batches similar
lengths. The batches come from ``suite/synthetic.py``, shared with ``tf_speech``.

    horovodrun -np 8 -H localhost:8 python suite/speech.py --batch-size 16 --rnn-impl fused
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from hvdbench.suite.models.speech import DeepSpeech2
from hvdbench.suite.pytorch import BuildContext, TorchWorkload, main, numpy_generator
from hvdbench.suite.synthetic import speech_batch, speech_counts


def make_batch(batch: int, dist: tuple[str, tuple[float, ...]], bucketing: bool,
               g: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Spectrograms (batch, 1, 161, frames), frame counts, character targets and their lengths, seconds."""
    spect, *rest = (torch.from_numpy(a) for a in speech_batch(batch, dist, bucketing, numpy_generator(g)))
    return (spect.transpose(1, 2).unsqueeze(1).contiguous(), *rest)


def loss(model: torch.nn.Module, b: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """CTC over the characters."""
    log_probs, lengths = model(b[0], b[1])
    return F.ctc_loss(log_probs.float(), b[2], lengths, b[3], blank=0, zero_infinity=True)


def build(ctx: BuildContext) -> TorchWorkload:
    f = ctx.flags
    return TorchWorkload(
        model=DeepSpeech2(f.rnn_type, f.rnn_impl, f.rnn_layers, f.rnn_hidden),
        make_batch=lambda g: make_batch(f.batch_size, f.utt_seconds, f.bucketing, g),
        loss=loss, count=speech_counts, distinct_batches=8, reads="speech",
    )


if __name__ == "__main__":
    sys.exit(main("speech", build))
