"""Sweep files: one YAML or TOML file, validated before anything runs, into typed options.

A sweep names the system, the workloads and their arguments, the axes to sweep (sizes, placements,
batch sizes, precisions, Horovod/NCCL knobs), repeats, the launcher and the SLURM options. Every
problem is one :class:`SweepError` naming the file, the key and the valid choices. ``plan.py`` turns
a :class:`Sweep` into RunSpecs.
"""

from __future__ import annotations

import difflib
import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from hvdbench.suite.core.axes import AXES
from hvdbench.suite.core.errors import UsageError
from hvdbench.suite.core.spec import CONTROLLERS, TRANSPORTS
from hvdbench.suite.core.validate import (CONSTRAINT, GRES_TYPE, DIRECTIVE, HOST, NAME, PATH, QUEUE_WORD,
                                          grammar_problem,
                                     number_problem, text_problem)

from .base import PMI_PLUGINS, default_controllers, launcher_class, launcher_names
from .container import IMAGE, INTERPRETER, RECIPE_PYTHON, RUNTIMES, VARIABLE, Container, parse_mount
from .fit import GROWABLE, FitOptions
from .policy import MAX_RETRIES
from .sweep_file import SweepError, read_document

T = TypeVar("T")

# Horovod's run-time knobs (horovod/common/common.h, 0.28); a HOROVOD_* name outside this list is a typo.
HOROVOD_KNOBS = frozenset("""
HOROVOD_FUSION_THRESHOLD HOROVOD_CYCLE_TIME HOROVOD_CACHE_CAPACITY HOROVOD_HIERARCHICAL_ALLREDUCE
HOROVOD_HIERARCHICAL_ALLGATHER HOROVOD_TIMELINE HOROVOD_TIMELINE_MARK_CYCLES HOROVOD_AUTOTUNE
HOROVOD_AUTOTUNE_LOG HOROVOD_AUTOTUNE_WARMUP_SAMPLES HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE
HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE HOROVOD_STALL_CHECK_DISABLE
HOROVOD_STALL_CHECK_TIME_SECONDS HOROVOD_STALL_SHUTDOWN_TIME_SECONDS HOROVOD_MPI_THREADS_DISABLE
HOROVOD_NUM_NCCL_STREAMS HOROVOD_DISABLE_GROUP_FUSION HOROVOD_ELASTIC HOROVOD_LOG_LEVEL HOROVOD_LOG_HIDE_TIME
HOROVOD_CPU_OPERATIONS HOROVOD_CONTROLLER HOROVOD_GLOO_IFACE HOROVOD_GLOO_TIMEOUT_SECONDS
HOROVOD_ADASUM_MPI_CHUNK_SIZE HOROVOD_BATCH_D2D_MEMCOPIES HOROVOD_ENABLE_ASYNC_COMPLETION
HOROVOD_THREAD_AFFINITY HOROVOD_NCCL_ENABLE_ASYNC_COMPLETION HOROVOD_GPU_OPERATIONS
""".split())
# NCCL's own variables (nccl-variables.txt, from NCCL's source), and the prefixes and names its plugins and PyTorch
# read: HPC-X's RDMA/SHARP plugin, aws-ofi-nccl, Google's FasTrak/TCPX plugins, PyTorch's process group
NCCL_VARIABLES = frozenset(line for line in (Path(__file__).parent / "nccl-variables.txt").read_text().split()
                           if line.startswith("NCCL_"))
