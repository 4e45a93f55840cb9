"""TensorFlow's backend of the harness: Horovod init, device pinning, the Keras dtype policy, the
training step as ``tf.function``s, the gradient exchange, synthetic data placement; the rank sequence
itself is ``harness.main``.

A benchmark script supplies ``build(TFBuildContext) -> KerasWorkload`` and calls ``main``. The step is
three functions: compute (forward, loss, backward; ``jit_compile`` under ``--xla``), exchange
(``hvd.grouped_allreduce`` of the gradients, outside any compiled function) and apply (the optimizer).
Horovod 0.28's ``DistributedGradientTape`` cannot read Keras 3 variables, so the tape is a plain one.
"""

from __future__ import annotations

import argparse
import itertools
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow loads: no banner per rank
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

from hvdbench.core.environment import gloo_on_loopback  # noqa: E402
from hvdbench.core.flags import check_device  # noqa: E402
from hvdbench.core.gpu import refuse_unseen_gpus  # noqa: E402
from hvdbench.core.gpu_choice import GpuChoice, choose_gpu  # noqa: E402
from hvdbench.core.records import RecordWriter  # noqa: E402
from . import harness  # noqa: E402
from .tf_mirrored import local_value, start_strategy  # noqa: E402
from .timing import HorovodObjects, StepOutcome  # noqa: E402

HostBatch = tuple[np.ndarray, ...]
MakeBatch = Callable[[np.random.Generator], HostBatch]
# TensorFlow's exchanges (core/exchanges.py offered("tensorflow")): the strategy each starts before TensorFlow's first
# operation, or None where Horovod's optimizer exchanges inside the harness's own step
STRATEGIES: dict[str, Callable[..., tuple[Any, dict]] | None] = {"horovod": None, "mirrored": start_strategy}


@dataclass
class KerasWorkload:
    """What a benchmark supplies: a built Keras model, a maker of synthetic host batches, a loss of
    (model, batch) traced inside the tape, and what a batch counts (default: its rows as samples)."""

    model: keras.Model
    make_batch: MakeBatch
    loss: Callable[[keras.Model, tuple[tf.Tensor, ...]], tf.Tensor]
    count: Callable[[HostBatch], dict[str, float]] | None = None
    distinct_batches: int = 1  # >1 where batches differ (lengths)
    files: Any = None  # with --data files: how to make its feed (flags, rank, size, device) -> a TFFileFeed


@dataclass(frozen=True)
class TFBuildContext:
    """What a build function is given: the flags, this rank, and the image layout in force."""

    flags: argparse.Namespace
    rank: int
    size: int
    data_format: str

    def image_shape(self, side: int, channels: int = 3) -> tuple[int, int, int]:
        """One image's shape in the layout in force."""
        return (channels, side, side) if self.data_format == "channels_first" else (side, side, channels)


def keras_policy(precision: str, gpu: bool) -> str:
    """The Keras dtype policy for --precision (amp: mixed float16 on a GPU, mixed bfloat16 on the CPU)."""
    if precision == "amp":
        return "mixed_float16" if gpu else "mixed_bfloat16"
    return {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}.get(precision, precision)


class TFRuntime(HorovodObjects):
    """Horovod's view of this rank; ``sync`` reads a value back from the device."""

    def __init__(self, hvd: Any) -> None:
        self.hvd = hvd
        self.rank, self.local_rank = hvd.rank(), hvd.local_rank()
        self.size, self.local_size = hvd.size(), hvd.local_size()
        self.fence: Callable[[], Any] = lambda: None
        self._barriers = itertools.count()

    def barrier(self) -> None:
        # horovod.tensorflow 0.28 has no barrier; a scalar allreduce waits for every rank just the same
        self.hvd.allreduce(tf.constant(0.0), op=self.hvd.Sum, name=f"hvdbench.barrier.{next(self._barriers)}").numpy()

    def sync(self) -> None:
        self.fence()



