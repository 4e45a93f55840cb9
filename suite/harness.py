"""The harness: one rank's whole sequence, once, for every framework.

Parse the flags; start Horovod; pin the device and CPU threads; open the run directory, run.json and
this rank's log; find the GPU's NVML handle; build the workload and its trainer; record the
environment; time the steps (``timing.py``) with telemetry sampled beside them; profile; write the
summary. A framework supplies only a small :class:`Backend` (``pytorch.py``, ``tfharness.py``) and each
benchmark script a ``build`` function. Any failure after Horovod starts becomes an error record and one
line on stderr, and the rank exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, Sequence

from hvdbench.core.run_flags import without
from hvdbench.core.catalog import BenchmarkInfo, get_benchmark
from hvdbench.core.environment import base_environment
from hvdbench.core.errors import SpecError, UsageError
from hvdbench.core.gpu import DEVICE_ORDER, Nvml, TelemetrySampler, telemetry_for, visible_device
from hvdbench.core.gpu_choice import GpuChoice, choice_record, shared_gpu_problem
from hvdbench.core.nccl_env import info_variables
from hvdbench.core.node_power import NodePower
from hvdbench.core.node_topology import gpu_nics
from hvdbench.core.quality_flags import to_target
from hvdbench.core.records import RecordWriter, rank_log_name
from hvdbench.core.spec import RANK_FILES, RUN_FILE, RunFolder, RunSpec, keep_earlier_attempt
from .flops import flops_of
from .timing import Runtime, StepOutcome, measure
from .to_target import measure_to_target

_LOCAL_FLAGS = {"--log-dir": 1, "--echo-records": 0}


@dataclass(frozen=True)
class Invocation:
    """A benchmark script's start: its catalog entry, arguments, checked flags and run label."""

    info: BenchmarkInfo
    argv: list[str]
    flags: argparse.Namespace
    label: str


def invocation(name: str, argv: Sequence[str] | None) -> Invocation:
    """Parse and check the command line (sys.argv by default); a bad one exits 2 with one line."""
    info = get_benchmark(name)
    args = list(sys.argv[1:] if argv is None else argv)
    flags = info.parse_or_exit(args)
    return Invocation(info, args, flags, f"{name}-{flags.model}")


def benchmark_args(argv: Sequence[str]) -> tuple[str, ...]:
    """The arguments that define the measurement: argv without where-to-log flags."""
    return without(argv, _LOCAL_FLAGS)


def resolve_log_dir(runtime: Runtime, flags: argparse.Namespace, label: str) -> Path:
    """The run directory: --log-dir, or one new directory that rank 0 names for all ranks."""
    if flags.log_dir:
        return Path(flags.log_dir)
    name = f"{label}-{time.strftime('%Y%m%d-%H%M%S')}" if runtime.rank == 0 else None
    return Path("hvdbench-logs") / runtime.broadcast_object(name)


def prepare_run_dir(runtime: Runtime, log_dir: Path, spec: RunSpec) -> str:
    """Rank 0 writes run.json where no launcher did (a standalone run describes itself) and moves rank
    logs an earlier attempt left there into attempt-N/ (a rerun never deletes what was measured); every
    rank learns the run's id, which its env record carries."""
    run_id = None
    if runtime.rank == 0:
        if not (log_dir / RUN_FILE).exists():
            spec.write(log_dir)
        keep_earlier_attempt(log_dir, RANK_FILES)  # the launcher's own files of this attempt stay
        try:
            run_id = RunSpec.read(log_dir / RUN_FILE).id
        except SpecError:
            run_id = spec.id
    return str(runtime.broadcast_object(run_id))


def open_writer(runtime: Runtime, log_dir: Path, echo: bool) -> RecordWriter:
    """This rank's record file."""
    log_dir.mkdir(parents=True, exist_ok=True)
    return RecordWriter(log_dir / rank_log_name(runtime.rank), rank=runtime.rank, local_rank=runtime.local_rank,
                        size=runtime.size, echo=sys.stdout if echo else None)


