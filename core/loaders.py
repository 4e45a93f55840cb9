"""The loaders that read ``--data files``, declared once: each one's name, framework, the dataset kinds and layouts
it reads, what it is, and the class of its batches (a rank imports it by name, so nothing here needs a framework).
``--loader``'s choices and help, the sweep's ``loader`` axis, the checks before a run, a rank's choice of class and
the name its records carry all read this table; every loader's summary carries the one record ``data_record``
makes. A new loader is a row here and its batches class (CONTRIBUTING). Importable without a framework."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Any, Mapping, Protocol, Sequence

ALIASES = {"tf.data": "tfdata"}  # names older runs recorded, and what they are now


class Batches(Protocol):
    """What a loader's class gives a rank: the next batch with what reading it took (``input_wait_s``,
    ``bytes_read``, and ``samples`` where the batch's rows do not say), and the summary's ``data`` record."""

    def next(self) -> tuple[Any, dict[str, float]]: ...

    def facts(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Loader:
    """One loader: its name, its framework, the dataset kinds and layouts it reads, what it is (``--loader``'s
    help), its batches class as ``module:Class``, and whether a run to a quality target trains from it (its
    held-out set evaluated alike: suite/heldout.py)."""

    name: str
    framework: str
    kinds: tuple[str, ...]
    layouts: tuple[str, ...]
    meaning: str
    batches: str
    to_target: bool = False

    def batches_class(self) -> type:
        """Its batches class, imported (the rank's framework with it)."""
        module, _, name = self.batches.partition(":")
        return getattr(import_module(module), name)

    def problem(self, kind: str | None, files: bool) -> str | None:
        """Why it cannot serve this run (None: it can): it reads files, of its kinds."""
        if not files or kind is None:
            return f"--loader {self.name} reads files: a workload that reads {'/'.join(self.kinds)} with --data files"
        if kind not in self.kinds:
            return f"--loader {self.name} reads {'/'.join(self.kinds)} files, not {kind}'s"
        return None


IN_MEMORY = "memory"  # what a rank records as its loader where the whole dataset was read into memory first
LOADERS: dict[str, Loader] = {loader.name: loader for loader in (
    Loader("torch", "pytorch", ("imagenet", "speech", "translation"), ("folder", "webdataset"),
           "PyTorch's DataLoader (Pillow's decoder in its workers)", "hvdbench.suite.filedata:FileBatches",
           to_target=True),
    Loader("dali", "pytorch", ("imagenet",), ("folder", "webdataset"),
           "NVIDIA DALI (its decoder on the GPU where there is one)", "hvdbench.suite.dalidata:DaliBatches"),
    Loader("tfdata", "tensorflow", ("imagenet",), ("folder", "tfrecord"),
           "tf.data (tf.io.decode_jpeg, prefetched to the device)", "hvdbench.suite.tffiledata:TFFileFeed"),
)}


def loaders_of(framework: str) -> tuple[str, ...]:
    """The loaders of a framework, its default first (the first declared)."""
    return tuple(name for name, loader in LOADERS.items() if loader.framework == framework)


def loader_named(name: Any) -> Any:
    """A recorded loader's name as the table names it now (an alias older runs wrote: ``tf.data``); anything that is
    no name (nothing recorded) as it is."""
    return ALIASES.get(name, name) if isinstance(name, str) else name


def loader_help(framework: str) -> str:
    """``--loader``'s help: each of the framework's loaders and what it reads."""
    return "with --data files: " + "; ".join(
        f"{name}: {LOADERS[name].meaning} ({', '.join(LOADERS[name].kinds)})" for name in loaders_of(framework))


def data_record(index: Any, loader: str, *, read: int, nbytes: int, corrupt: int, named: Sequence[str], wait_s: float,
                cache: Mapping[str, Any], shard: str, counted: bool = True) -> dict[str, Any]:
    """The summary's ``data`` record, the same fields for every loader (core/schema.py's summary declares them):
    the dataset (its folder, layout, kind, samples and bytes), who read it, what reading came to, the page cache at
    the start and how the rank's shard is drawn (``counted``: the index counts samples; TFRecords' it does not)."""
    return {"data": {"dir": str(index.root), "layout": index.layout, "kind": index.kind, "loader": loader_named(loader),
                     "samples": len(index) if counted else None, "dataset_bytes": index.bytes,
                     "read": read, "bytes": nbytes, "corrupt": corrupt, "corrupt_named": list(named),
                     "wait_s": wait_s, **cache, "shard": shard}}
