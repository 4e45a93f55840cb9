"""ImageNet CNNs (ResNet-50/101/152, Inception v3, VGG-16, AlexNet) on synthetic images, 1000 classes.

    horovodrun -np 8 -H localhost:8 python suite/imagenet.py --model resnet50 --batch-size 64 --precision amp
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from hvdbench.suite.models.imagenet import imagenet_model
from hvdbench.suite.pytorch import BuildContext, TorchWorkload, main

AUX_WEIGHT = 0.4  # Inception v3's auxiliary loss weight


def loss(model: torch.nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Cross-entropy; with Inception's auxiliary head, main + 0.4 x auxiliary."""
    out = model(batch[0])
    if isinstance(out, tuple):
        return F.cross_entropy(out[0], batch[1]) + AUX_WEIGHT * F.cross_entropy(out[1], batch[1])
    return F.cross_entropy(out, batch[1])


def build(ctx: BuildContext) -> TorchWorkload:
    """Model, synthetic 224x224 (299x299 for Inception v3) images and labels."""
    batch = ctx.flags.batch_size
    side = ctx.flags.image_size or (299 if ctx.flags.model == "inception_v3" else 224)
    return TorchWorkload(
        model=imagenet_model(ctx.flags.model),
        make_batch=lambda g: (torch.randn(batch, 3, side, side, generator=g),
                              torch.randint(0, 1000, (batch,), generator=g)),
        loss=loss, reads="imagenet",
    )


if __name__ == "__main__":
    sys.exit(main("imagenet", build))