@contextlib.contextmanager
def rank_logging(runtime: Runtime, *, benchmark: str, framework: str, controller: str,
                 flags: argparse.Namespace, argv: Sequence[str],
                 label: str) -> Iterator[tuple[Path, RecordWriter, str]]:
    """The run directory, run.json and this rank's log, for any framework.

    Any failure inside becomes an error record and one line on stderr, and the process exits 1 at
    once: peers may wait in a collective that will never come, and the launcher ends them.
    """
    writer = None
    try:
        log_dir = resolve_log_dir(runtime, flags, label)
        hosts = len(set(runtime.allgather_object(os.uname().nodename)))
        run_id = prepare_run_dir(runtime, log_dir, RunSpec(
            benchmark=benchmark, framework=framework, args=benchmark_args(argv), np=runtime.size,
            nodes=hosts if runtime.size % hosts == 0 else 1, launcher="external", controller=controller))
        writer = open_writer(runtime, log_dir, flags.echo_records)
        yield log_dir, writer, run_id
    except Exception as exc:
        message = error_line(exc)
        if writer is not None:
            writer.write("error", error=type(exc).__name__, message=message, traceback=traceback.format_exc(limit=8))
            writer.close()
        print(f"error: rank {runtime.rank}: {message}", file=sys.stderr, flush=True)
        os._exit(1)
    finally:
        if writer is not None:
            writer.close()


def horovod_info(hvd: Any) -> dict[str, Any]:
    """Horovod's version, what it was built with, and which controller this job runs on."""
    import horovod

    def flag(name: str) -> bool | None:
        func = getattr(hvd, name, None)
        try:
            return bool(func()) if func is not None else None
        except Exception:  # a query that needs init or a backend that is absent
            return None

    # Which framework plugins were built: their libraries on disk (importing another plugin here
    # would load its framework and a second Horovod core into this rank).
    package = Path(horovod.__file__).parent
    frameworks = {name: any(package.joinpath(sub).glob("mpi_lib*.so"))
                  for name, sub in (("pytorch", "torch"), ("tensorflow", "tensorflow"), ("mxnet", "mxnet"))}
    return {
        "version": horovod.__version__,
        "frameworks": frameworks,
        "built": {name: flag(f"{name}_built") for name in ("mpi", "gloo", "nccl", "cuda", "rocm", "ddl", "ccl")},
        "nccl_version": nccl_version_text(_call(hvd, "nccl_built")),
        "controller": "mpi" if flag("mpi_enabled") else "gloo" if flag("gloo_enabled") else None,
        "mpi_threads_supported": flag("mpi_threads_supported"),
        "layout": {name: _call(hvd, name) for name in ("local_size", "cross_rank", "cross_size")},
    }


def _call(hvd: Any, name: str) -> int | None:
    """One of Horovod's rank-layout queries, or None where this Horovod lacks it."""
    try:
        return int(getattr(hvd, name)())
    except Exception:  # absent in this version, or not initialised
        return None


