"""The benchmark knobs a sweep can vary and the report can put side by side, each defined once: its sweep
key, the flags a value becomes in each framework, and how a run's recorded flags say which value it ran
with. Framework-free (the sweep, the plan and the report all read it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from .exchanges import DEFAULT, EXCHANGES, listed

Value = Any


@dataclass(frozen=True)
class Axis:
    """One knob: ``to_flags[framework](value)`` are the benchmark flags for a value (none for the default);
    ``read(flags, framework)`` the value a run's recorded flags show; ``flags`` every flag it owns (with
    how many values each takes), removed when runs are matched on everything else."""

    name: str
    meaning: str
    kind: type
    to_flags: Mapping[str, Callable[[Value], list[str]]]
    read: Callable[[Mapping[str, Any], str], Value]
    flags: Mapping[str, int]
    default: Value

    def label(self, value: Value) -> str:
        """How a value reads in a table."""
        if self.name == "channels_last":
            return "NHWC" if value else "NCHW"
        if self.kind is bool:
            return "on" if value else "off"
        return "default" if value is None else str(value)


def _switch(flag: str) -> Callable[[Value], list[str]]:
    return lambda value: [flag] if value else []


def _option(flag: str) -> Callable[[Value], list[str]]:
    return lambda value: [] if value is None else [flag, str(value)]


def _option_unless(flag: str, default: Value) -> Callable[[Value], list[str]]:
    return lambda value: [] if value is None or value == default else [flag, str(value)]


def _tf_layout(value: Value) -> list[str]:
    return ["--data-format", "channels_last" if value else "channels_first"]


def _layout(flags: Mapping[str, Any], framework: str) -> Value:
    if framework == "tensorflow":
        return flags.get("data_format") == "channels_last"
    return bool(flags.get("channels_last"))


AXES: dict[str, Axis] = {axis.name: axis for axis in (
    Axis("batch_size", "samples per step per rank", int,
         {"pytorch": _option("--batch-size"), "tensorflow": _option("--batch-size")},
         lambda f, _: f.get("batch_size"), {"--batch-size": 1}, None),
    Axis("precision", "fp32, fp16, bf16, amp (TensorFlow also its Keras policies)", str,
         {"pytorch": _option("--precision"), "tensorflow": _option("--precision")},
         lambda f, _: f.get("precision") or "fp32", {"--precision": 1}, "fp32"),
    Axis("channels_last", "image layout of CNNs: NHWC (true) or NCHW", bool,
         {"pytorch": _switch("--channels-last"), "tensorflow": _tf_layout},
         _layout, {"--channels-last": 0, "--data-format": 1}, False),
    Axis("compile", "torch.compile (PyTorch) or XLA (TensorFlow)", bool,
         {"pytorch": _switch("--compile"), "tensorflow": _switch("--xla")},
         lambda f, fw: bool(f.get("xla" if fw == "tensorflow" else "compile")), {"--compile": 0, "--xla": 0}, False),
    Axis("data", "where batches come from: device, host, loader (PyTorch) or pipeline (TensorFlow)", str,
         {"pytorch": _option("--data"), "tensorflow": _option("--data")},
         lambda f, _: f.get("data") or "device", {"--data": 1}, "device"),
    Axis("fp16_allreduce", "Horovod fp16 compression of the exchanged gradients", bool,
         {"pytorch": _switch("--fp16-allreduce"), "tensorflow": _switch("--fp16-allreduce")},
         lambda f, _: bool(f.get("fp16_allreduce")), {"--fp16-allreduce": 0}, False),
    Axis("exchange", f"how gradients are exchanged (core/exchanges.py): {listed(tuple(EXCHANGES))}", str,
         {"pytorch": _option_unless("--exchange", DEFAULT), "tensorflow": _option_unless("--exchange", DEFAULT)},
         lambda f, _: f.get("exchange") or DEFAULT, {"--exchange": 1}, DEFAULT),
    Axis("threads", "CPU threads per rank (intra-op pool in TensorFlow)", int,
         {"pytorch": _option("--threads"), "tensorflow": _option("--threads")},
         lambda f, _: f.get("threads"), {"--threads": 1}, None),
)}


# The exchange's flags: a run without them is its 1-GPU baseline's and independent twin's configuration (one
# baseline serves every exchange: at one rank nothing is exchanged).
EXCHANGE_FLAGS = {"--exchange": 1, "--bucket-mb": 1, "--ps-device": 1}
BASE_FLAGS = {"--independent": 0, **EXCHANGE_FLAGS}


def axis_flags(framework: str, values: Mapping[str, Value]) -> list[str]:
    """The benchmark flags of a set of axis values (in AXES order)."""
    out: list[str] = []
    for name, axis in AXES.items():
        if name in values:
            out += axis.to_flags[framework](values[name])
    return out


def without(args: Sequence[str], flags: Mapping[str, int]) -> tuple[str, ...]:
    """Arguments without the given flags (``--flag V`` and ``--flag=V`` forms)."""
    out: list[str] = []
    skip = 0
    for arg in args:
        if skip:
            skip -= 1
            continue
        name = arg.split("=", 1)[0]
        if name in flags:
            skip = flags[name] if "=" not in arg else 0
            continue
        out.append(arg)
    return tuple(out)


def read_axes(flags: Mapping[str, Any] | None, args: Sequence[str], framework: str) -> dict[str, Value]:
    """Every axis's value for a run: from its recorded flags (the env record), else from its arguments."""
    if not flags:
        flags = {}
        for axis in AXES.values():
            for flag, arity in axis.flags.items():
                key = flag.lstrip("-").replace("-", "_")
                if arity == 0:
                    flags[key] = flag in args
                else:
                    values = [b.split("=", 1)[1] if "=" in b else (args[i + 1] if i + 1 < len(args) else None)
                              for i, b in enumerate(args) if b.split("=", 1)[0] == flag]
                    flags[key] = values[-1] if values else None
    out = {name: axis.read(flags, framework) for name, axis in AXES.items()}
    for name, axis in AXES.items():
        if axis.kind is int and out[name] is not None:
            out[name] = int(out[name]) if str(out[name]).isdigit() else None
    return out
