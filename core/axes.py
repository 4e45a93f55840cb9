"""The benchmark knobs a sweep can vary and the report can put side by side, each defined once: its sweep
key, the flags a value becomes in each framework, and how a run's recorded flags say which value it ran
with. Framework-free (the sweep, the plan and the report all read it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, Callable, Mapping, Sequence

from .exchanges import DEFAULT, EXCHANGES, exchange_flags, listed
from .loaders import loaders_of
from .pagecache import CACHE_MODES
from .run_flags import flag_value, given_flags
from .train_flags import arities, flags_where

Value = Any
LOADERS = {framework: loaders_of(framework) for framework in ("pytorch", "tensorflow")}  # core/loaders.py's


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
    offered: Mapping[str, tuple[Value, ...]] = field(default_factory=dict)  # a framework's values, where limited
    shown: Callable[[Value], str] | None = None  # how a value reads in a table, where not as itself
    files_only: bool = False  # an option of --data files: left off a run that reads no files (its synthetic twin)
    compared: bool = True  # its values set side by side in the knob table (not where they measure other work)
    least: int = 1  # a whole-number knob's smallest value (0 loader workers: the rank reads its batches itself)

    def label(self, value: Value) -> str:
        """How a value reads in a table."""
        if self.shown is not None and value is not None:
            return self.shown(value)
        if self.kind is bool:
            return "on" if value else "off"
        return "default" if value is None else str(value)

    def refused(self, framework: str, value: Value) -> str | None:
        """Why ``value`` cannot run on ``framework``'s workloads, or None."""
        mine = self.offered.get(framework)
        if value is None or mine is None or value in mine:
            return None
        return f"{self.name.replace('_', ' ')} {self.label(value)} on {framework} workloads: theirs are " \
               f"{', '.join(map(str, mine))}"


def _switch(flag: str) -> Callable[[Value], list[str]]:
    return lambda value: [flag] if value else []


def _option(flag: str) -> Callable[[Value], list[str]]:
    return lambda value: [] if value is None else [flag, str(value)]


def _option_unless(flag: str, default: Value) -> Callable[[Value], list[str]]:
    return lambda value: [] if value is None or value == default else [flag, str(value)]


def _tf_layout(value: Value) -> list[str]:
    return ["--data-format", "channels_last" if value else "channels_first"]


def _with_files(name: str, default: Value) -> Callable[[Mapping[str, Any], str], Value]:
    """An option of --data files: its value on runs that read files, None on the others."""
    return lambda flags, _: (flags.get(name) or default) if flags.get("data") == "files" else None


def _layout(flags: Mapping[str, Any], framework: str) -> Value:
    if framework == "tensorflow":
        return flags.get("data_format") == "channels_last"
    return bool(flags.get("channels_last"))


