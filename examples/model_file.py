"""A model of your own for `hvdbench run custom --model-file examples/model_file.py` (and a sweep's
`{benchmark: custom, args: [--model-file, ...]}`): the whole interface is two functions, and two optional
names. hvdbench imports this file on every rank, builds the model once per rank, and trains it on synthetic
batches through the same harness, exchanges, records and report as its own workloads.

    model() -> torch.nn.Module
        The model, on the CPU; hvdbench moves it to the rank's device and casts it for --precision.
    batch(batch_size: int, generator: torch.Generator) -> tuple[torch.Tensor, ...]
        One synthetic batch of batch_size samples, on the CPU, made with the generator (seeded per rank):
        the model's inputs, then the target. Its first tensor's first dimension counts the samples.
    loss(model, batch) -> torch.Tensor                                   (optional)
        The training loss of one batch; default: cross_entropy(model(*batch[:-1]), batch[-1]).
    UNIT = "samples"                                                     (optional)
        What a sample is, for the report's "<unit>/s" (images, tokens, sequences ...).

This example: a small convolutional classifier on 3x64x64 images, 10 classes.
"""

import torch
from torch import nn

UNIT = "images"


def model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(64, 10))


def batch(batch_size: int, generator: torch.Generator) -> tuple[torch.Tensor, ...]:
    images = torch.randn(batch_size, 3, 64, 64, generator=generator)
    labels = torch.randint(0, 10, (batch_size,), generator=generator)
    return images, labels
