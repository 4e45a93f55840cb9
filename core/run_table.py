"""The run table's columns, each declared once (mlcommons logging's master list, for the table the report builds
from every run): its dtype, what it means, where its value comes from (the run's RunSpec, the swept axes of
core/axes.py, a field of the ranks' records combined over ranks, what the collector judged, or a derivation
from those), and which report tables carry it. The collector fills a row through ``run_row`` and
nothing else; views and verdicts read the columns by these names. A field shown in the report is a schema line
(core/schema.py), its writer, a line here, and its view. ``python -m hvdbench.core.run_table`` prints the
records' master list and this table as Markdown (docs/records.md is that output). Framework-free."""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any, Callable

from . import schema
from .columns import COLUMNS_FROM, COLUMNS_SUFFIX
from .containers import RUNTIMES
from .axes import AXES, base_flags
from .run_flags import configuration, measured, spelled, without
from .exchanges import listed, without_horovod
from .hca import active_rdma
from .loaders import loader_named
from .run_facts import (RunFacts, converged_of, device_name, fabric_software, forward_share, hca_named_down, is_number,
                        model_of, mpi_text, not_converged_why, params_agree, power_source, target_asked, tf32_of,
                        tuning_text, variable_number)
from .spec import RunSpec

COMBINE = ("first", "min", "max", "sum", "all_equal")  # how a record field's values over ranks become one value
JUDGED = ("root", "status", "reason", "ranks_logged", "attempts", "earlier_attempts", "wall_s", "setup_s", "position",
          "folder")
_LIMIT = float(2 ** 63)  # beyond a 64-bit column: no recorded count is that large


@dataclass(frozen=True)
class RunColumn:
    """One column: ``derive(facts)`` where given, else the value at ``path`` (a field, then keys into it) of each
    rank's first record of ``kind``, combined over ranks by ``combine``; through ``render`` where given; null
    where absent or not of ``dtype`` (a pandas dtype: boolean, bool, Int64, int64, float64, string)."""

    name: str
    dtype: str
    meaning: str
    source: str  # where the value comes from, in words (docs/records.md)
    kind: str | None = None
    path: tuple[str, ...] = ()
    combine: str = "first"
    derive: Callable[[RunFacts], Any] | None = None
    render: Callable[[Any], Any] | None = None
    tables: tuple[str, ...] = ()  # report tables that carry the column besides the run table

    def __post_init__(self) -> None:
        if self.combine not in COMBINE or (self.derive is None) == (self.kind is None):
            raise ValueError(f"run column {self.name}: give derive or a record kind, and combine one of {COMBINE}")

    def value(self, facts: RunFacts) -> Any:
        """This column's cell for one run."""
        if self.derive is not None:
            value = self.derive(facts)
        else:
            by_rank = facts.records.get(self.kind or "") or {}
            value = combined(self.combine, [dig(by_rank[rank], self.path) for rank in sorted(by_rank)])
        return typed(self.render(value) if self.render is not None else value, self.dtype)


