"""A run on disk: RunSpec (the one typed, frozen description of a run, written as run.json beside its rank logs),
RunStatus (how an attempt ended, status.json) and RunFolder (the one owner of a run folder's file names)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import uuid
from dataclasses import asdict, dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

from .containers import RECIPE_PYTHON, Container
from .errors import SpecError, WriteError
from .records import RANK_LOGS, rank_log_name
from .run_flags import Flags, run_flags, train_flags
from .train_flags import TrainFlags
from .validate import read_small_text, text_problem

SMALL_FILE = 1 << 20  # run.json and status.json are a few kB; nothing larger is read

RUN_FILE = "run.json"
STATUS_FILE = "status.json"
UNDER_WAY = ("submitted", "pending", "running", "requeued")  # a run's states while its job is under way
LAUNCHER_LOG = "launcher.log"  # the launcher's (or, under a scheduler, the first task's) output
COMMAND_FILE = "command.sh"  # the attempt's command, shell-quoted
TASK_LOG = "task-{task}.log"  # a scheduler task's output where each task starts one rank
NCCL_LOG = "nccl-rank-{rank}.log"  # a rank's NCCL INFO output (INIT, NET) on a GPU: the network NCCL used
RENDEZVOUS = "rendezvous-{token}"  # where --exchange mirrored's workers leave their addresses for each other
ATTEMPT_PREFIX = "attempt-"  # earlier attempts of a run, moved aside by a rerun; never read as runs
# what one attempt's ranks leave in its run directory, and what its launcher leaves besides (run.json stays:
# the same run)
RANK_FILES = (RANK_LOGS, "trace-rank*.json", "tf-profile-rank*", NCCL_LOG.format(rank="*"))
ATTEMPT_FILES = (*RANK_FILES, "timeline*.json", STATUS_FILE, LAUNCHER_LOG, TASK_LOG.format(task="*"), COMMAND_FILE,
                 RENDEZVOUS.format(token="*"))
HOROVOD_CONTROLLERS = ("gloo", "mpi")  # Horovod's controllers, which its launchers start
CONTROLLERS = (*HOROVOD_CONTROLLERS, "c10d")  # ... and torch.distributed's own rendezvous (torchrun: no Horovod)
# How MPI moves bytes: auto (MPI's own choice, UCX where built in), ucx (required), tcp (Open MPI's ob1 with
# TCP between nodes and shared memory within; no UCX, no verbs). A spec stores None for auto.
TRANSPORTS = ("auto", "ucx", "tcp")
# Where a run stood in the plan that ran it (run.json's "order", beside the spec): its position of how many, and its
# round of how many (a plan runs every configuration once per round, so repeats are spread in time)
ORDER_KEYS = ("position", "of", "round", "rounds")
# Fields added after ids were first published: they enter the id only when set, so older runs keep theirs.
_HASHED_WHEN_SET = ("cpus", "host", "transport", "image", "runtime", "inputs", "mounts", "container_env",
                    "container_python")


@dataclass(frozen=True)
class RunSpec:
    """What one run measures and how it is launched; its id is a stable hash of these fields."""

    benchmark: str
    framework: str = "pytorch"
    args: tuple[str, ...] = ()
    np: int = 1
    nodes: int = 1
    placement: str | None = None
    devices: tuple[int, ...] | None = None
    cpus: tuple[str, ...] | None = None
    launcher: str = "horovodrun"
    controller: str = "gloo"
    env: tuple[tuple[str, str], ...] = ()
    repeat: int = 0
    system: str = "local"
    host: str | None = None  # pin a one-node run to this node (screening every node)
    transport: str | None = None  # MPI transport (TRANSPORTS) where not auto
    image: str | None = None  # the container image every rank runs in (None: none)
    runtime: str | None = None  # the container runtime that starts it (core/containers.py)
    inputs: tuple[tuple[str, str], ...] | None = None  # each path flag's file content, hashed (--model-file: sha256)
    mounts: tuple[tuple[str, str], ...] | None = None  # with an image: the folders mounted into it (source, inside)
    container_env: tuple[str, ...] | None = None  # with an image: the variables passed into it besides the run's own
    container_python: str | None = None  # with an image: its interpreter (None: the recipe's)

    def __post_init__(self) -> None:
        for name in ("benchmark", "framework", "launcher", "controller", "system"):
            _check_type(self, name, str)
        for name in ("placement", "host", "image", "runtime"):
            if getattr(self, name) is not None:
                _check_type(self, name, str)
        if not self.benchmark:
            raise SpecError("RunSpec.benchmark must not be empty")
        if not self.system.strip() or text_problem(self.system):
            raise SpecError(f"RunSpec.system {self.system[:40]!r}: a label of printable text, not empty")
        for name in ("np", "nodes", "repeat"):
            _check_type(self, name, int)
        if self.np < 1 or self.nodes < 1 or self.repeat < 0:
            raise SpecError(f"RunSpec needs np >= 1, nodes >= 1, repeat >= 0 (got np={self.np}, "
                            f"nodes={self.nodes}, repeat={self.repeat})")
        if self.np % self.nodes:
            raise SpecError(f"RunSpec np={self.np} is not a multiple of nodes={self.nodes}")
        if self.transport is not None and self.transport not in TRANSPORTS[1:]:
            raise SpecError(f"RunSpec.transport {self.transport!r} is not one of {', '.join(TRANSPORTS[1:])} "
                            "(None: auto)")
        if (self.image is None) != (self.runtime is None):
            raise SpecError(f"RunSpec.image and RunSpec.runtime go together (image={self.image!r}, "
                            f"runtime={self.runtime!r})")
        if self.image is None and (self.mounts or self.container_env or self.container_python):
            raise SpecError("RunSpec.mounts, container_env and container_python apply with an image")
        if self.controller not in CONTROLLERS:
            raise SpecError(f"RunSpec.controller {self.controller!r} is not one of {', '.join(CONTROLLERS)}")
        if self.devices is not None and (len(set(self.devices)) != len(self.devices) or any(
                not isinstance(d, int) or isinstance(d, bool) or d < 0 for d in self.devices)):
            raise SpecError(f"RunSpec.devices must be distinct non-negative ids, got {list(self.devices)}")
        if self.host is not None and (not isinstance(self.host, str) or not self.host or self.nodes != 1):
            raise SpecError(f"RunSpec.host pins a one-node run to a node name, got host={self.host!r} "
                            f"with nodes={self.nodes}")
        if self.cpus is not None and len(self.cpus) != self.ranks_per_node:
            raise SpecError(f"RunSpec.cpus gives {len(self.cpus)} CPU list(s) for {self.ranks_per_node} "
                            "rank(s) per node: one per local rank")

    @property
    def inputs_text(self) -> str:
        """The files the run read, as ``--model-file=sha256:1a2b…`` (empty where its arguments name none)."""
        return " ".join(f"{flag}={digest}" for flag, digest in self.inputs or ())

    @property
    def container(self) -> Container | None:
        """The container every rank runs in, whole (None: on the host)."""
        if self.image is None or self.runtime is None:
            return None
        return Container(self.image, self.runtime, self.mounts or (), self.container_env or (),
                         self.container_python or RECIPE_PYTHON)

    @property
    def ranks_per_node(self) -> int:
        """Ranks (one per GPU) on each node."""
        return self.np // self.nodes

    @property
    def flags(self) -> Flags:
        """Every benchmark flag of the run as its benchmark's parser reads ``args`` (parsed once per set of
        arguments, core/run_flags.py); empty for an imported tool's run or arguments no parser here reads."""
        return run_flags(self.benchmark, self.args)

    @property
    def train(self) -> TrainFlags | None:
        """The run's shared training flags, typed (core/train_flags.py); None for a benchmark that does not train
        (collectives, p2p), an imported tool's run, or arguments no parser here reads."""
        return train_flags(self.benchmark, self.args)

    @property
    def env_dict(self) -> dict[str, str]:
        """The environment knobs as a mapping."""
        return dict(self.env)

    @cached_property
    def id(self) -> str:
        """Stable, readable id: benchmark, rank count and a hash of every field (computed once: a spec is
        frozen)."""
        fields = {k: v for k, v in self.to_dict().items() if not (k in _HASHED_WHEN_SET and v is None)}
        digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:10]
        return f"{self.benchmark}-np{self.np}-r{self.repeat}-{digest}"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready fields."""
        out = dataclasses.asdict(self)
        out["args"] = list(self.args)
        out["devices"] = None if self.devices is None else list(self.devices)
        out["cpus"] = None if self.cpus is None else list(self.cpus)
        out["env"] = dict(self.env)
        out["inputs"] = None if self.inputs is None else dict(self.inputs)
        out["mounts"] = None if self.mounts is None else [list(pair) for pair in self.mounts]
        out["container_env"] = None if self.container_env is None else list(self.container_env)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RunSpec":
        """Build from plain fields; an unknown field is an error that lists the valid ones."""
        valid = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(valid))
        if unknown:
            raise SpecError(f"unknown RunSpec field(s) {', '.join(unknown)}; valid: {', '.join(valid)}")
        values = dict(data)
        for name in ("args", "devices", "cpus", "mounts", "container_env"):
            if values.get(name) is not None and not isinstance(values[name], (list, tuple)):
                raise SpecError(f"RunSpec.{name} must be a list, got {type(values[name]).__name__} "
                                f"{values[name]!r:.60}")
        if "args" in values:
            values["args"] = tuple(str(a) for a in values["args"])
        if values.get("devices") is not None:
            values["devices"] = tuple(values["devices"])
        if values.get("cpus") is not None:
            values["cpus"] = tuple(str(c) for c in values["cpus"])
        if values.get("mounts") is not None:
            if not all(isinstance(pair, (list, tuple)) and len(pair) == 2 for pair in values["mounts"]):
                raise SpecError(f"RunSpec.mounts must be [source, destination] pairs, got {values['mounts']!r:.60}")
            values["mounts"] = tuple((str(source), str(inside)) for source, inside in values["mounts"])
        if values.get("container_env") is not None:
            values["container_env"] = tuple(str(name) for name in values["container_env"])
        for name in ("env", "inputs"):
            if values.get(name) is not None:
                given = values[name]
                pairs = given.items() if isinstance(given, Mapping) else given
                values[name] = tuple(sorted((str(k), str(v)) for k, v in pairs))
        return cls(**values)

    def write(self, run_dir: Path, order: Mapping[str, int] | None = None) -> Path:
        """Write run.json into run_dir (created if needed) and return its path; ``order`` (ORDER_KEYS: its position in
        the plan that runs it and its round) is kept beside the spec, outside its id; without one, the order an
        earlier run.json of the same run held stays (a job's task writes run.json again)."""
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / RUN_FILE
        payload: dict[str, Any] = {"schema": 1, "id": self.id, "spec": self.to_dict()}
        if order is None and path.is_file():
            try:
                earlier = json.loads(read_small_text(path, SMALL_FILE, "a run description"))
                order = earlier.get("order") if earlier.get("id") == self.id else None
            except (ValueError, OSError, AttributeError):
                order = None
        if isinstance(order, Mapping) and all(isinstance(order.get(key), int) for key in ORDER_KEYS):
            payload["order"] = {key: int(order[key]) for key in ORDER_KEYS}
        write_whole(path, json.dumps(payload, indent=2) + "\n")
        return path

    @classmethod
    def read(cls, path: Path) -> "RunSpec":
        """Read a run.json; a missing, unreadable or malformed file is a SpecError naming it."""
        try:
            payload = json.loads(read_small_text(Path(path), SMALL_FILE, "a run description"))
            spec = payload["spec"]
        except ValueError as exc:
            raise SpecError(f"{path}: not a readable run description ({str(exc).split(': ', 1)[-1]})") from None
        except (KeyError, TypeError, RecursionError) as exc:
            raise SpecError(f"{path}: not a readable run description ({type(exc).__name__}: {exc})") from None
        if not isinstance(spec, Mapping):
            raise SpecError(f"{path}: not a readable run description (its spec is a {type(spec).__name__})")
        try:
            return cls.from_dict(spec)
        except (SpecError, TypeError, ValueError, AttributeError) as exc:
            raise SpecError(f"{path}: {exc}") from None


def _check_type(spec: RunSpec, name: str, kind: type) -> None:
    value = getattr(spec, name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise SpecError(f"RunSpec.{name} must be {kind.__name__}, got {value!r}")


@dataclass(frozen=True)
class RunStatus:
    """How a run ended (ok, failed, timeout, interrupted, cancelled, preempted) or that it is under way
    (running, submitted); with the exit code, a one-line reason, the output's last lines and, for a
    scheduler, the job id and the scheduler's name (launchers/schedulers.py: whose queue to ask of it)."""

    status: str
    returncode: int | None
    seconds: float
    message: str = ""
    tail: str = ""
    job_id: str | None = None
    scheduler: str | None = None

    def write(self, run_dir: Path) -> None:
        """Write status.json into the run directory (the launcher's record of how the run ended)."""
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WriteError(f"cannot write {run_dir / STATUS_FILE}: {exc.strerror}") from None
        write_whole(run_dir / STATUS_FILE, json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def read(cls, run_dir: Path) -> "RunStatus | None":
        """The recorded status, or None where the run has none (never run, or started by hand) or it is
        unreadable: no regular file, too large, not JSON, fields of the wrong type."""
        try:
            data = json.loads(read_small_text(run_dir / STATUS_FILE, SMALL_FILE, "a run status", strict=False))
            status = cls(**data)
        except (ValueError, TypeError, RecursionError):
            return None
        return status if status.well_typed() else None

    def well_typed(self) -> bool:
        """Every field of its type (a status.json written by anything else may not be)."""
        number = (int, float)
        return (isinstance(self.status, str) and isinstance(self.message, str) and isinstance(self.tail, str)
                and (self.returncode is None
                     or (isinstance(self.returncode, int) and not isinstance(self.returncode, bool)))
                and isinstance(self.seconds, number) and not isinstance(self.seconds, bool)
                and (self.job_id is None or isinstance(self.job_id, str))
                and (self.scheduler is None or isinstance(self.scheduler, str)))


def write_whole(path: Path, text: str) -> None:
    """Write a small file whole or not at all (a temporary file of this writer's own renamed over it, so that
    tasks recording the same status at once never take each other's); a full disk or a read-only folder is a
    WriteError naming the file, with nothing half-written left behind."""
    tmp = path.with_name(f"{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise WriteError(f"cannot write {path}: {exc.strerror}") from None


def _attempt_number(path: Path) -> int | None:
    number = path.name.removeprefix(ATTEMPT_PREFIX)
    return int(number) if path.name.startswith(ATTEMPT_PREFIX) and number.isdigit() else None


def earlier_attempts(run_dir: Path) -> list[Path]:
    """The ``attempt-N/`` folders of a run, in order."""
    found = [(n, p) for p in run_dir.glob(f"{ATTEMPT_PREFIX}*") if (n := _attempt_number(p)) is not None]
    return [p for _, p in sorted(found)]


def keep_earlier_attempt(run_dir: Path, patterns: tuple[str, ...] = ATTEMPT_FILES, now: RunStatus | None = None,
                         ended: RunStatus | None = None) -> Path | None:
    """Move what an earlier attempt left in a run directory (its files matching ``patterns``: an executor
    moves everything, a rank started by hand only rank files) into ``attempt-N/`` (N one more than the
    last), so a rerun never deletes what was measured; the folder made, or None where there was nothing
    (or only the status a submission wrote). With ``now`` (the starting attempt's status) and ``ended`` (how the
    earlier one ended), ``ended`` is written into ``attempt-N/`` and the run's status.json goes from the earlier status
    to ``now`` in one rename, never missing and never showing the ending meanwhile (a reader would take the run as
    ended and submit it again)."""
    leftovers = sorted({p for pattern in patterns for p in run_dir.glob(pattern)})
    status_file = run_dir / STATUS_FILE
    if leftovers == [status_file] and getattr(RunStatus.read(run_dir), "status", None) == "submitted":
        leftovers = []  # a job's first start: its submission's status is no attempt
    folder = None
    if leftovers:
        last = earlier_attempts(run_dir)[-1:]
        folder = run_dir / f"{ATTEMPT_PREFIX}{(_attempt_number(last[0]) or 0) + 1 if last else 1}"
        folder.mkdir()
        for path in leftovers:
            if path == status_file and ended is not None and now is not None:
                ended.write(folder)  # the run's own stays until ``now`` replaces it
            else:
                path.rename(folder / path.name)
    if now is not None:
        now.write(run_dir)
    return folder


_UNREAD: Any = object()


class RunFolder:
    """One run's folder and the name of everything in it (submitit's JobPaths): run.json, status.json (read once,
    on first use), the rank logs, the launcher's and the tasks' output, the command, and earlier attempts."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._status: RunStatus | None = _UNREAD

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    @property
    def run_file(self) -> Path:
        return self.path / RUN_FILE

    @property
    def status_file(self) -> Path:
        return self.path / STATUS_FILE

    @property
    def command_file(self) -> Path:
        return self.path / COMMAND_FILE

    @property
    def launcher_log(self) -> Path:
        return self.path / LAUNCHER_LOG

    def task_log(self, task: int) -> Path:
        """The output of a scheduler's task ``task`` (where each task starts one rank)."""
        return self.path / TASK_LOG.format(task=task)

    def rank_log(self, rank: int) -> Path:
        return self.path / rank_log_name(rank)

    def rank_logs(self) -> list[Path]:
        """Every rank log in the folder, by name."""
        return sorted(self.path.glob(RANK_LOGS))

    def nccl_log(self, rank: int) -> Path:
        return self.path / NCCL_LOG.format(rank=rank)

    def nccl_logs(self) -> list[Path]:
        """Every rank's NCCL INFO output in the folder, by name."""
        return sorted(self.path.glob(NCCL_LOG.format(rank="*")))

    def spec(self) -> RunSpec:
        """The run's RunSpec (SpecError where run.json is missing or malformed)."""
        return RunSpec.read(self.run_file)

    def order(self) -> str:
        """Where the run stood in the plan that ran it (``3 of 12, round 1 of 3``); "" where run.json holds no order
        (a run made by an older hvdbench, or by hand) or an unreadable one."""
        try:
            order = json.loads(read_small_text(self.run_file, SMALL_FILE, "a run description")).get("order")
            values = [order[key] for key in ORDER_KEYS]
        except (ValueError, OSError, TypeError, KeyError, AttributeError):
            return ""
        if not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v < 10**9 for v in values):
            return ""
        return f"{values[0]} of {values[1]}, round {values[2]} of {values[3]}"

    @property
    def status(self) -> RunStatus | None:
        """The recorded status as it was when first asked (None: none, or unreadable)."""
        if self._status is _UNREAD:
            self._status = RunStatus.read(self.path)
        return self._status

    def status_now(self) -> RunStatus | None:
        """The recorded status read again (another task may have written it since)."""
        self._status = RunStatus.read(self.path)
        return self._status

    def write_status(self, status: RunStatus) -> None:
        status.write(self.path)
        self._status = status

    def attempts(self) -> list["RunFolder"]:
        """The run's earlier attempts (``attempt-N/``), in order."""
        return [RunFolder(path) for path in earlier_attempts(self.path)]
