"""FLOPs per sample of a training step, counted once per model and size on PyTorch's meta device (shapes
only: no memory, no time on the device).

Counting rule: PyTorch's FLOP counter (``torch.utils.flop_counter``) counts a multiply-add as 2 FLOPs and
sees the backward pass when it runs inside the counter, so forward + backward is counted, not assumed.
Where the counter cannot see backward (TensorFlow counts its forward graph), backward is taken as 2x
forward (3x in all). Elementwise work (activations, normalisation, the optimizer) is not counted, as in
published model-FLOP figures; the count is a floor of the work a step does.
"""

from __future__ import annotations

from typing import Any, Callable

BACKWARD_FACTOR = 3.0  # forward + backward where backward cannot be counted


def count_torch(build: Callable[[Any], Any], ctx: Any, host: tuple[Any, ...]) -> dict[str, Any]:
    """FLOPs per sample of one training step of the workload ``build(ctx)`` makes, counted on the meta
    device with the shapes of ``host`` (one batch as the workload makes it): ``{"flops_per_sample": F,
    "flops_forward_per_sample": f, "flops_counted": how}``; where the model cannot run on the meta device
    (packed sequences), ``{"flops_per_sample": None, "flops_counted": why}``."""
    import dataclasses

    import torch
    from torch.utils.flop_counter import FlopCounterMode

    try:
        with torch.device("meta"):
            workload = build(dataclasses.replace(ctx, device=torch.device("meta")))
            batch = tuple(t.to("meta") for t in host)
            with FlopCounterMode(display=False) as counter:
                loss = workload.loss(workload.model, batch)
                forward = counter.get_total_flops()
                loss.backward()
        count = (workload.count or (lambda b: {"samples": float(b[0].shape[0])}))(host)["samples"]
    except Exception as exc:  # noqa: BLE001 - an uncountable model is a missing column, not a failed run
        return {"flops_per_sample": None, "flops_counted": f"not counted ({type(exc).__name__}: {str(exc)[:120]})"}
    total = counter.get_total_flops()
    return {"flops_per_sample": total / count, "flops_forward_per_sample": forward / count,
            "flops_counted": "PyTorch FLOP counter, forward and backward, multiply-add = 2"}


def count_keras(loss: Callable[..., Any], model: Any, host_batch: tuple[Any, ...], samples: float) -> dict[str, Any]:
    """FLOPs per sample of one training step of a Keras workload: its forward graph (model and loss, as one
    ``tf.function`` of the batch's shapes) counted by TensorFlow's profiler, times BACKWARD_FACTOR."""
    try:
        import tensorflow as tf
        from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2_as_graph

        specs = [tf.TensorSpec(a.shape, tf.as_dtype(a.dtype)) for a in host_batch]
        concrete = tf.function(lambda *b: loss(model, b)).get_concrete_function(*specs)
        frozen, _ = convert_variables_to_constants_v2_as_graph(concrete)
        options = tf.compat.v1.profiler.ProfileOptionBuilder(
            tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()).with_empty_output().build()
        forward = tf.compat.v1.profiler.profile(graph=frozen.graph, options=options).total_float_ops
    except Exception as exc:  # noqa: BLE001 - an uncountable model is a missing column, not a failed run
        return {"flops_per_sample": None, "flops_counted": f"not counted ({type(exc).__name__}: {str(exc)[:120]})"}
    return {"flops_per_sample": BACKWARD_FACTOR * forward / samples, "flops_forward_per_sample": forward / samples,
            "flops_counted": "TensorFlow profiler on the forward graph, backward taken as 2x forward"}