NCCL_PLUGIN_PREFIXES = ("NCCL_IBEXT_", "NCCL_SHARP_", "NCCL_FASTRAK_", "NCCL_GPUDIRECTTCPX_", "NCCL_TCPX_", "NCCL_OFI_")
NCCL_OTHER_NAMES = frozenset(("NCCL_PLUGIN_P2P", "NCCL_ASYNC_ERROR_HANDLING", "NCCL_BLOCKING_WAIT", "NCCL_DESYNC_DEBUG",
                              "NCCL_ENABLE_TIMING"))  # whole names: NCCL_BLOCKING_WAITT is none of them
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
KNOB_PREFIXES = ("HOROVOD_", "NCCL_", "UCX_", "OMPI_", "CUDA_")
MCA_PREFIX = "OMPI_MCA_"  # then an Open MPI parameter's own (lower-case) name: OMPI_MCA_btl_tcp_if_include
# Horovod knobs whose values are numbers or switches, checked before anything runs
NUMERIC_KNOBS = {"HOROVOD_FUSION_THRESHOLD": True, "HOROVOD_CACHE_CAPACITY": True, "HOROVOD_NUM_NCCL_STREAMS": True,
                 "HOROVOD_CYCLE_TIME": False, "HOROVOD_STALL_CHECK_TIME_SECONDS": True,
                 "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": True, "HOROVOD_GLOO_TIMEOUT_SECONDS": True,
                 "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": True, "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": True,
                 "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": True}  # name -> whole numbers only
SWITCH_KNOBS = ("HOROVOD_HIERARCHICAL_ALLREDUCE", "HOROVOD_HIERARCHICAL_ALLGATHER", "HOROVOD_AUTOTUNE",
                "HOROVOD_TIMELINE_MARK_CYCLES", "HOROVOD_STALL_CHECK_DISABLE", "HOROVOD_MPI_THREADS_DISABLE",
                "HOROVOD_DISABLE_GROUP_FUSION", "HOROVOD_ELASTIC", "HOROVOD_ENABLE_ASYNC_COMPLETION",
                "HOROVOD_NCCL_ENABLE_ASYNC_COMPLETION", "HOROVOD_BATCH_D2D_MEMCOPIES", "HOROVOD_LOG_HIDE_TIME")
_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")


def slurm_minutes(text: str) -> int | None:
    """Minutes (seconds rounded up) of a time in sbatch's formats; None if it is not one or is zero."""
    match = _TIME.match(text.strip())
    if not match:
        return None
    days, first, second, third = match.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = int(first), int(second or 0), int(third or 0)
    elif third is not None:  # HH:MM:SS
        hours, minutes, seconds = int(first), int(second), int(third)
    else:  # MM or MM:SS
        hours, minutes, seconds = 0, int(first), int(second or 0)
    total = int(days or 0) * 1440 + hours * 60 + minutes + (1 if seconds else 0)
    return total or None


@dataclass(frozen=True)
class Workload:
    """One benchmark with its fixed arguments, and the per-workload axes (empty: the sweep's)."""

    benchmark: str
    args: tuple[str, ...] = ()
    batch_size: tuple[int, ...] = ()
    precision: tuple[str, ...] = ()


@dataclass(frozen=True)
class SlurmOptions:
    """How each run becomes a SLURM job."""

    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_min: int = 60
    constraint: str | None = None
    exclusive: bool = False
    directives: tuple[str, ...] = ()
    setup: tuple[str, ...] = ()
    array_parallelism: int | None = None
    gpus: bool = True
    mpi: str = "pmix"
    cpus_per_task: int | None = None
    mem_gb: int | None = None
    gpus_per_task: bool = False  # one GPU per task (--gpus-per-task=1) instead of the node's GPUs per node
    gpu_type: str | None = None  # --gpus-per-node=TYPE:N where a cluster has several GPU models


@dataclass(frozen=True)
class Sweep:
    """A validated sweep file."""

    path: Path
    name: str
    system: str = "local"
    launchers: tuple[tuple[str, str], ...] = (("horovodrun", "gloo"),)
    repeats: int = 1
    max_runs: int = 10_000
    timeout: float = 1800.0
    transport: str = "auto"  # MPI transport of every run (TRANSPORTS), for the launchers that select one
    retries: int = 0  # a failed or timed-out run is started again up to this many times
    target_ci: float | None = None  # adaptive run length of every training run (percent), with max_steps
    max_steps: int | None = None
    workloads: tuple[Workload, ...] = ()
    np: tuple[int, ...] = ()
    nodes: tuple[int, ...] = ()
    gpus_per_node: tuple[int, ...] = ()
    placements: tuple[str | tuple[int, ...], ...] = ()
    batch_size: tuple[int, ...] = ()
    precision: tuple[str, ...] = ()
    independent: tuple[bool, ...] = (False,)
    knobs: tuple[tuple[str, tuple[Any, ...]], ...] = ()  # benchmark knobs (suite/core/axes.py) and their values
    env: tuple[tuple[str, tuple[str, ...]], ...] = ()
    baseline: bool = True
    bind_cpus: bool = True
    node_gpus: int | None = None
    cpu_slots: int | None = None  # with placements: each on a node without GPUs, screen this many CPU slots
    topology: Path | None = None
    hosts: tuple[str, ...] = ("localhost",)
    ssh_port: int | None = None
    ssh_identity_file: Path | None = None
    output: Path | None = None
    slurm: SlurmOptions = field(default_factory=SlurmOptions)
    container: Container | None = None  # every rank inside this image (launchers/container.py)
    fit: FitOptions | None = None  # a search for the largest model per configuration instead of measurements