AXES: dict[str, Axis] = {axis.name: axis for axis in (
    Axis("batch_size", "samples per step per rank", int,
         {"pytorch": _option("--batch-size"), "tensorflow": _option("--batch-size")},
         lambda f, _: f.get("batch_size"), arities("--batch-size"), None),
    Axis("precision", "fp32, fp16, bf16, amp (TensorFlow also its Keras policies)", str,
         {"pytorch": _option("--precision"), "tensorflow": _option("--precision")},
         lambda f, _: f.get("precision") or "fp32", arities("--precision"), "fp32"),
    Axis("channels_last", "image layout of CNNs: NHWC (true) or NCHW", bool,
         {"pytorch": _switch("--channels-last"), "tensorflow": _tf_layout},
         _layout, arities("--channels-last", "--data-format"), False, shown=lambda on: "NHWC" if on else "NCHW"),
    Axis("compile", "torch.compile (PyTorch) or XLA (TensorFlow)", bool,
         {"pytorch": _switch("--compile"), "tensorflow": _switch("--xla")},
         lambda f, fw: bool(f.get("xla" if fw == "tensorflow" else "compile")), arities("--compile", "--xla"), False),
    Axis("data", "where batches come from: device, host, loader (PyTorch) or pipeline (TensorFlow)", str,
         {"pytorch": _option("--data"), "tensorflow": _option("--data")},
         lambda f, _: f.get("data") or "device", arities("--data"), "device"),
    Axis("fp16_allreduce", "Horovod fp16 compression of the exchanged gradients", bool,
         {"pytorch": _switch("--fp16-allreduce"), "tensorflow": _switch("--fp16-allreduce")},
         lambda f, _: bool(f.get("fp16_allreduce")), arities("--fp16-allreduce"), False),
    Axis("exchange", f"how gradients are exchanged (core/exchanges.py): {listed(tuple(EXCHANGES))}", str,
         {"pytorch": _option_unless("--exchange", DEFAULT), "tensorflow": _option_unless("--exchange", DEFAULT)},
         lambda f, _: f.get("exchange") or DEFAULT, arities("--exchange"), DEFAULT),
    Axis("threads", "CPU threads per rank (intra-op pool in TensorFlow)", int,
         {"pytorch": _option("--threads"), "tensorflow": _option("--threads")},
         lambda f, _: f.get("threads"), arities("--threads"), None),
    Axis("loader", "what reads --data files: " + "; ".join(f"{fw}: {', '.join(names)}" for fw, names in LOADERS.items())
         + " (core/loaders.py)", str,
         {fw: _option_unless("--loader", names[0]) for fw, names in LOADERS.items()},
         lambda f, fw: _with_files("loader", LOADERS.get(fw, LOADERS["pytorch"])[0])(f, fw), arities("--loader"),
         LOADERS["pytorch"][0],
         offered=LOADERS, files_only=True),
    Axis("loader_workers", "DataLoader workers (PyTorch) or tf.data parallel calls (TensorFlow) a rank reads with",
         int, {"pytorch": _option("--loader-workers"), "tensorflow": _option("--loader-workers")},
         lambda f, _: f.get("loader_workers"), arities("--loader-workers"), 2, least=0),
    Axis("data_dir", "the dataset --data files reads (a folder per layout: ImageFolder, WebDataset, TFRecord)", str,
         {"pytorch": _option("--data-dir"), "tensorflow": _option("--data-dir")},
         _with_files("data_dir", None), arities("--data-dir"), None, shown=lambda path: PurePath(str(path)).name,
         files_only=True),
    Axis("data_only", "--data files: the input pipeline timed alone, no model (what the loader gives a rank)", bool,
         {"pytorch": _switch("--data-only"), "tensorflow": _switch("--data-only")},
         lambda f, _: bool(f.get("data_only")), arities("--data-only"), False, files_only=True, compared=False),
    Axis("data_cache", f"the dataset's pages at the start: {', '.join(CACHE_MODES)} (core/pagecache.py)", str,
         {"pytorch": _option_unless("--data-cache", CACHE_MODES[0]),
          "tensorflow": _option_unless("--data-cache", CACHE_MODES[0])},
         _with_files("data_cache", CACHE_MODES[0]), arities("--data-cache"), CACHE_MODES[0], files_only=True),
)}


def base_flags() -> dict[str, int]:
    """The flags a run's independent twin and 1-GPU baseline leave out: those core/train_flags.py declares so
    (--independent) and every exchange's own (core/exchanges.py exchange_flags: one baseline serves every exchange)."""
    return {**flags_where("baseline"), **exchange_flags()}


def axis_flags(framework: str, values: Mapping[str, Value], args: Sequence[str] = (), benchmark: str = "") -> list[str]:
    """The benchmark flags of a set of axis values (in AXES order) for a run of ``benchmark`` and ``args``; the
    options of --data files only where the run reads files (``data`` files among the values, else in ``args``)."""
    reads = (values.get("data") or data_mode(benchmark, args)) == "files"
    out: list[str] = []
    for name, axis in AXES.items():
        if name in values and (reads or not axis.files_only):
            out += axis.to_flags[framework](values[name])
    return out


def data_mode(benchmark: str, args: Sequence[str]) -> str | None:
    """The --data value a run's arguments give, as its benchmark's parser reads them; None where they give none."""
    return (given_flags(benchmark, args) or {}).get("data")


def read_axes(flags: Mapping[str, Any] | None, args: Sequence[str], framework: str,
              benchmark: str = "") -> dict[str, Value]:
    """Every axis's value for a run: from its recorded flags (the env record), else from the flags its arguments
    give as its benchmark's parser reads them (an axis its arguments leave alone: its value as ``read`` says)."""
    if not flags:
        flags = dict(given_flags(benchmark, args) or _spelled(args))
    out = {name: axis.read(flags, framework) for name, axis in AXES.items()}
    for name, axis in AXES.items():
        if axis.kind is int and out[name] is not None:
            out[name] = int(out[name]) if str(out[name]).isdigit() else None
    return out


def _spelled(args: Sequence[str]) -> dict[str, Any]:
    """The axes' flags as arguments no benchmark parser here reads spell them (an imported run's)."""
    return {flag.lstrip("-").replace("-", "_"): flag_value(args, flag, arity)
            for axis in AXES.values() for flag, arity in axis.flags.items()}
