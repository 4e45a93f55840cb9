"""Fashion-MNIST (real 28x28 grey images, 10 classes) held in memory, trained by a small CNN or an MLP: throughput
on real data, and with --target-accuracy a run to a quality target (suite/to_target.py).

    horovodrun -np 2 -H localhost:2 python suite/fashion_mnist.py --batch-size 32 --target-accuracy 0.85

The dataset is read as shipped (core/idx.py; Debian's dataset-fashion-mnist by default) and checked before anything
trains: the held-out set shares no image with the training set. Each epoch every rank reads its own share of a
permutation seeded by (--seed, epoch), as many batches as every other rank (core/datasets.shard_ids); the held-out
set is split between the ranks and its sums gathered, so an evaluation covers it once, whatever the ranks."""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from hvdbench.core.datasets import shard_ids
from hvdbench.core.errors import UsageError
from hvdbench.core.idx import CLASSES, Split, train_and_held_out
from hvdbench.suite.pytorch import BuildContext, TorchWorkload, main
from hvdbench.suite.torchdata import Batch, Epochs

MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST's training pixels, scaled to [0, 1]
EVAL_CHUNK = 1000  # held-out images a forward pass


def model_of(name: str) -> nn.Module:
    """``cnn``: two 3x3 convolutions (32, 64 channels) with pooling and a 128-wide layer (421,642 parameters);
    ``mlp``: 784 -> 256 -> 10 (203,530)."""
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, CLASSES))
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, CLASSES))


class InMemory:
    """Both splits as tensors (on the device with --data device, else on the host), this rank's batches epoch by
    epoch, and its share of the held-out set's evaluation."""

    def __init__(self, train: Split, held: Split, ctx: BuildContext) -> None:
        flags = ctx.flags
        where = ctx.device if flags.data == "device" else torch.device("cpu")
        self.images = torch.from_numpy(train.images.copy()).to(where).unsqueeze(1)
        self.labels = torch.from_numpy(train.labels.astype("int64")).to(where)
        mine = torch.arange(ctx.rank, len(held), ctx.size)  # this rank's share: every size-th from its rank
        self.held_images = torch.from_numpy(held.images.copy()).unsqueeze(1)[mine].to(where)
        self.held_labels = torch.from_numpy(held.labels.astype("int64"))[mine].to(where)
        self.rank, self.size, self.seed, self.batch = ctx.rank, ctx.size, flags.seed, flags.batch_size
        self.steps_per_epoch = len(train) // ctx.size // self.batch
        if self.steps_per_epoch < 1:
            raise UsageError(f"{train.source}: {len(train):,} training images, fewer than {ctx.size} rank(s) x batch "
                             f"{self.batch}: every rank needs a full batch each step")
        self.step, self.order = 0, torch.empty(0, dtype=torch.int64)
        self.facts = {"source": train.source, "held_out": held.source, "train_images": len(train),
                      "held_out_images": len(held), "train_sha256": train.sha256, "held_out_sha256": held.sha256,
                      "classes": CLASSES, "held_out_shared": 0}

    @staticmethod
    def scaled(images: torch.Tensor) -> torch.Tensor:
        return (images.float() / 255.0 - MEAN) / STD

    def next_batch(self) -> Batch:
        """This rank's next batch; a new epoch's permutation where the last one is used up."""
        within = self.step % self.steps_per_epoch
        if within == 0:
            ids = shard_ids(len(self.labels), self.rank, self.size, self.step // self.steps_per_epoch, self.seed)
            self.order = torch.from_numpy(ids.astype("int64")).to(self.labels.device)
        self.step += 1
        take = self.order[within * self.batch:(within + 1) * self.batch]
        return self.scaled(self.images[take]), self.labels[take]

    def evaluate(self, model: nn.Module) -> tuple[float, float, float]:
        """Correct answers, images seen and the summed loss over this rank's share of the held-out set."""
        correct = seen = loss = 0.0
        weights = next(model.parameters())
        device = weights.device
        for start in range(0, len(self.held_labels), EVAL_CHUNK):
            images = self.scaled(self.held_images[start:start + EVAL_CHUNK]).to(device, weights.dtype)
            labels = self.held_labels[start:start + EVAL_CHUNK].to(device)
            logits = model(images).float()
            loss += float(F.cross_entropy(logits, labels, reduction="sum"))
            correct += float((logits.argmax(1) == labels).sum())
            seen += float(len(labels))
        return correct, seen, loss


def build(ctx: BuildContext) -> TorchWorkload:
    """The model, the dataset in memory (checked), cross-entropy."""
    flags = ctx.flags
    train, held = train_and_held_out(Path(flags.idx_dir), Path(flags.eval_dir) if flags.eval_dir else None)
    data = InMemory(train, held, ctx)

    def no_synthetic(_: torch.Generator) -> Batch:
        raise UsageError("fashion_mnist reads real images only")

    return TorchWorkload(model=model_of(flags.model), make_batch=no_synthetic,
                         loss=lambda model, b: F.cross_entropy(model(b[0]), b[1]),
                         epochs=Epochs(data.steps_per_epoch, data.next_batch, data.evaluate, lambda: data.facts))


if __name__ == "__main__":
    sys.exit(main("fashion_mnist", build))