def pin_device(choice: str, local_rank: int, nvml_module: Any = None) -> tuple[str, GpuChoice | None]:
    """Make only this rank's GPU (core/gpu_choice.py) visible to TensorFlow, growing memory, or hide
    every GPU; the device and the GPU choice (None on the CPU). ``auto`` on a node whose GPUs TensorFlow
    cannot see is refused rather than measured on the CPU (``nvml_module`` stands in for pynvml)."""
    gpus = tf.config.list_physical_devices("GPU")
    if choice != "cpu" and not gpus:
        build = (f"TensorFlow {tf.__version__} cannot use them (its CUDA libraries missing? pip install "
                 "'tensorflow[and-cuda]')" if tf.test.is_built_with_cuda()
                 else f"TensorFlow {tf.__version__} is a build without CUDA")
        refuse_unseen_gpus(choice, build, nvml_module)
    if choice == "cpu" or not gpus:
        tf.config.set_visible_devices([], "GPU")
        return "/CPU:0", None
    gpu = choose_gpu(local_rank, count=len(gpus))
    tf.config.set_visible_devices(gpus[gpu.cuda_index], "GPU")
    tf.config.experimental.set_memory_growth(gpus[gpu.cuda_index], True)
    return "/GPU:0", gpu


def set_threads(flags: argparse.Namespace, local_size: int) -> dict[str, int | None]:
    """TensorFlow's intra-op pool (--threads, or the node's cores shared among its ranks) and inter-op pool."""
    intra = flags.threads or max(1, (os.cpu_count() or 1) // local_size)
    tf.config.threading.set_intra_op_parallelism_threads(intra)
    if flags.inter_op_threads:
        tf.config.threading.set_inter_op_parallelism_threads(flags.inter_op_threads)
    return {"intra_op": intra, "inter_op": flags.inter_op_threads}


def device_info(device: str) -> dict[str, Any]:
    """TensorFlow's version, build (CUDA/cuDNN) and view of the device this rank trains on."""
    build = {k: v for k, v in tf.sysconfig.get_build_info().items() if isinstance(v, (str, bool, int))}
    info: dict[str, Any] = {"type": "cuda" if "GPU" in device else "cpu", "tensorflow": tf.__version__,
                            "keras": keras.__version__, "build": build}
    if "GPU" in device:
        gpu = tf.config.get_visible_devices("GPU")[0]
        details = tf.config.experimental.get_device_details(gpu)
        info.update(name=details.get("device_name"),
                    capability=".".join(map(str, details.get("compute_capability", ()))))
    return info


class BatchFeed:
    """Synthetic batches: a pool resident on the device (``device``), host arrays copied each step
    (``host``), or a ``tf.data`` pipeline with prefetch to the device (``pipeline``)."""

    def __init__(self, mode: str, workload: KerasWorkload, device: str, seed: int, workers: int) -> None:
        rng = np.random.default_rng(seed)
        self.host = [workload.make_batch(rng) for _ in range(workload.distinct_batches)]
        count = workload.count or (lambda b: {"samples": float(b[0].shape[0])})
        self.counts = [count(b) for b in self.host]
        self.mode, self.device, self._index = mode, device, itertools.cycle(range(len(self.host)))
        with tf.device(device):
            self.resident = [tuple(tf.identity(a) for a in b) for b in self.host] if mode == "device" else []
        self._stream: Iterator[Any] | None = None
        if mode == "pipeline":
            signature = (tf.TensorSpec((), tf.int32),
                         tuple(tf.TensorSpec((None,) * a.ndim, tf.as_dtype(a.dtype)) for a in self.host[0]))
            pool = self.host
            data = tf.data.Dataset.from_generator(lambda: ((i, pool[i]) for i in itertools.cycle(range(len(pool)))),
                                                  output_signature=signature)
            data = data.map(lambda i, b: (i, b), num_parallel_calls=max(1, workers))
            if "GPU" in device:
                data = data.apply(tf.data.experimental.prefetch_to_device(device, buffer_size=2))
            self._stream = iter(data.prefetch(tf.data.AUTOTUNE))

    def next(self) -> tuple[tuple[tf.Tensor, ...], dict[str, float]]:
        """The next batch on the device and what it counts."""
        if self._stream is not None:
            index, batch = next(self._stream)
            return tuple(batch), self.counts[int(index)]
        i = next(self._index)
        if self.mode == "device":
            return self.resident[i], self.counts[i]
        with tf.device(self.device):
            return tuple(tf.convert_to_tensor(a) for a in self.host[i]), self.counts[i]


def to_wire(tensor: tf.Tensor) -> tf.Tensor:
    """What Horovod can carry: bfloat16 goes as float32 (Horovod 0.28 has no bfloat16 collectives)."""
    return tf.cast(tensor, tf.float32) if tensor.dtype == tf.bfloat16 else tensor


def from_wire(tensor: tf.Tensor, dtype: tf.DType) -> tf.Tensor:
    """Back to the variable's or gradient's own dtype."""
    return tf.cast(tensor, dtype) if tensor.dtype != dtype else tensor


class KerasTrainer:
    """One rank's model, optimizer and batches; ``step`` trains one step, ``breakdown_step`` times its parts."""

    def __init__(self, hvd: Any, workload: KerasWorkload, flags: argparse.Namespace, device: str, seed: int,
                 strategy: Any = None, strategy_facts: dict[str, Any] | None = None) -> None:
        self.hvd, self.workload, self.flags, self.device = hvd, workload, flags, device
        self.strategy = strategy  # --exchange mirrored: TensorFlow's strategy exchanges inside the optimizer's step
        self.model = workload.model
        self.variables = list(self.model.trainable_variables)
        self.parameters = int(sum(np.prod(v.shape) for v in self.variables))
        self.gradient_tensors = len(self.variables)
        self.gradient_sizes = [int(np.prod(v.shape)) for v in self.variables][::-1]  # backward: last layer first
        optimizer: Any = keras.optimizers.SGD(learning_rate=flags.lr, momentum=0.9)
        if keras.mixed_precision.dtype_policy().name == "mixed_float16":
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        optimizer.build(self.variables)
        self.optimizer = optimizer
        self.distributed = not flags.independent and strategy is None  # through Horovod
        self.facts = {"exchange": strategy_facts or {"name": "horovod" if self.distributed else "none"}}
        self.unit: str | None = None  # the catalog's
        self.compression = hvd.Compression.fp16 if flags.fp16_allreduce else hvd.Compression.none
        if self.distributed:  # every variable exists now, so one broadcast before the first step suffices
            everything = list(self.model.variables) + list(optimizer.variables)
            tf.function(lambda: self._broadcast(everything))()
        self.feed: Any = workload.files(flags, hvd.rank(), hvd.size(), device) \
            if flags.data == "files" and workload.files is not None else \
            BatchFeed(flags.data, workload, device, seed, flags.loader_workers)
        self.compute = tf.function(self._compute, jit_compile=flags.xla, reduce_retracing=True)
        self.exchange = tf.function(self._exchange)
        self.apply = tf.function(self._apply)
        self.replicated = tf.function(lambda batch: strategy.run(self._replica_step, args=(batch,))) \
            if strategy is not None else None
        smallest = min(self.variables, key=lambda v: int(np.prod(v.shape)))
        self.fence = lambda: smallest.value.numpy()

    def _compute(self, batch: tuple[tf.Tensor, ...]) -> tuple[tf.Tensor, list[tf.Tensor]]:
        with tf.GradientTape() as tape:
            loss = self.workload.loss(self.model, batch)
            scaled = self.optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, self.variables)
        return loss, [g if g is not None else tf.zeros_like(v.value) for g, v in zip(grads, self.variables)]

    def _broadcast(self, variables: list[Any]) -> None:
        for i, var in enumerate(variables):
            value = var.value
            var.assign(from_wire(self.hvd.broadcast(to_wire(value), root_rank=0, name=f"hvdbench.init.{i}"),
                                 value.dtype))

    def _exchange(self, grads: list[tf.Tensor]) -> list[tf.Tensor]:
        summed = self.hvd.grouped_allreduce([to_wire(g) for g in grads], op=self.hvd.Average,
                                            compression=self.compression)
        return [from_wire(s, g.dtype) for s, g in zip(summed, grads)]

    def _apply(self, grads: list[tf.Tensor]) -> None:
        self.optimizer.apply_gradients(zip(grads, self.variables))

    def _replica_step(self, batch: tuple[tf.Tensor, ...]) -> tf.Tensor:
        """One replica's step under the strategy: its own loss, backward, and the optimizer's step, in which Keras
        all-reduces the gradients to their mean over the replicas (as Horovod's Average: the two end a run with
        the same parameters)."""
        with tf.GradientTape() as tape:
            loss = self.workload.loss(self.model, batch)
            scaled = self.optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, self.variables)
        self.optimizer.apply_gradients(zip(grads, self.variables))
        return loss

    def step(self) -> StepOutcome:
        """One training step on this rank's device: batch, compute, exchange (unless independent), apply."""
        if self.strategy is not None and self.replicated is not None:  # the strategy places the step on its worker
            batch, counts = self.feed.next()
            return StepOutcome(local_value(self.strategy, self.replicated(batch)), counts)
        with tf.device(self.device):
            return self._step()

    def _step(self) -> StepOutcome:
        batch, counts = self.feed.next()
        loss, grads = self.compute(batch)
        if self.distributed:
            grads = self.exchange(grads)
        self.apply(grads)
        return StepOutcome(loss, counts)

    def breakdown_step(self, sync: Callable[[], None]) -> StepOutcome:
        """One step with compute (forward and backward together), exchange and optimizer each ended by a read-back."""
        with tf.device(self.device):
            return self._breakdown_step(sync)

    def _breakdown_step(self, sync: Callable[[], None]) -> StepOutcome:
        marks = [time.perf_counter()]
        batch, counts = self.feed.next()
        loss, grads = self.compute(batch)
        loss.numpy()
        grads[-1].numpy()
        marks.append(time.perf_counter())
        if self.distributed:
            grads = self.exchange(grads)
            grads[-1].numpy()
        marks.append(time.perf_counter())
        self.apply(grads)
        sync()
        marks.append(time.perf_counter())
        names = ("compute", "exchange", "optimizer")
        return StepOutcome(loss, counts, {n: b - a for n, a, b in zip(names, marks, marks[1:])})

    def data_step(self) -> StepOutcome:
        """The input pipeline alone (--data-only): the next batch on the device, no model."""
        batch, counts = self.feed.next()
        batch[0].numpy()
        return StepOutcome(tf.zeros(()), counts)

    def data_facts(self) -> dict[str, Any]:
        """What reading files came to (the summary's ``data``); nothing for synthetic batches."""
        return self.feed.facts() if hasattr(self.feed, "facts") else {}

    def checksum(self) -> float:
        """Sum of every trainable variable: equal on all ranks when gradients are exchanged."""
        return float(sum(np.asarray(v.value.numpy(), dtype=np.float64).sum() for v in self.variables))

    def close(self) -> None:
        """Nothing to release: Horovod is the only exchange here."""


