"""GNMT-like LSTM translation on synthetic sentence pairs; words/s counts target tokens, not padding.

Source lengths are uniform in [max_len/4, max_len]; each target is 0.8-1.2 x its source.

    horovodrun -np 8 -H localhost:8 python suite/translation.py --batch-size 128 --src-max-len 50
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from hvdbench.suite.models.seq2seq import BOS, PAD, Seq2Seq
from hvdbench.suite.pytorch import BuildContext, TorchWorkload, main

FIRST_WORD = 3  # ids 0..2: padding, begin, end


def make_batch(batch: int, max_len: int, vocab: int, g: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Source tokens and lengths, decoder inputs (BOS-shifted targets) and targets, padded with PAD."""
    src_len = torch.randint(max(1, max_len // 4), max_len + 1, (batch,), generator=g)
    tgt_len = (src_len * (0.8 + 0.4 * torch.rand(batch, generator=g))).round().long().clamp(1, max_len)

    def tokens(lengths: torch.Tensor) -> torch.Tensor:
        ids = torch.randint(FIRST_WORD, vocab, (batch, int(lengths.max())), generator=g)
        return ids.masked_fill(torch.arange(ids.shape[1]) >= lengths[:, None], PAD)

    src, tgt = tokens(src_len), tokens(tgt_len)
    tgt_in = torch.cat([torch.full((batch, 1), BOS), tgt[:, :-1]], dim=1)
    tgt_in = tgt_in.masked_fill(torch.arange(tgt.shape[1]) >= tgt_len[:, None], PAD)
    return src, src_len, tgt_in, tgt


def build(ctx: BuildContext) -> TorchWorkload:
    f = ctx.flags
    return TorchWorkload(
        model=Seq2Seq(f.vocab, f.hidden, f.layers, f.attention),
        make_batch=lambda g: make_batch(f.batch_size, f.src_max_len, f.vocab, g),
        loss=lambda model, b: F.cross_entropy(model(b[0], b[1], b[2]).flatten(0, 1).float(), b[3].flatten(),
                                              ignore_index=PAD),
        count=lambda b: {"samples": float((b[3] != PAD).sum()), "sentences": float(b[3].shape[0])},
        distinct_batches=8,
    )


if __name__ == "__main__":
    sys.exit(main("translation", build))
