"""The flags of a run to a quality target (suite/to_target.py), declared once for every workload that evaluates a
held-out set, and checked before any rank starts. Importable without a framework."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from .errors import UsageError
from .flags import MOST_EPOCHS, bounded, positive_float, positive_int
from .train_flags import flag

LR_SCALINGS = ("none", "linear", "sqrt")
DEFAULT_EVAL_EVERY = 1.0  # epochs
DEFAULT_MAX_EPOCHS = 10.0
SCHEDULE = ("eval_every", "max_epochs", "lr_scaling", "base_batch", "warmup_epochs")  # only with a target


def fraction(text: str) -> float:
    """argparse type: an accuracy as a fraction above 0, at most 1 (``0.85``; ``85`` is refused, said how)."""
    value = positive_float(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f"an accuracy is a fraction of 1 (0.85 for 85%), got {text}")
    return value


@dataclass(frozen=True)
class ToTarget:
    """--target-accuracy or --target-loss, when to evaluate, the cap, and the learning rate's scaling: the options of
    every workload that trains to a quality target (its model family's options name this declaration)."""

    target_accuracy: float | None = flag(
        None, "--target-accuracy", "train until the held-out accuracy reaches it (0.85), evaluation on the clock; the "
        "run records its time to target, or 'not converged' with its best at the cap", parse=fraction,
        metavar="FRACTION")
    target_loss: float | None = flag(None, "--target-loss", "train until the held-out mean loss falls to it (instead "
                                     "of --target-accuracy)", parse=positive_float, metavar="LOSS")
    eval_every: float | None = flag(None, "--eval-every", f"epochs between evaluations of the whole held-out set "
                                    f"(default {DEFAULT_EVAL_EVERY:g}; 0.5: twice an epoch)",
                                    parse=bounded(MOST_EPOCHS, "epochs"), metavar="EPOCHS")
    max_epochs: float | None = flag(None, "--max-epochs", f"the cap: a run that has not reached its target by then "
                                    f"did not converge (default {DEFAULT_MAX_EPOCHS:g})",
                                    parse=bounded(MOST_EPOCHS, "epochs"), metavar="EPOCHS")
    lr_scaling: str | None = flag(None, "--lr-scaling", "--lr is the rate for --base-batch; scale it to the global "
                                  "batch (ranks x --batch-size): linearly (Goyal et al. 2017), by its square root, or "
                                  "not (default)", choices=LR_SCALINGS)
    base_batch: int | None = flag(None, "--base-batch", "the global batch --lr is set for (default: --batch-size, one "
                                  "rank's)", parse=positive_int, metavar="N")
    warmup_epochs: float | None = flag(None, "--warmup-epochs", "ramp the learning rate linearly up to its value over "
                                       "these epochs (default 0)", parse=bounded(MOST_EPOCHS, "epochs", zero=True),
                                       metavar="EPOCHS")


def quality_check(flags: argparse.Namespace) -> None:
    """One target at most; the schedule's flags only with one (else they would change nothing, unsaid); a run to
    target is not an adaptive one; sets the defaults."""
    if flags.target_accuracy is not None and flags.target_loss is not None:
        raise UsageError("--target-accuracy and --target-loss: give one target")
    if flags.target_accuracy is None and flags.target_loss is None:
        for name in SCHEDULE:
            if getattr(flags, name) is not None:
                raise UsageError(f"--{name.replace('_', '-')} applies with --target-accuracy or --target-loss")
        return
    if getattr(flags, "target_ci", None) is not None:
        raise UsageError("--target-ci with a quality target: a run to target stops at its target, not at an "
                         "interval")
    flags.eval_every = flags.eval_every or DEFAULT_EVAL_EVERY
    flags.max_epochs = flags.max_epochs or DEFAULT_MAX_EPOCHS
    flags.lr_scaling = flags.lr_scaling or "none"
    flags.warmup_epochs = flags.warmup_epochs or 0.0


def to_target(flags: argparse.Namespace) -> bool:
    """Whether the flags ask for a run to a quality target."""
    return getattr(flags, "target_accuracy", None) is not None or getattr(flags, "target_loss", None) is not None