def peak_memory(device: str) -> dict[str, int]:
    """Peak device memory TensorFlow allocated (GPU) or the process's peak resident set (CPU), in bytes."""
    if "GPU" in device:
        return {"peak_device_bytes": int(tf.config.experimental.get_memory_info("GPU:0")["peak"])}
    return {"peak_rss_bytes": harness.peak_rss_bytes()}


def profile(trainer: KerasTrainer, runtime: TFRuntime, writer: RecordWriter, steps: int, log_dir: Path) -> None:
    """Profile extra steps with TensorFlow's profiler; the trace directory beside the log (TensorBoard reads it)."""
    trace = log_dir / f"tf-profile-rank{runtime.rank}"
    tf.profiler.experimental.start(str(trace))
    try:
        for _ in range(steps):
            trainer.step()
            runtime.sync()
    finally:
        tf.profiler.experimental.stop()
    writer.write("profile", steps=steps, trace=trace.name, sort_by=None, top=[])


def configure(flags: argparse.Namespace, device: str) -> dict[str, Any]:
    """The dtype policy and image layout, set before the model is built; what was chosen."""
    gpu = "GPU" in device
    check_device(flags, on_gpu=gpu)
    data_format = flags.data_format or ("channels_first" if gpu else "channels_last")
    policy = keras_policy(flags.precision, gpu)
    keras.mixed_precision.set_global_policy(policy)
    keras.config.set_image_data_format(data_format)
    keras.utils.set_random_seed(flags.seed)
    return {"policy": policy, "data_format": data_format, "xla": flags.xla}


