"""ImageNet CNNs with the reference architectures (torchvision's), so parameter counts match exactly:
ResNet-18/34 (basic blocks), ResNet-50/101/152 (v1.5: stride in the 3x3 convolution), VGG-16 (no batch norm),
AlexNet (one-GPU variant)."""

from __future__ import annotations

import torch
from torch import nn


class Bottleneck(nn.Module):
    """1x1 reduce, 3x3 (strided), 1x1 expand x4, with a projection shortcut where the shape changes."""

    expansion = 4

    def __init__(self, in_planes: int, width: int, stride: int) -> None:
        super().__init__()
        out_planes = width * self.expansion
        self.conv1 = nn.Conv2d(in_planes, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_planes, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_planes)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_planes != out_planes:
            self.downsample = nn.Sequential(nn.Conv2d(in_planes, out_planes, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out_planes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions (the first strided), with a projection shortcut where the shape changes."""

    expansion = 1

    def __init__(self, in_planes: int, width: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, width, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_planes != width:
            self.downsample = nn.Sequential(nn.Conv2d(in_planes, width, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + identity)


class ResNet(nn.Module):
    """ResNet for 224x224 inputs, of basic blocks (18, 34 layers) or bottlenecks (50 and more)."""

    def __init__(self, blocks: tuple[int, int, int, int], num_classes: int = 1000,
                 block: type[BasicBlock] | type[Bottleneck] = Bottleneck) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1))
        stages: list[nn.Module] = []
        in_planes = 64
        for index, (count, width) in enumerate(zip(blocks, (64, 128, 256, 512))):
            for i in range(count):
                stages.append(block(in_planes, width, 2 if (i == 0 and index > 0) else 1))
                in_planes = width * block.expansion
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(in_planes, num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pool(self.stages(self.stem(x))).flatten(1))


_VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


def _classifier(features: int, num_classes: int, dropout_last: bool) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Linear(features, 4096), nn.ReLU(inplace=True), nn.Dropout(),
                               nn.Linear(4096, 4096), nn.ReLU(inplace=True)]
    if dropout_last:
        layers.append(nn.Dropout())
    return nn.Sequential(*layers, nn.Linear(4096, num_classes))


class VGG16(nn.Module):
    """VGG-16 (configuration D), no batch norm."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = 3
        for item in _VGG16:
            if item == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(channels, int(item), 3, padding=1), nn.ReLU(inplace=True)]
                channels = int(item)
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(7)
        self.classifier = _classifier(512 * 7 * 7, num_classes, dropout_last=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.pool(self.features(x)).flatten(1))


class AlexNet(nn.Module):
    """AlexNet, one-tower variant (64-192-384-256-256 filters)."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        relu = lambda: nn.ReLU(inplace=True)  # noqa: E731
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, stride=4, padding=2), relu(), nn.MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2), relu(), nn.MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1), relu(),
            nn.Conv2d(384, 256, 3, padding=1), relu(),
            nn.Conv2d(256, 256, 3, padding=1), relu(), nn.MaxPool2d(3, 2))
        self.pool = nn.AdaptiveAvgPool2d(6)
        self.classifier = nn.Sequential(nn.Dropout(), *_classifier(256 * 6 * 6, num_classes, dropout_last=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.pool(self.features(x)).flatten(1))


BASIC_BLOCKS = {"resnet18": (2, 2, 2, 2), "resnet34": (3, 4, 6, 3)}
RESNET_BLOCKS = {"resnet50": (3, 4, 6, 3), "resnet101": (3, 4, 23, 3), "resnet152": (3, 8, 36, 3)}


def imagenet_model(name: str, num_classes: int = 1000) -> nn.Module:
    """Build an ImageNet model by name (Inception v3 lives in ``inception.py``)."""
    if name in BASIC_BLOCKS:
        return ResNet(BASIC_BLOCKS[name], num_classes, BasicBlock)
    if name in RESNET_BLOCKS:
        return ResNet(RESNET_BLOCKS[name], num_classes)
    if name == "vgg16":
        return VGG16(num_classes)
    if name == "alexnet":
        return AlexNet(num_classes)
    if name == "inception_v3":
        from .inception import InceptionV3

        return InceptionV3(num_classes)
    raise ValueError(f"unknown ImageNet model {name!r}")
