"""CIFAR-10 ResNets (ResNet-20 ... ResNet-110) on synthetic 32x32x3 images, trained under Horovod.

    horovodrun -np 2 -H localhost:2 python suite/cifar10.py --model resnet20 --batch-size 32 --steps 20
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

from hvdbench.suite.models.resnet_cifar import resnet_cifar
from hvdbench.suite.pytorch import BuildContext, TorchWorkload, main


def build(ctx: BuildContext) -> TorchWorkload:
    """Model, one device-resident synthetic batch, cross-entropy loss."""
    flags, device, generator = ctx.flags, ctx.device, ctx.data_generator()
    images = torch.randn(flags.batch_size, 3, 32, 32, generator=generator).to(device)
    labels = torch.randint(0, 10, (flags.batch_size,), generator=generator).to(device)
    return TorchWorkload(
        model=resnet_cifar(flags.model),
        batch=lambda: (images, labels),
        loss=lambda model, batch: F.cross_entropy(model(batch[0]), batch[1]),
        samples_per_step=flags.batch_size,
    )


if __name__ == "__main__":
    sys.exit(main("cifar10", build))
