"""A large fully connected network (default 1024 -> 4096 -> 4096 -> 10, 21M parameters) on synthetic vectors.

    horovodrun -np 2 -H localhost:2 python suite/mlp.py --batch-size 256 --mlp-widths 4096,4096
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from hvdbench.suite.models.mlp import mlp
from hvdbench.suite.pytorch import BuildContext, TorchWorkload, main


def build(ctx: BuildContext) -> TorchWorkload:
    """Model, synthetic vectors and labels, cross-entropy."""
    f = ctx.flags
    return TorchWorkload(
        model=mlp(f.mlp_input, f.mlp_widths, f.mlp_classes),
        make_batch=lambda g: (torch.randn(f.batch_size, f.mlp_input, generator=g),
                              torch.randint(0, f.mlp_classes, (f.batch_size,), generator=g)),
        loss=lambda model, b: F.cross_entropy(model(b[0]), b[1]),
    )


if __name__ == "__main__":
    sys.exit(main("mlp", build))