def dig(value: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` (keys into nested objects); None where any step is missing."""
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def combined(how: str, values: list[Any]) -> Any:
    """Ranks' values as one: the lowest rank's (first), the smallest, largest or sum of the numbers among them, or the
    value every rank that recorded one agrees on (all_equal; None where two differ)."""
    if how == "first":
        return values[0] if values else None
    if how == "all_equal":
        given = [v for v in values if v is not None]
        return given[0] if given and all(v == given[0] for v in given) else None
    numbers = [v for v in values if is_number(v) and math.isfinite(v)]
    if not numbers:
        return None
    return min(numbers) if how == "min" else max(numbers) if how == "max" else sum(numbers)


def typed(value: Any, dtype: str) -> Any:
    """``value`` as a cell of ``dtype``, or None where it is not one (a bool is no number, 3.0 is a whole number,
    nothing beyond a 64-bit integer is a count)."""
    if value is None:
        return None
    if dtype in ("bool", "boolean"):
        return value if isinstance(value, bool) else None
    if dtype == "string":
        return value if isinstance(value, str) else None
    if not is_number(value) or not -_LIMIT < value < _LIMIT:
        return None
    if dtype in ("Int64", "int64"):
        return int(value) if isinstance(value, int) or float(value).is_integer() else None
    return float(value)


def _spec(name: str, dtype: str, meaning: str, get: Callable[[RunSpec], Any]) -> RunColumn:
    return RunColumn(name, dtype, meaning, "run.json", derive=lambda facts: get(facts.spec))


def _judged(name: str, dtype: str, meaning: str) -> RunColumn:
    return RunColumn(name, dtype, meaning, "the collector", derive=lambda facts: facts.judged.get(name))


def _env(name: str, path: tuple[str, ...], dtype: str, meaning: str,
         render: Callable[[Any], Any] | None = None) -> RunColumn:
    return RunColumn(name, dtype, meaning, f"env.{'.'.join(path)}", "env", path, render=render, tables=("details",))


def _fabric(name: str, key: str, dtype: str, meaning: str) -> RunColumn:
    """A fact of the network NCCL used, from the run's NCCL logs (readers/nccl_log.py), lists as text."""
    def derive(facts: RunFacts) -> Any:
        fabric = facts.judged.get("fabric")
        value = fabric.get(key) if isinstance(fabric, dict) else None
        return "; ".join(map(str, value)) if isinstance(value, list) and value else None if isinstance(value, list) \
            else value
    return RunColumn(name, dtype, meaning, f"nccl-rank-N.log: {key} (readers/nccl_log.py)", derive=derive,
                     tables=("details",))


def _axis_value(name: str) -> Callable[[RunFacts], Any]:
    """The value of axis ``name`` (precision as its text: a Keras policy reads alike)."""
    if name == "precision":
        return lambda facts: str(facts.axes[name])
    return lambda facts: facts.axes[name]


# runs.csv only ever gains columns at its end: batch size and precision before independent, the axes of --data
# files (added later) last
FIRST_AXES = ("batch_size", "precision")
LAST_AXES = ("loader", "loader_workers", "data_dir", "data_only", "data_cache")


def _axis_columns(group: tuple[str, ...] | None) -> tuple[RunColumn, ...]:
    """The axis columns named in ``group`` (None: those in neither FIRST_AXES nor LAST_AXES), in AXES order."""
    dtypes = {int: "Int64", bool: "bool", str: "string"}
    return tuple(RunColumn(name, dtypes[axis.kind], axis.meaning, "the swept axes (core/axes.py)",
                           derive=_axis_value(name)) for name, axis in AXES.items()
                 if (name in group if group is not None else name not in FIRST_AXES + LAST_AXES))


def _nested(name: str, path: tuple[str, ...], dtype: str, meaning: str, combine: str = "first",
            render: Callable[[Any], Any] | None = None) -> RunColumn:
    return RunColumn(name, dtype, meaning, f"summary.{'.'.join(path)} ({combine} over ranks)", "summary", path,
                     combine, render=render, tables=("details",))


def _summary(name: str, field_: str, dtype: str, meaning: str, combine: str = "first") -> RunColumn:
    return RunColumn(name, dtype, meaning, f"summary.{field_} ({combine} over ranks)", "summary", (field_,), combine)


def _derived(name: str, dtype: str, meaning: str, source: str, derive: Callable[[RunFacts], Any]) -> RunColumn:
    return RunColumn(name, dtype, meaning, source, derive=derive)


RUN_COLUMNS: tuple[RunColumn, ...] = (
    RunColumn("run_id", "string", "the run's id (benchmark, ranks, repeat and a hash of its spec; where two results "
              "roots hold runs of one id, every root's but the first's with @ and its root's name)", "run.json",
              derive=lambda facts: facts.judged.get("row_id") or facts.spec.id),
    _judged("root", "string", "the results folder the run was found under"),
    _spec("system", "string", "the system label its sweep gave", lambda s: s.system),
    _spec("framework", "string", "pytorch or tensorflow", lambda s: s.framework),
    _spec("benchmark", "string", "the benchmark (catalog name)", lambda s: s.benchmark),
    _derived("model", "string", "the model: env.model, else the --model argument", "env.model, run.json", model_of),
    _spec("args", "string", "the benchmark's arguments, each flag spelled one way (core/run_flags.spelled)",
          lambda s: " ".join(spelled(s.benchmark, s.args))),
    _spec("np", "int64", "ranks (GPUs)", lambda s: s.np),
    _spec("nodes", "int64", "nodes", lambda s: s.nodes),
    _spec("launcher", "string", "what started the ranks (horovodrun, mpirun, mpiexec, srun, torchrun)",
          lambda s: s.launcher),
    _spec("controller", "string", "Horovod's controller (gloo or mpi), or c10d under torchrun", lambda s: s.controller),
    _spec("placement", "string", "the placement's name (empty: the first GPUs)", lambda s: s.placement or ""),
    _spec("knobs", "string", "the sweep's environment knobs, KEY=VALUE ...",
          lambda s: " ".join(f"{k}={v}" for k, v in s.env)),
    _spec("repeat", "int64", "which repeat of its configuration", lambda s: s.repeat),
    _derived("unit", "string", "what a sample counts (images, tokens ...)", "env.unit",
             lambda f: f.env.get("unit", "samples") if f.env else "samples"),
    _judged("status", "string", "ok, or why the run is left out (failed, incomplete, inconsistent ...)"),
    _judged("reason", "string", "why, in one line, where the run is not ok"),
    _judged("ranks_logged", "int64", "rank logs read"),
    *_axis_columns(FIRST_AXES),
    _spec("independent", "bool", "--independent: replicas without the gradient exchange",
          lambda s: train.independent if (train := s.train) is not None else "--independent" in s.args),
    _spec("base_args", "string", "the arguments without --independent and the exchange's flags (pairs a run with "
                                 "its independent twin and its 1-GPU baseline, one for every exchange)",
          lambda s: " ".join(without(spelled(s.benchmark, s.args), base_flags()))),
    *_axis_columns(None),
    _derived("parameters", "Int64", "the model's parameters", "env.parameters", lambda f: f.env.get("parameters")),
    _summary("peak_device_bytes", "peak_device_bytes", "float64", "peak device memory of the busiest rank", "max"),
    _summary("peak_rss_bytes", "peak_rss_bytes", "float64", "peak resident set of the busiest rank", "max"),
    _judged("wall_s", "float64", "the attempt's seconds as recorded, else from its first to its last record"),
    _judged("setup_s", "float64", "rank 0's seconds from its first record to its timed steps"),
    _summary("timed_steps", "steps", "Int64", "rank 0's timed steps (an adaptive run: the steps it took)"),
    _summary("target_ci_pct", "target_ci_pct", "float64", "--target-ci: the interval's half-width asked, %"),
    _summary("ci_reached_pct", "ci_reached_pct", "float64", "--target-ci: the half-width reached, %"),
    _summary("stopped_by", "stopped_by", "string", "--target-ci: target or max_steps"),
    _derived("flops_per_sample", "float64", "FLOPs per sample (forward and backward)", "env.flops_per_sample",
             lambda f: f.env.get("flops_per_sample")),
    _derived("flops_counted", "string", "how the FLOPs were counted", "env.flops_counted",
             lambda f: f.env.get("flops_counted")),
    _derived("device_name", "string", "the device that did the work: the GPU's name, on a CPU run the CPU's model",
             "env.gpu.name, env.device.name or env.cpu_model", device_name),
    _derived("tf32", "boolean", "fp32 products could run as TF32 (allowed, on a GPU of capability 8.0 or newer)",
             "env.math, env.device.capability, env.variables", tf32_of),
    _judged("attempts", "int64", "times the run was started (earlier ones kept in attempt-N/)"),
    _judged("earlier_attempts", "string", "how each earlier attempt ended: attempt-1: failed (reason); ..."),
    _derived("gradient_tensors", "Int64", "gradient tensors exchanged per step", "env.gradient_tensors",
             lambda f: f.env.get("gradient_tensors")),
    _derived("forward_share", "float64", "the forward pass's share of a step's FLOPs",
             "env.flops_forward_per_sample / env.flops_per_sample", forward_share),
    _derived("fusion_bytes", "float64", "HOROVOD_FUSION_THRESHOLD (null: Horovod's default)",
             "env.variables", variable_number("HOROVOD_FUSION_THRESHOLD")),
    _derived("cycle_s", "float64", "HOROVOD_CYCLE_TIME in seconds (null: Horovod's default)",
             "env.variables", variable_number("HOROVOD_CYCLE_TIME", 1e3)),
    _derived("nccl_algo", "string", "NCCL_ALGO as the run set it (null: NCCL chose its algorithm by size)",
             "env.variables", lambda f: f.variables.get("NCCL_ALGO")),
    _env("cudnn_autotune", ("math", "cudnn_autotune"), "boolean",
         "cuDNN timed its convolution algorithms and kept the fastest (a GPU run)"),
    _env("started", ("time",), "float64", "when rank 0 recorded its environment (s since the epoch)"),
    _env("host", ("host",), "string", "rank 0's host"),
    _env("imported_from", ("imported", "from"), "string", "a run measured elsewhere and taken in: its source "
         "(nccl-tests, mlperf)"),
    _env("imported_hosts", ("imported", "hosts"), "string", "a run taken in: the nodes it ran on (its step's, else "
         "those its output names), comma-separated", lambda v: ",".join(map(str, v)) if isinstance(v, list) and v
         else None),
    _env("driver", ("nvml", "driver"), "string", "the NVIDIA driver, as NVML reports it"),
    _env("cuda", ("device", "cuda"), "string", "the CUDA the framework was built with"),
    _env("cudnn", ("device", "cudnn"), "Int64", "the cuDNN version PyTorch loaded"),
    _env("nccl", ("device", "nccl"), "string", "the NCCL version PyTorch loaded"),
    _env("torch", ("device", "torch"), "string", "PyTorch's version"),
    _env("tensorflow", ("device", "tensorflow"), "string", "TensorFlow's version"),
    _env("horovod_version", ("horovod", "version"), "string", "Horovod's version"),
    _env("mpi", ("mpi",), "string", "the MPI rank 0 ran on: the library it loaded (implementation, version, MPICH's "
         "device), else mpirun's on PATH", mpi_text),
    _env("tuning", ("variables",), "string", "HOROVOD_*, NCCL_*, UCX_*, OMPI_MCA_*, MPIR_CVAR_*, I_MPI_* and FI_* "
         "variables of rank 0, KEY=VALUE; ...", tuning_text),
    _env("cpu_model", ("cpu_model",), "string", "rank 0's CPU model"),
    _env("cpu_count", ("cpu_count",), "Int64", "CPUs of rank 0's host"),
    _env("horovod_nccl", ("horovod", "nccl_version"), "string",
         "the NCCL version Horovod was built with (hvd.nccl_built()), which its GPU collectives use"),
    RunColumn("path_cost_mpi_s", "float64", "collectives: a raw-MPI call's cost before any byte moves (rank 0)",
              "summary.path_cost_s.mpi", "summary", ("path_cost_s", "mpi"), tables=("details",)),
    RunColumn("path_cost_horovod_s", "float64", "collectives: a Horovod call's cost before any byte moves (rank 0)",
              "summary.path_cost_s.horovod", "summary", ("path_cost_s", "horovod"), tables=("details",)),
    _fabric("nccl_network", "network", "string", "the network NCCL moved data over, as its log says: IB, RoCE, "
            "Socket, or a plugin's network (IBext_v8, AWS Libfabric)"),
    _fabric("nccl_plugin", "plugin", "string", "the NCCL net plugin loaded (none: NCCL's own networks)"),
    _fabric("nccl_gdr", "gdr", "boolean", "GPUDirect RDMA on every network channel NCCL logged"),
    _fabric("nccl_nics", "devices", "string", "the NICs NCCL used (names, else NCCL's device indices)"),
    _fabric("nccl_transports", "intra_node", "string", "transports between GPUs of a node (P2P/CUMEM, P2P/IPC, "
            "SHM, NVLS)"),
    _fabric("fabric_warnings", "warnings", "string", "sockets beside an RDMA device, no GPUDirect RDMA, NCCL WARN "
            "lines"),
    RunColumn("container_image", "string", "the container image every rank ran in (null: on the host)", "run.json",
              derive=lambda facts: facts.spec.image, tables=("details",)),
    RunColumn("container_runtime", "string", f"what started the ranks in it: {', '.join(RUNTIMES)}",
              "run.json", derive=lambda facts: facts.spec.runtime, tables=("details",)),
    _env("container_image_id", ("container", "image_id"), "string", "the image's id as rank 0 saw it inside, where "
         "the runtime tells (podman)"),
    _env("rdma_ports", ("node_fabric",), "string", "rank 0's node: its active HCA ports (device, link layer, rate)",
         lambda fabric: "; ".join(active_rdma(fabric)) or None),
    _env("fabric_software", ("node_fabric",), "string", "OFED, UCX and HPC-X versions and the loaded modules of rank "
         "0's node", fabric_software),
    _derived("hca_named_down", "string", "the ports rank 0's NCCL_IB_HCA names that its node showed not active (or "
             "not there): NCCL had none of them", "env.variables.NCCL_IB_HCA, env.node_fabric", hca_named_down),
    _env("node_power_source", ("node_power",), "string", "where rank 0's node read its own power from (RAPL's zones, "
         "the BMC's command), or none and why", power_source),
    _env("hvdbench_version", ("hvdbench_version",), "string", "the hvdbench that measured it (version, and its commit "
         "where it ran from a git checkout)"),
    _env("exchange_backend", ("exchange", "backend"), "string", "torch.distributed's backend under --exchange "
         f"{listed(without_horovod('pytorch'))} (nccl, gloo); null under Horovod"),
    _spec("inputs", "string", "what the files its arguments name held, hashed (--model-file=sha256:…): an edited file "
                              "is another configuration", lambda s: s.inputs_text),
    _judged("position", "string", "where the run stood in the plan that ran it (run.json's order): 3 of 12, round 1 "
                                  "of 3 (a plan runs every configuration once a round, so repeats spread in time)"),
    _nested("step_time_s", ("step_time_sum_s",), "float64", "every rank's timed steps' seconds, summed over ranks",
            "sum"),
    _nested("input_wait_s", ("totals", "input_wait_s"), "float64", "--data files: seconds every rank's timed steps "
            "waited for their batches, summed over ranks", "sum"),
    _nested("bytes_read", ("totals", "bytes_read"), "float64", "--data files: bytes every rank read in its timed "
            "steps, summed over ranks", "sum"),
    _nested("data_corrupt", ("data", "corrupt"), "Int64", "--data files: corrupt or vanished samples, summed over "
            "ranks", "sum"),
    _nested("data_named", ("data", "corrupt_named"), "string", "--data files: the first corrupt or vanished files "
            "rank 0 named", "first", lambda named: "; ".join(map(str, named)) if isinstance(named, list) and named
            else None),
    _nested("dataset_bytes", ("data", "dataset_bytes"), "float64", "--data files: the dataset's bytes (every "
            "sample's)"),
    _nested("dataset_samples", ("data", "samples"), "Int64", "--data files: the dataset's samples"),
    _nested("data_layout", ("data", "layout"), "string", "--data files: the layout read (folder, webdataset, "
            "tfrecord)"),
    _nested("data_loader", ("data", "loader"), "string", "--data files: what read it (core/loaders.py: torch's "
            "DataLoader, dali, tfdata; tf.data as older runs wrote it, read as tfdata)", render=loader_named),
    RunColumn("params_agree", "boolean", "a run that exchanges gradients over 2+ ranks: whether every rank ended with "
              "the same parameters (their sums agree), as data-parallel training must; null where not judged",
              "summary.param_checksum (all ranks)", derive=lambda facts: params_agree(facts), tables=("details",)),
    *_axis_columns(LAST_AXES),
    _nested("data_read", ("data", "read"), "Int64", "--data files: samples every rank read (warm-up and timed steps, "
            "and what its loader read ahead), summed over ranks", "sum"),
    _nested("data_resident", ("data", "resident_start"), "float64", "--data files: the share of the dataset's pages "
            "in the page cache when reading began, the least over ranks (null where the kernel would not say)",
            "min"),
    _nested("data_fits", ("data", "fits_in_memory"), "boolean", "--data files: whether the dataset is smaller than "
            "the node's available memory (every rank's node)", "all_equal"),
    _derived("quality_metric", "string", "a run to a quality target: what is measured (accuracy)",
             "summary.quality.metric, else its flags", lambda f: (target_asked(f) or (None,))[0]),
    _derived("quality_target", "float64", "a run to a quality target: the value to reach",
             "summary.quality.target, else its flags", lambda f: (target_asked(f) or (None, None))[1]),
    _nested("time_to_target_s", ("quality", "seconds"), "float64", "a run to a quality target: seconds from its start "
            "to the evaluation that reached it, evaluation on the clock (to its last evaluation where it did not)"),
    _derived("converged", "boolean", "a run to a quality target: whether it reached it (no where it ended without: "
             "the cap, a timeout, a failure; core/time_to_train.py)", "summary.quality.converged, run status",
             converged_of),
    _derived("target_missed", "string", "a run to a quality target that did not reach it: why (the rule its "
             "result broke, the cap, how it ended)", "summary.quality, run status", not_converged_why),
    _nested("scaling_factor", ("quality", "scaling_factor"), "float64", "an MLPerf result: its folder's scaling.json "
            "factor, by which MLCommons multiplies the olympic mean"),
    _nested("required_runs", ("quality", "required_runs"), "Int64", "an MLPerf result: the runs its benchmark's "
            "result must hold (MLPerf Training's rules)"),
    _nested("epochs_to_target", ("quality", "epochs"), "float64", "a run to a quality target: epochs trained by "
            "then"),
    _nested("quality_best", ("quality", "best"), "float64", "a run to a quality target: the best value it reached"),
    _nested("steps_to_target", ("quality", "steps"), "Int64", "a run to a quality target: steps trained by then (to "
            "the last evaluation where it did not reach it)"),
    _nested("global_batch", ("quality", "global_batch"), "Int64", "a run to a quality target: samples a step over "
            "every rank"),
    _nested("quality_source", ("quality", "source"), "string", "a run to a quality target: hvdbench, or the MLPerf "
            "result file it was taken from"),
    _env("left_out", ("imported", "left_out"), "string", "a run taken in whose throughput is left out (it does not "
         "fit its siblings'), and why: kept for its time to train"),
    _env("host_network", ("imported", "network"), "string", "a run taken in: the host network its system's "
         "description names"),
    _env("device_batch", ("imported", "device_batch"), "Int64", "an MLPerf result taken in: the samples one device's "
         "step takes as its log counts them (d_batch_size times gradient_accumulation_steps): where batch_size is not "
         "this, the log counts samples otherwise (packed sequences, say)"),
    _env("parameter_servers", ("imported", "parameter_servers"), "Int64", "a published figure taken in: how many of "
         "its nodes held a parameter server, where its table says (null: one on every node, or no servers)"),
    _judged("folder", "string", "the run's folder as it was read (the history store tells a retried attempt of one "
                                "execution, in its folder again, from a new run)"),
    _spec("args_key", "string", "what the report groups a configuration's runs by: every flag given, typed, at a "
                                "value other than its default, in one order (two spellings of the same flags and "
                                "values agree)", lambda s: configuration(s.benchmark, s.args)),
    _spec("work_key", "string", "args_key without the flags that set how long a run measures (--steps, --warmup-steps, "
                                "--target-ci, --max-steps): what compare pairs systems by",
          lambda s: measured(s.benchmark, s.args)),
)
BY_NAME: dict[str, RunColumn] = {column.name: column for column in RUN_COLUMNS}
RUNS_SCHEMA: dict[str, str] = {column.name: column.dtype for column in RUN_COLUMNS}
PYTHON_TYPES: dict[str, type] = {"string": str, "Int64": int, "int64": int, "bool": bool, "boolean": bool,
                                 "float64": float}  # what a criterion's value must be to select on a column


def carried(table: str) -> dict[str, str]:
    """The columns (name: dtype) a report table carries from the run table, in table order."""
    return {column.name: column.dtype for column in RUN_COLUMNS if table in column.tables}


def run_row(facts: RunFacts) -> dict[str, Any]:
    """One run's row: every column's value."""
    return {column.name: column.value(facts) for column in RUN_COLUMNS}


def markdown() -> str:
    """The records' master list and the run table's columns, as Markdown."""
    out = [schema.markdown(), "## Step columns beside the log", "",
           f"A rank that started its log and wrote at least {COLUMNS_FROM} step records, each of its declared types, "
           f"also leaves them as columns beside it when it finishes (`rank-<r>.jsonl{COLUMNS_SUFFIX}`, Arrow IPC: "
           "step, duration, samples, loss, warmup and each phase; its schema metadata `hvdbench` holds the log's size, "
           "record count, last step, other records and a CRC-32 of every byte written). The report reads them instead "
           "of the JSON lines only while the log is what that file says (a line changed in its middle sends the "
           "report to the JSON; never through a link, never a columns file larger than its log); the JSON lines stay "
           "the record.", "",
           "## Run table columns", "",
           "Every column of the report's run table (runs.csv), where its value comes from and how ranks combine.", "",
           "| column | from | type | meaning |", "|---|---|---|---|"]
    out += [f"| `{c.name}` | {c.source} | {c.dtype} | {c.meaning} |" for c in RUN_COLUMNS] + [""]
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(markdown())
