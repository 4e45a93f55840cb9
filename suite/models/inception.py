"""Inception v3 (Szegedy et al. 2016) with the auxiliary head, for 299x299 inputs; the reference layout."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

Size = int | tuple[int, int]


class Conv(nn.Module):
    """Convolution without bias, batch norm (eps 0.001), ReLU."""

    def __init__(self, cin: int, cout: int, kernel: Size, stride: int = 1, padding: Size = 0) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(cout, eps=0.001)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x)), inplace=True)


def _pool_branch(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.AvgPool2d(3, stride=1, padding=1), Conv(cin, cout, 1))


class _Branches(nn.Module):
    """Parallel branches whose outputs are concatenated along channels."""

    def __init__(self, *branches: nn.Module) -> None:
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([branch(x) for branch in self.branches], 1)


class _Split(nn.Module):
    """A stem followed by two parallel heads, concatenated (the 1x3 / 3x1 fan-out of module E)."""

    def __init__(self, stem: nn.Module, a: nn.Module, b: nn.Module) -> None:
        super().__init__()
        self.stem, self.a, self.b = stem, a, b

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        return torch.cat([self.a(y), self.b(y)], 1)


def block_a(cin: int, pool: int) -> _Branches:
    return _Branches(
        Conv(cin, 64, 1),
        nn.Sequential(Conv(cin, 48, 1), Conv(48, 64, 5, padding=2)),
        nn.Sequential(Conv(cin, 64, 1), Conv(64, 96, 3, padding=1), Conv(96, 96, 3, padding=1)),
        _pool_branch(cin, pool))


def block_b(cin: int) -> _Branches:
    return _Branches(
        Conv(cin, 384, 3, stride=2),
        nn.Sequential(Conv(cin, 64, 1), Conv(64, 96, 3, padding=1), Conv(96, 96, 3, stride=2)),
        nn.MaxPool2d(3, stride=2))


def block_c(cin: int, c7: int) -> _Branches:
    def row(a: int, b: int) -> Conv:  # 1x7
        return Conv(a, b, (1, 7), padding=(0, 3))

    def col(a: int, b: int) -> Conv:  # 7x1
        return Conv(a, b, (7, 1), padding=(3, 0))

    return _Branches(
        Conv(cin, 192, 1),
        nn.Sequential(Conv(cin, c7, 1), row(c7, c7), col(c7, 192)),
        nn.Sequential(Conv(cin, c7, 1), col(c7, c7), row(c7, c7), col(c7, c7), row(c7, 192)),
        _pool_branch(cin, 192))


def block_d(cin: int) -> _Branches:
    return _Branches(
        nn.Sequential(Conv(cin, 192, 1), Conv(192, 320, 3, stride=2)),
        nn.Sequential(Conv(cin, 192, 1), Conv(192, 192, (1, 7), padding=(0, 3)),
                      Conv(192, 192, (7, 1), padding=(3, 0)), Conv(192, 192, 3, stride=2)),
        nn.MaxPool2d(3, stride=2))


def block_e(cin: int) -> _Branches:
    def fan(width: int) -> tuple[nn.Module, nn.Module]:
        return Conv(width, 384, (1, 3), padding=(0, 1)), Conv(width, 384, (3, 1), padding=(1, 0))

    return _Branches(
        Conv(cin, 320, 1),
        _Split(Conv(cin, 384, 1), *fan(384)),
        _Split(nn.Sequential(Conv(cin, 448, 1), Conv(448, 384, 3, padding=1)), *fan(384)),
        _pool_branch(cin, 192))


class AuxHead(nn.Module):
    """Auxiliary classifier on the 17x17 grid."""

    def __init__(self, cin: int, num_classes: int) -> None:
        super().__init__()
        self.conv0 = Conv(cin, 128, 1)
        self.conv1 = Conv(128, 768, 5)
        self.fc = nn.Linear(768, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(self.conv0(F.avg_pool2d(x, 5, stride=3)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


class InceptionV3(nn.Module):
    """Inception v3; in training mode returns (logits, auxiliary logits)."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            Conv(3, 32, 3, stride=2), Conv(32, 32, 3), Conv(32, 64, 3, padding=1), nn.MaxPool2d(3, stride=2),
            Conv(64, 80, 1), Conv(80, 192, 3), nn.MaxPool2d(3, stride=2))
        self.mixed_5_6 = nn.Sequential(
            block_a(192, 32), block_a(256, 64), block_a(288, 64), block_b(288),
            block_c(768, 128), block_c(768, 160), block_c(768, 160), block_c(768, 192))
        self.aux = AuxHead(768, num_classes)
        self.mixed_7 = nn.Sequential(block_d(768), block_e(1280), block_e(2048))
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(2048, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        x = self.mixed_5_6(self.stem(x))
        aux = self.aux(x) if self.training else None
        x = self.dropout(F.adaptive_avg_pool2d(self.mixed_7(x), 1).flatten(1))
        logits = self.fc(x)
        return (logits, aux) if aux is not None else logits