def nccl_version_text(code: int | None) -> str | None:
    """NCCL's version code as Horovod reports it (``hvd.nccl_built()``: NCCL_VERSION_CODE, 0 without NCCL) in
    words: 22809 is 2.28.9 (major x 10000 + minor x 100 + patch since NCCL 2.9), 2708 is 2.7.8 (x 1000 before)."""
    if not code or code < 0:
        return None
    major, rest = divmod(code, 10000) if code >= 10000 else divmod(code, 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def error_line(exc: BaseException) -> str:
    """One line that names the problem: the exception's first line, or its last where the first is only
    a heading (TensorFlow's "in user code:")."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    return lines[-1] if lines[0].endswith(":") and len(lines) > 1 else lines[0]


def peak_rss_bytes() -> int:
    """The process's peak resident set, in bytes."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024




class Trainer(Protocol):
    """One rank's model, optimizer and batches, as a framework builds them."""

    parameters: int  # trainable parameters
    gradient_tensors: int  # trainable tensors: what Horovod allreduces, one per tensor before fusion
    gradient_sizes: list[int]  # their element counts, in the order backward produces them
    facts: dict[str, Any]  # env-record fields of its own: how gradients are exchanged
    unit: str | None  # what a sample is where the workload says (a model file's UNIT), else None: the catalog's

    def step(self) -> StepOutcome:
        """One training step (the exchange overlapped as the framework does it)."""

    def breakdown_step(self, sync: Callable[[], None]) -> StepOutcome:
        """One step with each part bounded by a sync, its phase times in the outcome."""

    def data_step(self) -> StepOutcome:
        """One batch read and moved to the device, nothing trained (``--data-only``: the input pipeline alone)."""

    def checksum(self) -> float:
        """Sum of every parameter: equal on all ranks when gradients are exchanged."""

    def close(self) -> None:
        """Release what the trainer started beside Horovod (a process group)."""


class Backend(Protocol):
    """What a framework supplies to the harness."""

    framework: str
    choice: GpuChoice | None  # the GPU ``prepare`` pinned and why (core/gpu_choice.py), None on the CPU

    def init(self) -> Any:
        """Import this framework's Horovod, ``init()`` it and return the module."""

    def prepare(self, flags: argparse.Namespace, local_rank: int, local_size: int) -> tuple[Any, Any]:
        """Pin this rank's device and set its CPU threads, before any collective (TensorFlow fixes both
        at its first op); returns the device and the threads to record."""

    def runtime(self, hvd: Any, device: Any) -> Runtime:
        """The timed loop's view of Horovod and the device (``device`` None where pinning failed)."""

    def on_gpu(self, device: Any) -> bool:
        """Whether the device is a GPU."""

    def device_index(self, device: Any) -> int:
        """The CUDA index (among the visible devices) of the rank's GPU."""

    def device_info(self, device: Any) -> dict[str, Any]:
        """The framework's view of the device: type, name, capability, bus id, versions."""

    def configure(self, flags: argparse.Namespace, device: Any) -> dict[str, Any]:
        """Precision, layout and seeds, set before the model is built; extra env-record fields."""

    def trainer(self, build: Callable[[Any], Any], session: "Session") -> Trainer:
        """The workload built by the benchmark's ``build`` and its trainer."""

    def loss_value(self, loss: Any) -> float:
        """A step's loss as a float (read after the device sync)."""

    def profile(self, trainer: Any, session: "Session", steps: int) -> None:
        """Profile extra steps of the trainer this backend made; write a ``profile`` record and the trace beside
        the log."""

    def peak_memory(self, device: Any) -> dict[str, int]:
        """Peak device memory (GPU) or peak resident set (CPU), as summary fields."""


@dataclass
class Session:
    """One rank's Horovod, run directory, record writer, pinned device, threads and NVML handle."""

    backend: Backend
    hvd: Any
    runtime: Runtime
    flags: argparse.Namespace
    writer: RecordWriter
    log_dir: Path
    device: Any
    threads: Any
    nvml: Nvml
    gpu_handle: Any
    run_id: str
    node_power: NodePower | None = None  # local rank 0: the node's CPU and DRAM power (RAPL), the BMC's reading

    def environment(self) -> dict[str, Any]:
        """The env record's common fields: run id, device, NVML, GPU, Horovod, host, MPI and variables."""
        return {"run_id": self.run_id, "device": self.backend.device_info(self.device), "nvml": self.nvml.driver(),
                "gpu": self.nvml.static(self.gpu_handle) if self.gpu_handle is not None else None,
                "gpu_choice": self.backend.choice.record() if self.backend.choice is not None
                else choice_record(self.runtime.local_rank),
                "gpu_nics": gpu_nics(self.backend.choice.physical) if self.backend.choice is not None else None,
                **({"horovod": None, "torchrun": self.hvd.info()} if getattr(self.hvd, "without_horovod", False)
                   else {"horovod": horovod_info(self.hvd)}), **base_environment(),
                "node_power": self.node_power.facts() if self.node_power is not None else None}

    def sampler(self) -> TelemetrySampler:
        """Telemetry of this rank's GPU (or its process) every --telemetry-interval seconds."""
        node = self.node_power.sample if self.node_power is not None else None
        sample, note = telemetry_for(self.nvml, self.gpu_handle, node)
        return TelemetrySampler(self.writer, self.flags.telemetry_interval, sample, note)


@contextlib.contextmanager
def rank_session(backend: Backend, info: BenchmarkInfo, flags: argparse.Namespace, argv: Sequence[str],
                 label: str) -> Iterator[Session]:
    """Horovod init, device and threads, the run directory and run.json, this rank's log, NVML; a
    failure inside is an error record and exit status 1 (see ``rank_logging``). CUDA numbers GPUs in PCI
    bus order, as NVML and nvidia-smi (and so placements) do, unless the user set CUDA_DEVICE_ORDER."""
    os.environ.setdefault("CUDA_DEVICE_ORDER", DEVICE_ORDER)
    hvd = backend.init()
    early: Exception | None = None
    device, threads = None, None
    try:
        device, threads = backend.prepare(flags, hvd.local_rank(), hvd.local_size())
    except Exception as exc:  # noqa: BLE001 - re-raised below, inside the error-recording session
        early = exc
    runtime = backend.runtime(hvd, device)
    with rank_logging(runtime, benchmark=info.name, framework=info.framework,
                      controller=hvd.controller if getattr(hvd, "without_horovod", False)
                      else "mpi" if hvd.mpi_enabled() else "gloo",
                      flags=flags, argv=argv, label=label) as (log_dir, writer, run_id):
        if early is not None:
            raise early
        if backend.on_gpu(device):  # before NCCL's first communicator: its INFO output to a file of this rank's
            os.environ.update(info_variables(os.environ, RunFolder(log_dir).nccl_log(runtime.rank)))
        nvml = Nvml()
        gpu = backend.device_info(device).get("pci_bus_id") if backend.on_gpu(device) else None
        handle = nvml.handle(gpu, visible_device(backend.device_index(device))) if backend.on_gpu(device) else None
        refuse_shared_gpus(runtime, (nvml.bus_id(handle) if handle is not None else None) or gpu)
        yield Session(backend, hvd, runtime, flags, writer, log_dir, device, threads, nvml, handle, run_id,
                      NodePower() if runtime.local_rank == 0 else None)


def refuse_shared_gpus(runtime: Runtime, bus_id: str | None) -> None:
    """Before any collective on the device: a UsageError where two ranks of one host got the same GPU (one
    visible GPU, several ranks), which NCCL would refuse at its first call ("Duplicate GPU detected")."""
    if runtime.size < 2:
        return
    problem = shared_gpu_problem(runtime.allgather_object((os.uname().nodename, bus_id)))
    if problem:
        raise UsageError(problem)


def _repeat(log_dir: Path) -> int:
    """The run's repeat number, as its run.json says (0 where it cannot be read)."""
    try:
        return RunSpec.read(log_dir / RUN_FILE).repeat
    except SpecError:
        return 0


def main(name: str, backend: Backend, build: Callable[[Any], Any], argv: Sequence[str] | None = None) -> int:
    """Run one training benchmark on this rank: parse, start, build, record, time. Returns the exit status."""
    begun = time.time()  # the rank's initialisation starts (a run to target's MLLOG init_start)
    start = invocation(name, argv)
    info, flags = start.info, start.flags
    with rank_session(backend, info, flags, start.argv, start.label) as session:
        if to_target(flags):  # each repeat of a run to target its own seed, as MLPerf's runs are
            flags.seed += session.runtime.broadcast_object(_repeat(session.log_dir) if session.runtime.rank == 0
                                                           else None)
        chosen = backend.configure(flags, session.device)
        trainer = backend.trainer(build, session)
        runtime = session.runtime
        counted = runtime.broadcast_object(flops_of(name, flags) if runtime.rank == 0 else None)
        unit = trainer.unit or info.unit
        session.writer.write("env", benchmark=name, framework=info.framework, model=flags.model, flags=vars(flags),
                             unit=unit, threads=session.threads, **chosen, **trainer.facts,
                             parameters=trainer.parameters,
                             gradient_tensors=trainer.gradient_tensors, gradient_sizes=trainer.gradient_sizes,
                             **counted, **session.environment())
        final = lambda: {**backend.peak_memory(session.device), "param_checksum": trainer.checksum(),  # noqa: E731
                         **getattr(trainer, "data_facts", dict)()}
        if to_target(flags):
            device = backend.device_info(session.device).get("name") or "CPU"
            return measure_to_target(runtime, session.writer, trainer, backend.loss_value, flags=flags, unit=unit,
                                     label=start.label, sampler=session.sampler(), final=final, init_start=begun,
                                     platform=f"{runtime.size}x {device}")
        step = (lambda: trainer.breakdown_step(runtime.sync)) if flags.breakdown else \
            trainer.data_step if getattr(flags, "data_only", False) else trainer.step
        try:
            return measure(runtime, session.writer, step, backend.loss_value, flags=flags, unit=unit,
                           label=f"{start.label} ({session.log_dir})", sampler=session.sampler(),
                           profile=lambda steps: backend.profile(trainer, session, steps), final=final)
        finally:
            trainer.close()