class _Reader:
    """Typed access to one mapping of the file; every complaint names the file and the key."""

    def __init__(self, path: Path, data: Any, where: str, keys: tuple[str, ...]) -> None:
        self.path, self.where = path, where
        if not isinstance(data, Mapping):
            self.fail(where or "the file", f"must be a mapping of keys, got {type(data).__name__}")
        unknown = sorted(str(k) for k in set(data) - set(keys))
        if unknown:
            hint = difflib.get_close_matches(unknown[0], keys, n=1)
            self.fail(self.key(unknown[0]), "unknown key" + (f" (did you mean {hint[0]!r}?)" if hint else "")
                      + f"; valid: {', '.join(keys)}")
        self.data = data

    def key(self, name: str) -> str:
        return f"{self.where}.{name}" if self.where else name

    def fail(self, key: str, message: str) -> None:
        raise SweepError(f"{self.path}: {key}: {message}")

    def get(self, name: str, convert: Callable[[Any, str], T], default: T) -> T:
        if name not in self.data or self.data[name] is None:
            return default
        return convert(self.data[name], self.key(name))

    def many(self, name: str, convert: Callable[[Any, str], T], default: tuple[T, ...] = ()) -> tuple[T, ...]:
        """A list, or a single value standing for a list of one."""
        if name not in self.data or self.data[name] is None:
            return default
        value = self.data[name]
        items = value if isinstance(value, list) else [value]
        if not items:
            self.fail(self.key(name), "must not be an empty list")
        keys = [f"{self.key(name)}[{i}]" for i in range(len(items))] if isinstance(value, list) else [self.key(name)]
        out = tuple(convert(item, key) for item, key in zip(items, keys))
        if len(set(map(repr, out))) != len(out):
            self.fail(self.key(name), f"repeats a value in {list(out)}")
        return out

    # converters: value, key -> typed value
    def text(self, value: Any, key: str) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)) or str(value) == "":
            self.fail(key, f"expected a non-empty string, got {value!r}")
        problem = text_problem(str(value))
        if problem:
            self.fail(key, problem)
        return str(value)

    def grammar(self, pattern: re.Pattern[str], what: str) -> Callable[[Any, str], str]:
        """A string of its own grammar (a host, a SLURM name, a path handed to ssh unquoted)."""
        def convert(value: Any, key: str) -> str:
            problem = grammar_problem(self.text(value, key), pattern, what)
            if problem:
                self.fail(key, problem)
            return str(value)
        return convert

    def positive(self, value: Any, key: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            self.fail(key, f"expected a positive integer, got {value!r}")
        return int(value)

    def count(self, value: Any, key: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            self.fail(key, f"expected a whole number, 0 or more, got {value!r}")
        return int(value)

    def retries(self, value: Any, key: str) -> int:
        count = self.count(value, key)
        if count > MAX_RETRIES:
            self.fail(key, f"at most {MAX_RETRIES} (a run that fails that often will not pass), got {value!r}")
        return count

    def port(self, value: Any, key: str) -> int:
        port = self.positive(value, key)
        if port > 65535:
            self.fail(key, f"expected a TCP port (1-65535), got {value!r}")
        return port

    def seconds(self, value: Any, key: str) -> float:
        if number_problem(value, above=0):
            self.fail(key, f"expected a positive, finite number of seconds, got {value!r}")
        return float(value)

    def amount(self, value: Any, key: str) -> float:
        if number_problem(value, above=0):
            self.fail(key, f"expected a positive, finite number, got {value!r}")
        return float(value)

    def percent(self, value: Any, key: str) -> float:
        if number_problem(value, above=0) or float(value) >= 100:
            self.fail(key, f"expected a percentage above 0 and below 100, got {value!r}")
        return float(value)

    def flag(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            self.fail(key, f"expected true or false, got {value!r}")
        return bool(value)

    def path_value(self, value: Any, key: str) -> Path:
        path = Path(self.text(value, key)).expanduser()
        return path if path.is_absolute() else (self.path.parent / path)

    def plain_path(self, value: Any, key: str) -> Path:
        """A path that reaches a command line unquoted (ssh's identity file through horovodrun)."""
        plain = self.grammar(PATH, "a plain path (letters, digits and ._/~+@%,=- only)")
        return self.path_value(plain(value, key), key)

    def choice(self, choices: tuple[str, ...]) -> Callable[[Any, str], str]:
        def convert(value: Any, key: str) -> str:
            if value not in choices:
                self.fail(key, f"{value!r} is not one of {', '.join(choices)}")
            return str(value)
        return convert

    def argv(self, value: Any, key: str) -> tuple[str, ...]:
        if isinstance(value, str):
            try:
                return tuple(shlex.split(value))
            except ValueError as exc:
                self.fail(key, f"cannot split {value!r} into arguments ({exc})")
        if isinstance(value, list) and all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
            return tuple(str(v) for v in value)
        self.fail(key, f"expected a list of arguments or one string, got {value!r}")
        raise AssertionError  # unreachable: fail raises

    def knob_value(self, name: str) -> Callable[[Any, str], str]:
        """A knob's value: a number where Horovod reads one, a switch where it reads 0/1, else plain text."""
        def convert(value: Any, key: str) -> str:
            text = self.text(value, key)
            if name in NUMERIC_KNOBS:
                try:
                    number = int(text) if NUMERIC_KNOBS[name] else float(text)
                except ValueError:
                    number = None
                if number is None or number_problem(number, minimum=0):
                    self.fail(key, f"{name} takes a non-negative {'whole ' if NUMERIC_KNOBS[name] else ''}number, "
                                   f"got {text!r}")
            if name in SWITCH_KNOBS and text.lower() not in ("0", "1", "true", "false"):
                self.fail(key, f"{name} takes 0 or 1, got {text!r}")
            return text
        return convert

    def mount(self, value: Any, key: str) -> tuple[str, str]:
        """A container mount, ``SOURCE[:DESTINATION]`` (absolute paths; the destination defaults to the source)."""
        pair = parse_mount(self.text(value, key))
        if pair is None:
            self.fail(key, f"expected SOURCE or SOURCE:DESTINATION, absolute paths without ',' or ':', got {value!r}")
        return pair  # type: ignore[return-value]

    def minutes(self, value: Any, key: str) -> int:
        """SLURM time as minutes: a number of minutes, or sbatch's MM:SS, HH:MM:SS, D-HH, D-HH:MM[:SS]."""
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        total = slurm_minutes(value) if isinstance(value, str) else None
        if total is None:
            self.fail(key, f"expected minutes or sbatch's time format (MM:SS, HH:MM:SS, D-HH:MM:SS), got {value!r}")
        return total  # type: ignore[return-value]

    def placement(self, value: Any, key: str) -> str | tuple[int, ...]:
        if isinstance(value, list):
            if not value or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
                self.fail(key, f"expected GPU ids such as [0, 3], got {value!r}")
            if len(set(value)) != len(value):
                self.fail(key, f"GPU ids repeat in {value!r}")
            return tuple(value)
        return self.text(value, key)

    def knob(self, name: str, key: str) -> str:
        if not ENV_NAME.match(name):
            self.fail(key, f"{name[:60]!r} is not an environment variable name")
        if name.upper().startswith(MCA_PREFIX):  # Open MPI's parameter names are lower case after the prefix
            right = MCA_PREFIX + name[len(MCA_PREFIX):].lower()
            if name != right:
                self.fail(key, f"{name} is not how Open MPI reads an MCA parameter; did you mean {right}?")
        elif name.upper().startswith(KNOB_PREFIXES) and name != name.upper():
            self.fail(key, f"{name} is not upper case; did you mean {name.upper()}?")
        if name.startswith("HOROVOD_") and name not in HOROVOD_KNOBS:
            hint = difflib.get_close_matches(name, sorted(HOROVOD_KNOBS), n=1)
            self.fail(key, f"{name} is not a Horovod knob" + (f" (did you mean {hint[0]}?)" if hint else "")
                      + "; see Horovod's documentation of HOROVOD_* variables")
        if name.startswith("NCCL_") and name not in NCCL_VARIABLES | NCCL_OTHER_NAMES \
                and not name.startswith(NCCL_PLUGIN_PREFIXES):
            hint = difflib.get_close_matches(name, sorted(NCCL_VARIABLES), n=1)
            self.fail(key, f"{name} is read by no NCCL release from 2.28 to 2.30 nor a known NCCL plugin"
                      + (f" (did you mean {hint[0]}?)" if hint else "") + "; NCCL would ignore it silently")
        return name


# sbatch options hvdbench sets itself for every job: a directive would silently override them
SET_BY_HVDBENCH = {"nodes": "its nodes", "N": "its nodes", "ntasks-per-node": "one task per rank or per node",
                   "ntasks": "one task per rank or per node", "n": "one task per rank or per node",
                   "gpus-per-node": "its GPUs per node", "gres": "its GPUs per node", "time": "slurm.time",
                   "t": "slurm.time", "partition": "slurm.partition", "p": "slurm.partition",
                   "account": "slurm.account", "A": "slurm.account", "qos": "slurm.qos", "job-name": "the sweep name",
                   "J": "the sweep name", "output": "the results directory", "o": "the results directory",
                   "error": "the results directory", "e": "the results directory", "nodelist": "a pinned run's host",
                   "w": "a pinned run's host", "array": "slurm.array_parallelism", "a": "slurm.array_parallelism",
                   "exclusive": "slurm.exclusive",
                   "constraint": "slurm.constraint", "C": "slurm.constraint", "mem": "slurm.mem_gb",
                   "cpus-per-task": "slurm.cpus_per_task", "c": "slurm.cpus_per_task",
                   "gpus": "its GPUs per node", "G": "its GPUs per node", "gpus-per-task": "slurm.gpus_per_task",
                   "requeue": "retries (a job with retries is requeueable)",
                   "no-requeue": "retries (a job with retries is requeueable)",
                   "signal": "the stop signal that records a run ahead of the time limit"}

_TOP = ("name", "system", "launcher", "controller", "repeats", "max_runs", "timeout", "transport", "retries",
        "target_ci", "max_steps",
        "workloads", "axes", "baseline",
        "bind_cpus", "node_gpus", "cpu_slots", "topology", "hosts", "ssh_port", "ssh_identity_file", "output",
        "slurm", "container", "fit")
_FIT = ("grow", "memory_cap_gib", "limit")
_CONTAINER = ("image", "runtime", "mounts", "env", "python")
KNOB_AXES = tuple(name for name in AXES if name not in ("batch_size", "precision"))
_AXES = ("np", "nodes", "gpus_per_node", "placements", "batch_size", "precision", "independent", *KNOB_AXES, "env")
_WORKLOAD = ("benchmark", "args", "batch_size", "precision")
_SLURM = ("partition", "account", "qos", "time", "constraint", "exclusive", "directives", "setup",
          "array_parallelism", "gpus", "mpi", "cpus_per_task", "mem_gb", "gpus_per_task", "gpu_type")


def launcher_pairs(reader: _Reader, launchers: tuple[str, ...],
                   controllers: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(launcher, controller) for every launcher and each named controller it starts; with none named,
    the one controller all of them start (launchers compared in one sweep run alike), else each one's own."""
    if not controllers:
        return tuple(default_controllers(launchers).items())
    pairs = tuple((name, c) for name in launchers for c in controllers if c in launcher_class(name).controllers)
    for name in launchers:
        cls = launcher_class(name)
        if not any(n == name for n, _ in pairs):
            reader.fail("controller", f"launcher {name} {cls.controllers_text()}: add controller {cls.controllers[0]}")
    return pairs


def load_sweep(path: Path) -> Sweep:
    """Read and validate a sweep file (values only; plan.py checks them against benchmarks and GPUs)."""
    path = Path(path)
    top = _Reader(path, read_document(path), "", _TOP)
    workloads = _workloads(top)  # checked in the order a reader meets them: workloads, axes, env, slurm, launchers
    axes = _Reader(path, top.data.get("axes") or {}, "axes", _AXES)
    env = _env(axes)
    slurm = _Reader(path, top.data.get("slurm") or {}, "slurm", _SLURM)
    launchers = top.many("launcher", top.choice(tuple(launcher_names())), ("horovodrun",))
    pairs = launcher_pairs(top, launchers, top.many("controller", top.choice(CONTROLLERS), ()))
    sweep = Sweep(
        path=path, name=top.get("name", top.text, path.stem), system=top.get("system", top.text, "local"),
        launchers=pairs,
        repeats=top.get("repeats", top.positive, 1), max_runs=top.get("max_runs", top.positive, 10_000),
        timeout=top.get("timeout", top.seconds, 1800.0), transport=top.get("transport", top.choice(TRANSPORTS), "auto"),
        retries=top.get("retries", top.retries, 0), target_ci=top.get("target_ci", top.percent, None),
        max_steps=top.get("max_steps", top.positive, None),
        workloads=workloads, np=axes.many("np", axes.positive), nodes=axes.many("nodes", axes.positive),
        gpus_per_node=axes.many("gpus_per_node", axes.positive),
        placements=axes.many("placements", axes.placement), batch_size=axes.many("batch_size", axes.positive),
        precision=axes.many("precision", axes.text), independent=axes.many("independent", axes.flag, (False,)),
        knobs=tuple((name, values) for name in KNOB_AXES
                    if (values := axes.many(name, {bool: axes.flag, int: axes.positive}.get(AXES[name].kind,
                                                                                              axes.text)))),
        env=env, baseline=top.get("baseline", top.flag, True), bind_cpus=top.get("bind_cpus", top.flag, True),
        node_gpus=top.get("node_gpus", top.positive, None), cpu_slots=top.get("cpu_slots", top.positive, None),
        topology=top.get("topology", top.path_value, None),
        hosts=top.many("hosts", top.grammar(HOST, "a host name or address"), ("localhost",)),
        ssh_port=top.get("ssh_port", top.port, None),
        ssh_identity_file=top.get("ssh_identity_file", top.plain_path, None),
        output=top.get("output", lambda v, k: Path(top.text(v, k)).expanduser(), None),  # relative to where it runs
        slurm=_slurm_options(slurm, top.get("timeout", top.seconds, 1800.0)), container=_container(top),
        fit=_fit(top, workloads),
    )
    _check_sweep(sweep, top, axes, slurm)
    return sweep


def _workloads(top: _Reader) -> tuple[Workload, ...]:
    """The sweep's workloads: a benchmark name, or a benchmark with its args and own batch sizes and precisions."""
    if "workloads" not in top.data:
        top.fail("workloads", "missing: name at least one benchmark, e.g. [{benchmark: cifar10}]")
    raw = top.data["workloads"]
    if not isinstance(raw, list) or not raw:
        top.fail("workloads", "expected a non-empty list of {benchmark: NAME, args: [...]}")
    workloads = []
    for i, item in enumerate(raw):
        w = _Reader(top.path, {"benchmark": item} if isinstance(item, str) else item, f"workloads[{i}]", _WORKLOAD)
        if "benchmark" not in w.data:
            w.fail(w.key("benchmark"), "missing")
        workloads.append(Workload(w.get("benchmark", w.text, ""), w.get("args", w.argv, ()),
                                  w.many("batch_size", w.positive), w.many("precision", w.text)))
    return tuple(workloads)


def _env(axes: _Reader) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """axes.env: each variable's values, sorted by name."""
    reader = _Reader(axes.path, axes.data.get("env") or {}, "axes.env", tuple(axes.data.get("env") or {}))
    return tuple(sorted((reader.knob(str(name), reader.key(str(name))),
                         reader.many(str(name), reader.knob_value(str(name))))
                        for name in reader.data))


def _container(top: _Reader) -> Container | None:
    """The container: table (absent: ranks run on the host)."""
    if top.data.get("container") is None:
        return None
    box = _Reader(top.path, top.data["container"], "container", _CONTAINER)
    for key in ("image", "runtime"):
        if key not in box.data:
            box.fail(box.key(key), "missing" + (f": one of {', '.join(RUNTIMES)}" if key == "runtime" else ""))
    container = Container(image=box.get("image", box.grammar(IMAGE, "an image reference, name or path"), ""),
                          runtime=box.get("runtime", box.choice(tuple(RUNTIMES)), ""),
                          mounts=box.many("mounts", box.mount),
                          env=box.many("env", box.grammar(VARIABLE, "a variable name")),
                          python=box.get("python", box.grammar(INTERPRETER, "python3 or an absolute path inside the "
                                                                            "image"), RECIPE_PYTHON))
    problem = container.mounts_problem()
    if problem:
        box.fail(box.key("mounts"), problem)
    return container.made_absolute(top.path.parent)


def _fit(top: _Reader, workloads: tuple[Workload, ...]) -> FitOptions | None:
    """The fit: table (absent: the sweep measures): every workload must have a shape to grow."""
    if top.data.get("fit") is None:
        return None
    block = _Reader(top.path, top.data["fit"], "fit", _FIT)
    for i, workload in enumerate(workloads):
        if workload.benchmark not in GROWABLE:
            top.fail(f"workloads[{i}]", f"{workload.benchmark} has no shape for fit: to grow (offered: "
                                        f"{', '.join(GROWABLE)})")
    return FitOptions(grow=block.get("grow", block.choice(("layers", "width")), "layers"),
                      memory_cap_gib=block.get("memory_cap_gib", block.amount, None),
                      limit=block.get("limit", block.positive, 4096))


def job_minutes(timeout_s: float) -> int:
    """A job's SLURM time where the file gives none: the run's timeout, a quarter more, and 5 minutes to start (its
    environment, its ranks' imports) and record how it ended."""
    return max(5, math.ceil(timeout_s * 1.25 / 60) + 5)


def _slurm_options(slurm: _Reader, timeout_s: float) -> SlurmOptions:
    """The slurm: table; its time, where it gives none, from the sweep's timeout (job_minutes)."""
    return SlurmOptions(
        partition=slurm.get("partition", slurm.grammar(QUEUE_WORD, "a SLURM partition name"), None),
        account=slurm.get("account", slurm.grammar(QUEUE_WORD, "a SLURM account name"), None),
        qos=slurm.get("qos", slurm.grammar(QUEUE_WORD, "a SLURM QOS name"), None),
        time_min=slurm.get("time", slurm.minutes, job_minutes(timeout_s)),
        constraint=slurm.get("constraint", slurm.grammar(CONSTRAINT, "a SLURM constraint expression"), None),
        exclusive=slurm.get("exclusive", slurm.flag, False),
        directives=slurm.many("directives", slurm.grammar(DIRECTIVE, "an sbatch option such as --reservation=R")),
        setup=slurm.many("setup", slurm.text),
        array_parallelism=slurm.get("array_parallelism", slurm.positive, None),
        gpus=slurm.get("gpus", slurm.flag, True), mpi=slurm.get("mpi", slurm.choice(PMI_PLUGINS), "pmix"),
        cpus_per_task=slurm.get("cpus_per_task", slurm.positive, None),
        mem_gb=slurm.get("mem_gb", slurm.positive, None),
        gpus_per_task=slurm.get("gpus_per_task", slurm.flag, False),
        gpu_type=slurm.get("gpu_type", slurm.grammar(GRES_TYPE, "a GRES type such as a100 (no count)"), None))


GPU_SHARING_LOST = ("each rank sees only its own GPU, so CUDA IPC and NVLink peer access between the ranks of a "
                    "node are lost and NCCL falls back to slower paths (shared memory or the network); leave it "
                    "out to measure the node as training uses it")


def sweep_warnings(sweep: Sweep) -> list[str]:
    """What a valid sweep will cost its measurements, one line each: SLURM binding each rank to one GPU."""
    said = []
    if sweep.slurm.gpus_per_task:
        said.append(f"slurm.gpus_per_task: {GPU_SHARING_LOST}")
    for directive in sweep.slurm.directives:
        if directive.startswith("--gpu-bind"):
            said.append(f"slurm.directives {directive}: {GPU_SHARING_LOST}")
    return said


def _check_sweep(sweep: Sweep, top: _Reader, axes: _Reader, slurm: _Reader) -> None:
    """What the values mean together: a usable name, no SLURM directive hvdbench sets itself, transports the
    launchers know, placements GPUs per task cannot keep, max_steps without target_ci, sizes to run."""
    if not NAME.match(sweep.name):
        top.fail("name", f"{sweep.name[:60]!r} names the results directory and the jobs: letters, digits and ._- "
                         "only, starting with a letter or digit")
    for i, directive in enumerate(sweep.slurm.directives):
        # --name[=value]; a short option's value may follow its letter at once (-N2, -wnode9)
        option = directive[2:].split("=", 1)[0] if directive.startswith("--") else directive[1:2]
        if not directive.startswith("--") and option not in SET_BY_HVDBENCH:
            slurm.fail(f"slurm.directives[{i}]", f"{directive} is a short option: write sbatch's long form "
                                                 "(--option=value), as each job's #SBATCH lines take it")
        if option.startswith("container-"):
            slurm.fail(f"slurm.directives[{i}]", f"--{option} is pyxis's srun flag, not a job's #SBATCH line: "
                                                 "give the image in the container: key (image, runtime: pyxis)")
        # sbatch takes any unambiguous start of a long option (--gpus-per-n is --gpus-per-node): judge what it reads
        meant = option if option in SET_BY_HVDBENCH or not directive.startswith("--") else next(
            (name for name in SET_BY_HVDBENCH if len(name) > 1 and len(option) >= 2 and name.startswith(option)),
            option)
        if meant in SET_BY_HVDBENCH:
            said = f"--{option} (sbatch reads it as --{meant})" if meant != option else f"--{option}"
            slurm.fail(f"slurm.directives[{i}]", f"{said} is set by hvdbench from each run "
                                                 f"({SET_BY_HVDBENCH[meant]}); remove it")
    for name, _ in sweep.launchers:
        try:
            launcher_class(name).check_transport(sweep.transport)
        except UsageError as exc:
            top.fail("transport", str(exc))
    others = sorted({name for name, _ in sweep.launchers} - {"srun"})
    if sweep.container is not None and RUNTIMES[sweep.container.runtime].srun_only and others:
        top.fail("container.runtime", f"pyxis puts ranks in the image through srun's flags: launcher srun only, "
                                      f"not {', '.join(others)} (apptainer, charliecloud and podman work with every "
                                      "launcher)")
    if sweep.slurm.gpus_per_task and sweep.placements:
        slurm.fail("slurm.gpus_per_task", "gives each task whichever GPU SLURM picks, so axes.placements cannot "
                                          "hold; remove one of them")
    if sweep.max_steps is not None and sweep.target_ci is None:
        top.fail("max_steps", "applies with target_ci (a fixed-length run takes its --steps)")
    if not (sweep.np or sweep.nodes or sweep.gpus_per_node):
        axes.fail("axes.np", "give the rank counts to run: np (one node) and/or nodes with gpus_per_node")
    if bool(sweep.nodes) != bool(sweep.gpus_per_node):
        axes.fail("axes.nodes" if not sweep.nodes else "axes.gpus_per_node",
                  "nodes and gpus_per_node go together (ranks = nodes x gpus_per_node)")
