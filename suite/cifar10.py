"""CIFAR-10 CNNs (ResNet-20 ... ResNet-110, DenseNet-40/100 k=12) on synthetic 32x32x3 images.

    horovodrun -np 2 -H localhost:2 python suite/cifar10.py --model resnet20 --batch-size 32 --steps 20
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from hvdbench.suite.models.densenet_cifar import densenet_cifar
from hvdbench.suite.models.resnet_cifar import resnet_cifar
from hvdbench.suite.pytorch import BuildContext, TorchWorkload, main


def build(ctx: BuildContext) -> TorchWorkload:
    """Model, synthetic images and labels, cross-entropy."""
    name, batch = ctx.flags.model, ctx.flags.batch_size
    return TorchWorkload(
        model=densenet_cifar(name) if name.startswith("densenet") else resnet_cifar(name),
        make_batch=lambda g: (torch.randn(batch, 3, 32, 32, generator=g), torch.randint(0, 10, (batch,), generator=g)),
        loss=lambda model, b: F.cross_entropy(model(b[0]), b[1]),
    )


if __name__ == "__main__":
    sys.exit(main("cifar10", build))
