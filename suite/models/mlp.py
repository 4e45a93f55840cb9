"""A large fully connected network: input -> hidden widths (ReLU) -> classes. Default: 1024 -> 4096 ->
4096 -> 10, 21,020,682 parameters."""

from __future__ import annotations

from typing import Sequence

from torch import nn


def mlp(input_size: int = 1024, widths: Sequence[int] = (4096, 4096), num_classes: int = 10) -> nn.Sequential:
    """The MLP as one Sequential."""
    layers: list[nn.Module] = []
    size = input_size
    for width in widths:
        layers += [nn.Linear(size, width), nn.ReLU(inplace=True)]
        size = width
    layers.append(nn.Linear(size, num_classes))
    return nn.Sequential(*layers)
