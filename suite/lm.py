"""Transformer language model (GPT-2 small shape by default) on synthetic token sequences; tokens/s.

    horovodrun -np 8 -H localhost:8 python suite/lm.py --batch-size 8 --precision amp
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from hvdbench.suite.models.transformer import TransformerLM
from hvdbench.suite.pytorch import BuildContext, TorchWorkload, main


def build(ctx: BuildContext) -> TorchWorkload:
    """Model and random token sequences; the loss predicts each next token."""
    f = ctx.flags
    return TorchWorkload(
        model=TransformerLM(f.vocab, f.context, f.layers, f.width, f.heads),
        make_batch=lambda g: (torch.randint(0, f.vocab, (f.batch_size, f.context + 1), generator=g),),
        loss=lambda model, b: F.cross_entropy(model(b[0][:, :-1]).flatten(0, 1), b[0][:, 1:].flatten()),
        count=lambda b: {"samples": float(b[0].shape[0] * (b[0].shape[1] - 1)), "sequences": float(b[0].shape[0])},
    )


if __name__ == "__main__":
    sys.exit(main("lm", build))