def math_settings(flags: argparse.Namespace, device: str) -> dict[str, Any] | None:
    """cuDNN autotuning (TF_CUDNN_USE_AUTOTUNE, read at the first convolution: set before the model runs) and
    TF32 execution of fp32 products, as set for this run on a GPU (None on the CPU)."""
    if "GPU" not in device:
        return None
    if not flags.cudnn_autotune:
        os.environ["TF_CUDNN_USE_AUTOTUNE"] = "0"
    autotune = os.environ.get("TF_CUDNN_USE_AUTOTUNE", "1").lower() not in ("0", "false")
    tf32 = bool(tf.config.experimental.tensor_float_32_execution_enabled())
    return {"cudnn_autotune": autotune, "tf32_matmul": tf32, "tf32_convolution": tf32}


class TFBackend:
    """TensorFlow's part of the harness (see ``harness.Backend``)."""

    framework = "tensorflow"
    choice: GpuChoice | None = None

    strategy: tuple[Any, dict[str, Any] | None] = (None, None)  # --exchange mirrored's, and its facts

    def init(self) -> Any:
        import horovod.tensorflow as hvd

        gloo_on_loopback()
        hvd.init()
        self.hvd = hvd
        return hvd

    def prepare(self, flags: argparse.Namespace, local_rank: int, local_size: int) -> tuple[str, dict[str, int | None]]:
        """Threads and device; under --exchange mirrored the strategy too, before TensorFlow's first operation."""
        threads = set_threads(flags, local_size)
        device, self.choice = pin_device(flags.device, local_rank)  # TensorFlow calls it /GPU:0
        start = STRATEGIES[flags.exchange]
        if start is not None and not flags.independent:
            self.strategy = start(flags.log_dir, self.hvd.rank(), self.hvd.size(), self.hvd.cross_size() == 1,
                                  "GPU" in device)
        return device, threads

    def runtime(self, hvd: Any, device: str | None) -> TFRuntime:
        return TFRuntime(hvd)

    def on_gpu(self, device: str) -> bool:
        return "GPU" in device

    def device_index(self, device: str) -> int:
        return self.choice.cuda_index if self.choice is not None else 0


    def device_info(self, device: str) -> dict[str, Any]:
        return device_info(device)

    def configure(self, flags: argparse.Namespace, device: str) -> dict[str, Any]:
        return {"tensorflow": configure(flags, device), "math": math_settings(flags, device)}

    def trainer(self, build: Callable[[TFBuildContext], KerasWorkload], session: harness.Session) -> KerasTrainer:
        runtime, flags, device = session.runtime, session.flags, session.device
        strategy, facts = self.strategy
        with strategy.scope() if strategy is not None else tf.device(device):
            workload = build(TFBuildContext(flags, runtime.rank, runtime.size, keras.config.image_data_format()))
            trainer = KerasTrainer(session.hvd, workload, flags, device, flags.seed + 1 + runtime.rank, strategy,
                                   facts)
        runtime.fence = trainer.fence  # type: ignore[attr-defined]
        return trainer

    def loss_value(self, loss: tf.Tensor) -> float:
        return float(tf.cast(loss, tf.float32).numpy())

    def profile(self, trainer: KerasTrainer, session: harness.Session, steps: int) -> None:
        profile(trainer, session.runtime, session.writer, steps, session.log_dir)  # type: ignore[arg-type]

    def peak_memory(self, device: str) -> dict[str, int]:
        return peak_memory(device)


def main(name: str, build: Callable[[TFBuildContext], KerasWorkload], argv: Sequence[str] | None = None) -> int:
    """Run one TensorFlow benchmark on this rank (the harness's sequence). Returns the exit status."""
    return harness.main(name, TFBackend(), build, argv)
