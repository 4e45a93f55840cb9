"""The one master list of record fields: every kind a rank log holds, each field's type and meaning.

Writers build records through it (``RecordWriter.write`` refuses a field a kind does not declare) and
the collector reads through it (the DataFrame columns of steps, telemetry and summaries are declared
here; the run table's columns in core/run_table.py). A new field is one line below plus the code that writes
it; shown in the report, one run_table line and the view that shows it. Importable without any framework.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .exchanges import EXCHANGES

SCHEMA_VERSION = 1
MARKER = '{"hvdbench":'


@dataclass(frozen=True)
class Field:
    """One key of a record: its JSON type, what it means, and its column dtype where the report
    tabulates it (None: not a column of its own)."""

    name: str
    type: str
    meaning: str
    column: str | None = None


@dataclass(frozen=True)
class Kind:
    """One kind of record: what it says and the fields it may carry. ``extra`` says what undeclared
    fields mean where a kind is open to them (a step's further counts), else None: closed."""

    name: str
    meaning: str
    fields: tuple[Field, ...]
    extra: str | None = None

    def names(self) -> tuple[str, ...]:
        """Declared field names, in order."""
        return tuple(f.name for f in self.fields)

    def columns(self) -> dict[str, str]:
        """The declared fields the report tabulates, name -> pandas dtype, in order."""
        return {f.name: f.column for f in self.fields if f.column is not None}

    def check(self, fields: Mapping[str, Any]) -> None:
        """Raise ValueError for a field this kind does not declare (unless the kind is open)."""
        if self.extra is not None:
            return
        unknown = sorted(set(fields) - set(self.names()) - set(HEADER_NAMES))
        if unknown:
            raise ValueError(f"record kind {self.name!r} has no field(s) {', '.join(unknown)}; "
                             f"valid: {', '.join(self.names())}")


HEADER = (
    Field("hvdbench", "int", "schema version; every record starts with this key, so a parser finds it behind any "
                             "prefix"),
    Field("kind", "str", "the record kind (below)"),
    Field("rank", "int", "Horovod rank of the writer", "int64"),
    Field("local_rank", "int", "rank on its node"),
    Field("size", "int", "ranks in the job"),
    Field("host", "str", "the writer's host name"),
    Field("time", "float", "wall-clock time (s since the epoch)"),
    Field("mono", "float", "monotonic clock (s); telemetry is timed from the first record's"),
)
HEADER_NAMES = tuple(f.name for f in HEADER)

# The facts of one GPU from NVML (env.gpu) and what the telemetry sampler reads every interval.
GPU_FACTS = (
    Field("name", "str", "GPU model"),
    Field("uuid", "str", "GPU UUID"),
    Field("pci_bus_id", "str", "PCI bus id as NVML prints it (8-digit domain)"),
    Field("index", "int", "NVML index"),
    Field("memory_total_bytes", "int", "device memory"),
    Field("max_sm_clock_mhz", "int", "highest SM clock"),
    Field("max_memory_clock_mhz", "int", "highest memory clock"),
    Field("power_limit_w", "float", "enforced power limit"),
    Field("pcie_max_gen", "int", "highest PCIe generation of the link"),
    Field("pcie_max_width", "int", "widest PCIe link width"),
    Field("persistence_mode", "int", "1 when persistence mode is on"),
    Field("numa_node", "int", "NUMA node of the GPU's PCI device"),
    Field("ecc_uncorrected", "int", "uncorrected ECC errors since the driver loaded (volatile)"),
    Field("retired_pages", "int", "device memory pages retired for double-bit ECC errors"),
)
TELEMETRY = (
    Field("gpu_util_pct", "float", "GPU utilization since the last sample (NVML)", "float64"),
    Field("mem_util_pct", "float", "device memory bandwidth utilization (NVML)"),
    Field("memory_used_bytes", "int", "device memory in use", "float64"),
    Field("sm_clock_mhz", "int", "SM clock", "float64"),
    Field("memory_clock_mhz", "int", "memory clock", "float64"),
    Field("power_w", "float", "board power draw", "float64"),
    Field("energy_mj", "int", "NVML's energy counter (mJ since the driver loaded; Volta and newer)", "float64"),
    Field("temperature_c", "int", "GPU temperature", "float64"),
    Field("pcie_gen", "int", "current PCIe link generation", "float64"),
    Field("pcie_width", "int", "current PCIe link width", "float64"),
    Field("clock_events", "list", "clock-event (throttle) reasons set now, by name; a column of names joined by ,",
          "string"),
    Field("nvlink_tx_kib", "int", "NVLink payload sent since the driver loaded, KiB summed over the GPU's links (NVML "
                              "field NVLINK_THROUGHPUT_DATA_TX); null without NVLink", "float64"),
    Field("nvlink_rx_kib", "int", "NVLink payload received since the driver loaded, KiB over all links (DATA_RX)",
          "float64"),
    Field("process_cpu_pct", "float", "this process's CPU use since the last sample (% of one core)", "float64"),
    Field("rss_bytes", "int", "this process's resident memory", "float64"),
    Field("cpu_power_w", "float", "local rank 0: the node's CPU packages and DRAM since the last sample, from RAPL "
                                  "(core/node_power.py); absent where the kernel does not expose it", "float64"),
    Field("node_power_w", "float", "local rank 0: the whole node's power as its BMC reads it (ipmitool dcmi power "
                                   "reading, at most every 5 s); absent without ipmitool, an IPMI device or a reading",
          "float64"),
    Field("note", "str", "once, on the first sample: why GPU telemetry is off"),
)

KINDS: dict[str, Kind] = {kind.name: kind for kind in (
    Kind("env", "once per rank before training: what the result depends on besides the code", (
        Field("run_id", "str", "the id of the run.json beside the log (a log copied from another run is told apart)"),
        Field("benchmark", "str", "benchmark name (catalog)"),
        Field("framework", "str", "pytorch or tensorflow"),
        Field("model", "str", "architecture"),
        Field("flags", "dict", "every parsed benchmark flag"),
        Field("unit", "str", "what samples count (images, tokens, ...)"),
        Field("threads", "any", "CPU threads: an int (PyTorch), intra/inter-op pools (TensorFlow), null on a GPU"),
        Field("parameters", "int", "trainable parameters"),
        Field("gradient_tensors", "int", "trainable tensors: the allreduces of one step before Horovod fuses them"),
        Field("gradient_sizes", "list", "elements of each trainable tensor, last registered first (about the order "
                                        "backward produces them; collectives --pattern training issues these)"),
        Field("flops_per_sample", "float", "FLOPs of one sample's training step, forward + backward (suite/flops.py's "
                                           "rule: multiply-add = 2), null where not counted"),
        Field("flops_forward_per_sample", "float", "the forward pass's share of flops_per_sample"),
        Field("flops_counted", "str", "how the FLOPs were counted, or why they were not"),
        Field("tensorflow", "dict", "TensorFlow only: dtype policy, image layout, XLA"),
        Field("math", "dict", "on a GPU: cudnn_autotune (cuDNN timed its convolution algorithms and kept the fastest), "
                              "tf32_matmul and tf32_convolution (fp32 products allowed to run as TF32 on tensor "
                              "cores), PyTorch's own fp32_precision words where it has them; null on the CPU"),
        Field("device", "dict", "the framework's view of the device: type, name, capability, bus id, versions"),
        Field("nvml", "dict", "driver and CUDA driver versions, or why NVML is absent"),
        Field("gpu", "dict", "NVML facts of this rank's GPU (GPU_FACTS), null on the CPU"),
        Field("gpu_choice", "dict", "the GPU this rank was given and why (core/gpu_choice.py): cuda_index, "
                                    "physical id, how, CUDA_VISIBLE_DEVICES, SLURM's grant, placement; or the problem"),
        Field("exchange", "dict", f"how gradients were exchanged (--exchange): name ({', '.join(EXCHANGES)}; none "
                                  "under --independent), and for torch.distributed ones the backend (nccl, gloo), "
                                  "where the ranks met, DDP's bucket size, FSDP's units, the parameter server's place"),
        Field("horovod", "dict", "Horovod version, build, controller, rank layout, the NCCL version it was built "
                                 "with (nccl_version; the framework's own is device.nccl)); null under torchrun"),
        Field("torchrun", "dict", "under torchrun (no Horovod): the torch.distributed backend, torchrun's run id, "
                                  "NCCL's version, where the ranks met, the rank layout; absent otherwise"),
        Field("imported", "dict", "a run taken in from another tool's output (hvdbench import nccl-tests|mlperf): "
                                  "the tool (from), its program and version or the submission's facts, the file's "
                                  "name and sha256, its hosts where said; absent otherwise"),
        Field("pid", "int", "process id"),
        Field("os", "str", "platform string"),
        Field("cpu_model", "str", "CPU model name"),
        Field("cpu_count", "int", "CPUs of the host"),
        Field("affinity", "list", "CPUs this process may run on"),
        Field("python", "str", "Python version"),
        Field("hvdbench_version", "str", "hvdbench's version, with its commit where it ran from a git checkout"),
        Field("mpi", "dict", "MPI on PATH: mpirun's first line, implementation, version; loaded: the MPI library "
              "this rank loaded (path, implementation, version, MPICH's device), as MPI_Get_library_version says"),
        Field("mpi_components", "dict", "Open MPI transport components in use by this rank (pml, btl, mtl, osc: "
                                        "what MPI init kept loaded), null where the rank runs no MPI"),
        Field("variables", "dict", "HOROVOD_*, NCCL_*, UCX_*, OMPI_*, CUDA_* variables and the scheduler's job "
                                   "variables (core/job_env.py)"),
        Field("container", "dict", "the container the rank runs in as seen from inside: runtime, and the image's "
                                   "name and id where the runtime tells; null on the host"),
        Field("gpu_nics", "list", "on a GPU: the NICs its GPU shares a PCIe switch with (PIX, PXB), where GPUDirect "
                                  "RDMA pays; null where the topology is unknown"),
        Field("node_power", "dict", "local rank 0: the RAPL zones its telemetry reads the node's CPU and DRAM power "
                                    "from (rapl), or why none (reason); the BMC command it reads the whole node's "
                                    "power with (bmc), or why none (bmc_reason); null on the node's other ranks"),
        Field("node_fabric", "dict", "the node's HCA ports from ibstat or ibv_devinfo (device, port, state, rate, "
                                     "link layer, model, firmware), OFED, UCX, HPC-X and LOADEDMODULES "
                                     "(core/hca.py); local rank 0 only, null on the node's other ranks"),
    )),
    Kind("phase", "the start of warm-up or of the timed steps, or of a run to a quality target", (
        Field("phase", "str", "warmup, timed, or run_start (a run to target: its clock starts here, MLPerf's "
                              "run_start)"),
        Field("steps", "int", "steps in the phase (run_start: the cap's)"),
    )),
    Kind("step", "one training step, bounded by a device sync", (
        Field("step", "int", "step index from 0, warm-up included", "int64"),
        Field("warmup", "bool", "run as warm-up (excluded from timing)", "bool"),
        Field("duration", "float", "seconds from the step's start to its device sync", "float64"),
        Field("samples", "float", "work done in the benchmark's unit", "float64"),
        Field("loss", "float", "the step's loss, read after the sync", "float64"),
        Field("phases", "dict", "with --breakdown: seconds of forward, backward, exchange, optimizer (or compute)"),
    ), extra="further counts of the step beside samples (audio_s, sentences)"),
    Kind("comm", "one collective case: every timed iteration of one op, backend, dtype and size", (
        Field("op", "str", "the collective: a name of core/collective_ops.py's OPS"),
        Field("backend", "str", "horovod or mpi; nccl-tests for a run taken in from its output"),
        Field("dtype", "str", "fp32, fp16 or bf16"),
        Field("bytes", "int", "message size as nccl-tests counts it"),
        Field("elements", "int", "elements per rank's buffer"),
        Field("times", "list", "seconds per call on this rank: of each batch (timing batch), or of each call (each)"),
        Field("timing", "str", "batch: after a barrier and a device sync, calls back to back, one sync, time / calls "
                               "(nccl-tests' way); each: every call bounded by a barrier and a sync; absent: each"),
        Field("calls", "int", "calls per batch (timing batch; 1 for each)"),
        Field("correct", "bool", "every result matched the values known in advance"),
        Field("skipped", "str", "why the case could not run here (no other field then)"),
        Field("pattern", "str", "training: a training run's gradient tensors allreduced back to back as its steps "
                                "do, bytes their total per step (absent: isolated calls, each after a barrier)"),
        Field("tensors", "int", "training pattern: allreduces enqueued per step, before Horovod fuses them"),
        Field("like", "str", "training pattern: the run whose gradients were issued"),
        Field("like_workload", "str", "training pattern: that run's workload (benchmark, model, batch size)"),
    )),
    Kind("telemetry", "sampled every --telemetry-interval seconds while the steps run", TELEMETRY),
    Kind("p2p", "one copy case of suite/p2p.py: every timed iteration between two GPUs, or a GPU and pinned host "
                "memory", (
        Field("src", "str", "GPU index (CUDA, in PCI bus order) or host"),
        Field("dst", "str", "GPU index or host"),
        Field("mode", "str", "uni (one direction) or bi (both directions at once; bytes count both)"),
        Field("bytes", "int", "bytes moved per iteration"),
        Field("times", "list", "seconds of each timed iteration"),
        Field("peer_access", "bool", "CUDA peer access between the two GPUs (else copies stage through the host)"),
        Field("link", "str", "the pair's link class (NV#, PIX, ... SYS) where the node's topology was readable"),
        Field("src_bus_id", "str", "PCI bus id of the source GPU"),
        Field("dst_bus_id", "str", "PCI bus id of the destination GPU"),
    )),
    Kind("eval", "one evaluation over the held-out set on the way to a quality target (time to train)", (
        Field("epoch", "float", "epochs trained when it was taken", "float64"),
        Field("samples", "float", "samples trained (every rank's) when it was taken", "float64"),
        Field("elapsed_s", "float", "seconds since the run's start, evaluation on the clock", "float64"),
        Field("accuracy", "float", "the held-out set's accuracy (a fraction)", "float64"),
        Field("loss", "float", "the held-out set's mean loss", "float64"),
        Field("eval_s", "float", "seconds this evaluation took (on the clock: inside elapsed_s)", "float64"),
    )),
    Kind("profile", "the profiler's top operators over extra steps after the timed ones", (
        Field("steps", "int", "profiled steps"),
        Field("trace", "str", "trace file or directory beside the log"),
        Field("sort_by", "str", "what the operators are ordered by"),
        Field("top", "list", "operators: name, calls, self_cpu_us, self_device_us, cpu_total_us"),
    )),
    Kind("summary", "this rank's end: what it measured (the report recomputes from the steps)", (
        Field("unit", "str", "what samples count"),
        Field("steps", "int", "timed steps (an adaptive run: the steps it took)", "Int64"),
        Field("target_ci_pct", "float", "with --target-ci: the half-width of the 95% interval asked, percent"),
        Field("ci_reached_pct", "float", "with --target-ci: the half-width reached when the run stopped, percent"),
        Field("stopped_by", "str", "with --target-ci: target (interval narrow enough) or max_steps"),
        Field("adaptive_check_s", "float", "with --target-ci: time spent judging the interval (not in any step)"),
        Field("warmup_steps", "int", "warm-up steps run"),
        Field("samples", "float", "samples over the timed steps", "float64"),
        Field("window_s", "float", "wall time of the timed window (barrier and sync at both ends)", "float64"),
        Field("step_time_sum_s", "float", "sum of the timed steps' durations"),
        Field("median_step_s", "float", "median timed step", "float64"),
        Field("throughput", "float", "samples / step_time_sum_s: this rank's share of the run's throughput", "float64"),
        Field("totals", "dict", "further counts summed over the timed steps"),
        Field("rates", "dict", "those counts per second of the timed window"),
        Field("final_loss", "float", "loss of the last step"),
        Field("loss_finite", "bool", "every loss was finite"),
        Field("peak_device_bytes", "int", "peak device memory allocated (GPU)"),
        Field("peak_rss_bytes", "int", "peak resident set of the process (CPU)"),
        Field("param_checksum", "float", "sum of every parameter: equal on all ranks when gradients are exchanged"),
        Field("data", "dict", "with --data files (core/loaders.data_record, every loader's): dir, layout, kind, "
                              "loader, samples, dataset_bytes (the dataset); read, bytes (what this rank read); "
                              "corrupt, corrupt_named (its corrupt or vanished files, counted, the first named); "
                              "wait_s (the seconds its steps waited for their batches); the page cache at the start "
                              "(core/pagecache.py's facts); shard (how the rank's samples are drawn); a run to "
                              "target's held_out"),
        Field("cases", "int", "collectives and p2p: cases measured"),
        Field("path_cost_s", "dict", "collectives: seconds one call of each backend's path costs before any byte moves "
                                     "(mpi: a one-element allreduce on MPI_COMM_SELF through the same prepared call; "
                                     "horovod: a one-element allreduce across the ranks)"),
        Field("skipped", "int", "collectives: cases skipped"),
        Field("quality", "dict", "a run to a quality target: its metric and target, the seconds to it from the run's "
                                 "start (evaluation on the clock; to the last evaluation where it was not reached), "
                                 "the epochs and samples, whether it converged, the best value reached, the global "
                                 "batch, and the source (hvdbench, or an MLPerf result file taken in)"),
    )),
    Kind("error", "why the rank stopped (it exits 1 right after)", (
        Field("error", "str", "exception type"),
        Field("message", "str", "one line naming the problem"),
        Field("traceback", "str", "the last frames"),
    )),
)}


_TYPES: dict[str, Any] = {
    "int": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "str": lambda v: isinstance(v, str), "bool": lambda v: isinstance(v, bool),
    "dict": lambda v: isinstance(v, dict), "list": lambda v: isinstance(v, list), "any": lambda v: True,
}


def type_problem(record: Mapping[str, Any]) -> str | None:
    """The first declared field of a record whose value is not of its declared type (null is always
    allowed), as one line; None when every field fits. Readers skip and count such records."""
    declared = KINDS.get(record.get("kind"))  # type: ignore[arg-type]
    if declared is None:
        return None
    for field in declared.fields:
        value = record.get(field.name)
        if value is not None and not _TYPES[field.type](value):
            return f"{declared.name} record: {field.name} should be {field.type}, got {type(value).__name__}"
    return None


def kind(name: str) -> Kind:
    """The kind of that name; ValueError listing the valid ones."""
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown record kind {name!r}; valid: {', '.join(KINDS)}") from None


def markdown() -> str:
    """The master list as Markdown, one table per kind."""
    out = ["# Rank-log records", "", f"Schema version {SCHEMA_VERSION}. One JSON object per line, one file per "
           "rank (`rank-<r>.jsonl`); generated by `python -m hvdbench.core.run_table`.", ""]
    sections: list[tuple[str, str, tuple[Field, ...]]] = [("Every record starts with", "", HEADER)]
    sections += [(f"`{k.name}`", k.meaning + (f"; other numeric fields: {k.extra}" if k.extra else ""), k.fields)
                 for k in KINDS.values()]
    sections.append(("`env.gpu`", "NVML facts of the rank's GPU", GPU_FACTS))
    for title, text, fields in sections:
        out += [f"## {title}", ""] + ([text, ""] if text else [])
        out += ["| field | type | meaning |", "|---|---|---|"]
        out += [f"| `{f.name}` | {f.type} | {f.meaning} |" for f in fields] + [""]
    return "\n".join(out)
