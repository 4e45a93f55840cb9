"""CIFAR DenseNets of Huang et al. 2017, the basic (non-BC) variant: 3 dense blocks of (depth-4)/3
BN-ReLU-Conv3x3 layers with growth rate k, transitions BN-ReLU-Conv1x1-AvgPool without compression,
a 16-channel first convolution. DenseNet-40 (k=12) has about 1.0M parameters, DenseNet-100 (k=12) 7.0M."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class _Layer(nn.Module):
    def __init__(self, cin: int, growth: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(cin)
        self.conv = nn.Conv2d(cin, growth, 3, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.conv(F.relu(self.bn(x)))], 1)


class _Transition(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)
        self.conv = nn.Conv2d(channels, channels, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.avg_pool2d(self.conv(F.relu(self.bn(x))), 2)


class CifarDenseNet(nn.Module):
    """DenseNet (non-BC) for 32x32 inputs."""

    def __init__(self, depth: int, growth: int, num_classes: int = 10) -> None:
        super().__init__()
        if (depth - 4) % 3:
            raise ValueError(f"DenseNet depth must be 3n+4, got {depth}")
        n = (depth - 4) // 3
        channels = 16
        layers: list[nn.Module] = [nn.Conv2d(3, channels, 3, padding=1, bias=False)]
        for block in range(3):
            for _ in range(n):
                layers.append(_Layer(channels, growth))
                channels += growth
            if block < 2:
                layers.append(_Transition(channels))
        self.features = nn.Sequential(*layers)
        self.bn = nn.BatchNorm2d(channels)
        self.fc = nn.Linear(channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn(self.features(x)))
        return self.fc(F.adaptive_avg_pool2d(out, 1).flatten(1))


def densenet_cifar(name: str, num_classes: int = 10) -> CifarDenseNet:
    """``densenet40_k12`` or ``densenet100_k12`` by name."""
    depth, growth = name.removeprefix("densenet").split("_k")
    return CifarDenseNet(int(depth), int(growth), num_classes)
