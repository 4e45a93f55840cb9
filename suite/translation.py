"""GNMT-like LSTM translation on synthetic sentence pairs; words/s counts target tokens, not padding.

Source lengths are uniform in [max_len/4, max_len]; each target is 0.8-1.2 x its source (the batches of
``suite/synthetic.py``, shared with ``tf_translation``); or, with ``--data files --data-dir DIR``, sentence pairs of
token ids read from a dataset (``hvdbench data make translation``: WMT14's lengths).

    horovodrun -np 8 -H localhost:8 python suite/translation.py --batch-size 128 --src-max-len 50
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from hvdbench.suite.models.seq2seq import Seq2Seq
from hvdbench.suite.pytorch import BuildContext, TorchWorkload, main, numpy_generator
from hvdbench.suite.synthetic import PAD, translation_batch, translation_counts


def make_batch(batch: int, max_len: int, vocab: int, g: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Source tokens and lengths, decoder inputs (BOS-shifted targets) and targets, padded with PAD."""
    return tuple(torch.from_numpy(a) for a in translation_batch(batch, max_len, vocab, numpy_generator(g)))


def build(ctx: BuildContext) -> TorchWorkload:
    f = ctx.flags
    return TorchWorkload(
        model=Seq2Seq(f.vocab, f.hidden, f.layers, f.attention, f.rnn_impl),
        make_batch=lambda g: make_batch(f.batch_size, f.src_max_len, f.vocab, g),
        loss=lambda model, b: F.cross_entropy(model(b[0], b[1], b[2]).flatten(0, 1).float(), b[3].flatten(),
                                              ignore_index=PAD),
        count=lambda b: translation_counts(b[3]),
        distinct_batches=8, reads="translation",
    )


if __name__ == "__main__":
    sys.exit(main("translation", build))
