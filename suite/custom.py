"""A model of the user's own (``--model-file PATH``), trained through the same harness, exchanges, records and
report as the suite's workloads. The file's interface is documented in examples/model_file.py: ``model()`` and
``batch(batch_size, generator)``, optionally ``loss(model, batch)`` and ``UNIT``.

    horovodrun -np 8 -H localhost:8 python suite/custom.py --model-file my_model.py --batch-size 32
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

import torch
import torch.nn.functional as F

from hvdbench.core.errors import UsageError
from hvdbench.core.validate import text_problem
from hvdbench.suite.pytorch import BuildContext, TorchWorkload, main

CHECK_BATCH = 2  # samples of the batch that proves the model takes it, before any rank trains


def load_model_file(path: str) -> ModuleType:
    """The user's file as a module, its interface checked: a UsageError naming the file and what it lacks."""
    where = Path(path)
    try:
        spec = importlib.util.spec_from_file_location(f"hvdbench_model_file_{abs(hash(path))}", where)
        if spec is None or spec.loader is None:
            raise UsageError(f"--model-file {path}: not a Python file")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - any fault of the user's file is one line naming it
        raise UsageError(f"--model-file {path}: importing it failed: {type(exc).__name__}: {_first_line(exc)}") \
            from None
    missing = [name for name in ("model", "batch") if not callable(getattr(module, name, None))]
    if missing:
        raise UsageError(f"--model-file {path}: defines no {' or '.join(f'{n}()' for n in missing)} (the interface: "
                         "model() -> nn.Module, batch(batch_size, generator) -> tuple of tensors)")
    unit = getattr(module, "UNIT", "samples")
    if not isinstance(unit, str) or text_problem(unit) or not unit.isidentifier():
        raise UsageError(f"--model-file {path}: UNIT must be a short word (images, tokens ...), got {unit!r}")
    return module


def _first_line(exc: BaseException) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[0][:200] if lines else ""


def default_loss(model: torch.nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    """Cross-entropy of the model's output on the inputs (every tensor but the last) against the last."""
    return F.cross_entropy(model(*batch[:-1]).float(), batch[-1])


def checked(module: ModuleType, path: str, model: torch.nn.Module, generator: torch.Generator,
            loss: Callable[..., torch.Tensor]) -> None:
    """A small batch through the model and the loss on the CPU, before any rank trains: a batch that does not
    fit its model (shapes, dtypes, not a tuple of tensors) is one line naming the file."""
    batch = module.batch(CHECK_BATCH, generator)
    if not isinstance(batch, tuple) or not batch or not all(isinstance(t, torch.Tensor) for t in batch):
        raise UsageError(f"--model-file {path}: batch() must return a tuple of tensors, got {type(batch).__name__}")
    try:
        with torch.no_grad():
            value = loss(model, batch)
    except Exception as exc:  # noqa: BLE001 - the user's shapes, in one line
        raise UsageError(f"--model-file {path}: its batch does not fit its model: {type(exc).__name__}: "
                         f"{_first_line(exc)}") from None
    if not isinstance(value, torch.Tensor) or value.numel() != 1:
        raise UsageError(f"--model-file {path}: the loss must be one number (a 1-element tensor)")


def build(ctx: BuildContext) -> TorchWorkload:
    """The user's model, batches and loss; checked on a small batch first (not on the meta device, where the
    FLOPs are counted)."""
    f = ctx.flags
    module = load_model_file(f.model_file)
    model = module.model()
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"--model-file {f.model_file}: model() must return a torch.nn.Module, "
                         f"got {type(model).__name__}")
    loss: Callable[[Any, Any], torch.Tensor] = getattr(module, "loss", None) or default_loss
    if ctx.device.type != "meta":
        checked(module, f.model_file, model, torch.Generator().manual_seed(f.seed), loss)
    return TorchWorkload(model=model, make_batch=lambda g: tuple(module.batch(f.batch_size, g)), loss=loss,
                         unit=getattr(module, "UNIT", "samples"))


if __name__ == "__main__":
    sys.exit(main("custom", build))
