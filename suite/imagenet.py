"""ImageNet CNNs (ResNet-18/34/50/101/152, Inception v3, VGG-16, AlexNet) on synthetic images, 1000 classes, or
on files (--data files); with --target-accuracy trained to a quality target, evaluated on --eval-dir's held-out
set (suite/heldout.py).

    horovodrun -np 8 -H localhost:8 python suite/imagenet.py --model resnet50 --batch-size 64 --precision amp
    horovodrun -np 8 -H localhost:8 python suite/imagenet.py --data files --data-dir /data/imagenet/train \
        --eval-dir /data/imagenet/val --target-accuracy 0.759 --lr-scaling linear --base-batch 256
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from hvdbench.core.datasets import check_enough
from hvdbench.core.quality_flags import to_target
from hvdbench.suite.models.imagenet import imagenet_model
from hvdbench.suite.pytorch import BuildContext, TorchWorkload, main
from hvdbench.suite.torchdata import Epochs

AUX_WEIGHT = 0.4  # Inception v3's auxiliary loss weight


def loss(model: torch.nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Cross-entropy; with Inception's auxiliary head, main + 0.4 x auxiliary."""
    out = model(batch[0])
    if isinstance(out, tuple):
        return F.cross_entropy(out[0], batch[1]) + AUX_WEIGHT * F.cross_entropy(out[1], batch[1])
    return F.cross_entropy(out, batch[1])


def held_out_epochs(ctx: BuildContext, side: int) -> Epochs:
    """A run to target's epochs over --data-dir's files and its evaluation of --eval-dir's, both checked first."""
    from hvdbench.suite.heldout import FileHeldOut, checked_sets, held_out_facts

    flags = ctx.flags
    train, held, found = checked_sets(flags, "imagenet", ctx.rank, ctx.share)
    check_enough(train, ctx.size, flags.batch_size)
    evaluator = FileHeldOut(held, ctx.rank, ctx.size, side, flags.loader_workers)
    return Epochs(len(train) // ctx.size // flags.batch_size, None, evaluator.evaluate,
                  lambda: held_out_facts(held, found, evaluator))


def build(ctx: BuildContext) -> TorchWorkload:
    """Model, synthetic 224x224 (299x299 for Inception v3) images and labels, or files; to a target, the held-out
    set's epochs."""
    batch = ctx.flags.batch_size
    side = ctx.flags.image_size or (299 if ctx.flags.model == "inception_v3" else 224)
    return TorchWorkload(
        model=imagenet_model(ctx.flags.model),
        make_batch=lambda g: (torch.randn(batch, 3, side, side, generator=g),
                              torch.randint(0, 1000, (batch,), generator=g)),
        loss=loss, reads="imagenet", epochs=held_out_epochs(ctx, side) if to_target(ctx.flags) else None,
    )


if __name__ == "__main__":
    sys.exit(main("imagenet", build))
