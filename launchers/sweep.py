"""Sweep files: one YAML or TOML file, validated before anything runs, into typed options.

A sweep names the system, the workloads and their arguments, the axes to sweep (sizes, placements, batch sizes,
precisions, Horovod/NCCL knobs), repeats, the launcher and the SLURM options. Every option is declared once, as a
field below (core/options.py): its key, its command-line flag where it has one, its default, its check and its
help; the reader and the flags are generated from those fields. Every problem is one :class:`SweepError` naming
the file, the key and the valid choices. ``plan.py`` turns a :class:`Sweep` into RunSpecs.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, replace
from pathlib import Path
from typing import Any

from hvdbench.core.axes import AXES
from hvdbench.core.containers import RUNTIMES, Container, from_block
from hvdbench.core.errors import UsageError
from hvdbench.core.metrics import MARGIN_PCT, MIN_RUNS
from hvdbench.core.options import (Argv, Block, Check, Choice, FilePath, Grammar, Kind, Number, OptionError, Switch,
                                   Text, Whole, add_flags, keys_of, option, options_of)
from hvdbench.core.spec import CONTROLLERS, TRANSPORTS
from hvdbench.core.validate import HOST, NAME

from .base import default_controllers, launcher_class, launcher_names
from .fit import GROWABLE, FitOptions
from .knobs import KnobValue, name_problem
from .policy import MAX_RETRIES
from .schedulers import MOST_MINUTES, Scheduler, default_scheduler, job_minutes, scheduler_of, schedulers

from .sweep_file import SweepError, read_document


class Placement(Kind):
    """A placement: a name (nvlink, each, ...) or GPU ids such as [0, 3]."""

    def read(self, value: Any, base: Path) -> str | tuple[int, ...]:
        if not isinstance(value, list):
            return Text().read(value, base)
        if not value or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
            raise OptionError(f"expected GPU ids such as [0, 3], got {value!r}")
        if len(set(value)) != len(value):
            raise OptionError(f"GPU ids repeat in {value!r}")
        return tuple(value)


LABEL = Check(Text(), lambda text: "empty: a system needs a name" if not text.strip() else None)
RETRIES = Whole(least=0, most=MAX_RETRIES, beyond="a run that fails that often will not pass")
_KNOB_KINDS: dict[type, Kind] = {bool: Switch(), int: Whole()}


@dataclass(frozen=True)
class Workload:
    """One benchmark with its fixed arguments, and the per-workload axes (empty: the sweep's)."""

    benchmark: str = option(MISSING, Text(), "the benchmark's name")
    args: tuple[str, ...] = option((), Argv(), "its arguments (a list, or one string split as a shell would)")
    batch_size: tuple[int, ...] = option((), Whole(), "this workload's own batch sizes", many=True)
    precision: tuple[str, ...] = option((), Text(), "this workload's own precisions", many=True)


@dataclass(frozen=True)
class Sweep:
    """A validated sweep file (or one built in memory for ``hvdbench run`` and ``screen``)."""

    path: Path
    name: str = option("", Text(), "names the results directory and the jobs (default: the file's name)")
    system: str = option("local", LABEL, "label of this system in the report", flag="--system")
    launchers: tuple[tuple[str, str], ...] = (("horovodrun", "gloo"),)  # launcher: and controller:, paired
    repeats: int = option(1, Whole(), "runs of each configuration, alternated in rounds", flag="--repeats")
    max_runs: int = option(10_000, Whole(), "the most runs a plan may hold (a guard against a typo's product)")
    timeout: float = option(1800.0, Number(unit="seconds", most=MOST_MINUTES * 60.0, beyond="more than a year: a "
                            "typo, not a run's limit"), "seconds before a run is killed", flag="--timeout")
    transport: str = option("auto", Choice(TRANSPORTS), "MPI transport (mpirun, srun, mpiexec): auto = MPI's own "
                            "choice (UCX where built in), ucx, or tcp (Open MPI's ob1: TCP between nodes, shared "
                            "memory within)", flag="--transport")
    retries: int = option(0, RETRIES, "start a failed or timed-out run again up to N times (earlier attempts kept)",
                          flag="--retries", metavar="N")
    target_ci: float | None = option(None, Number(percent=True), "adaptive run length of every training run: steps "
                                     "until the 95% interval is within +-PCT%")
    max_steps: int | None = option(None, Whole(), "with target_ci: the most timed steps")
    until_decided: bool = option(False, Switch(), "add rounds of repeats until each configuration is decided: its own "
                                 "interval within +-margin, or with against its verdict (a sequential rule whose "
                                 "error rate holds over every look)", flag="--until-decided")
    budget: int = option(10, Whole(), "with until_decided: the most runs of each configuration", flag="--budget",
                         metavar="N")
    against: Path | None = option(None, FilePath(here=True), "with until_decided: the results root each configuration "
                                  "is judged against (another system's runs of the same work)", flag="--against",
                                  metavar="ROOT")
    margin: float = option(MARGIN_PCT, Number(percent=True), "with until_decided: the change that counts, in percent",
                           flag="--margin", metavar="PCT")
    workloads: tuple[Workload, ...] = ()
    np: tuple[int, ...] = option((), Whole(), "rank counts on one node", many=True, block="axes")
    nodes: tuple[int, ...] = option((), Whole(), "node counts (with gpus_per_node)", many=True, block="axes")
    gpus_per_node: tuple[int, ...] = option((), Whole(), "ranks per node (with nodes)", many=True, block="axes")
    placements: tuple[str | tuple[int, ...], ...] = option((), Placement(), "GPU placements", many=True,
                                                           block="axes")
    batch_size: tuple[int, ...] = option((), Whole(), "batch sizes", many=True, block="axes")
    precision: tuple[str, ...] = option((), Text(), "precisions", many=True, block="axes")
    independent: tuple[bool, ...] = option((False,), Switch(), "ranks that exchange nothing", many=True,
                                           block="axes")
    knobs: tuple[tuple[str, tuple[Any, ...]], ...] = ()  # benchmark knobs (core/axes.py) and their values
    env: tuple[tuple[str, tuple[str, ...]], ...] = ()  # axes.env: each variable's values
    baseline: bool = option(True, Switch(), "add the 1-GPU runs each configuration's speedup is measured against")
    bind_cpus: bool = option(True, Switch(), "bind each rank to its GPU's CPUs")
    node_gpus: int | None = option(None, Whole(), "GPUs per node where this node cannot tell (planning elsewhere)")
    cpu_slots: int | None = option(None, Whole(), "with placements: each on a node without GPUs, screen this many "
                                                  "CPU slots")
    topology: Path | None = option(None, FilePath(), "saved 'nvidia-smi topo -m' output the placements are planned "
                                                     "on (default: this machine)", flag="--topology")
    hosts: tuple[str, ...] = option(("localhost",), Grammar(HOST, "a host name or address"), "the nodes runs go to",
                                    many=True)
    ssh_port: int | None = option(None, Whole(most=65535, beyond="a TCP port"), "ssh's port on the hosts")
    ssh_identity_file: Path | None = option(None, FilePath(plain=True), "ssh's key for the hosts")
    output: Path | None = option(None, FilePath(here=True), "the results root (relative: to where hvdbench runs)")
    scheduler: Scheduler | None = None  # the scheduler its file's block names, with that block's options
    # (launchers/schedulers.py; None: built in memory, the default scheduler's defaults)
    container: Container | None = None  # every rank inside this image (core/containers.py)
    fit: FitOptions | None = None  # a search for the largest model per configuration instead of measurements


KNOB_AXES = tuple(name for name in AXES if name not in ("batch_size", "precision"))
_TOP = ("name", "system", "launcher", "controller", *keys_of(Sweep)[2:], "workloads", "axes", "container", "fit")
_AXES = (*keys_of(Sweep, "axes"), *KNOB_AXES, "env")


def launcher_pairs(block: Block, launchers: tuple[str, ...],
                   controllers: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """(launcher, controller) for every launcher and each named controller it starts; with none named,
    the one controller all of them start (launchers compared in one sweep run alike), else each one's own."""
    if not controllers:
        return tuple(default_controllers(launchers).items())
    pairs = tuple((name, c) for name in launchers for c in controllers if c in launcher_class(name).controllers)
    for name in launchers:
        cls = launcher_class(name)
        if not any(n == name for n, _ in pairs):
            block.fail("controller", f"launcher {name} {cls.controllers_text()}: add controller {cls.controllers[0]}")
    return pairs


def _block(path: Path, data: Any, where: str, keys: tuple[str, ...]) -> Block:
    return Block(path, data, where, keys, SweepError)


def load_sweep(path: Path) -> Sweep:
    """Read and validate a sweep file (values only; plan.py checks them against benchmarks and GPUs)."""
    path = Path(path)
    top = _block(path, read_document(path), "", (*_TOP, *schedulers()))
    workloads = _workloads(top)  # checked in the order a reader meets them: workloads, axes, env, scheduler, launchers
    axes = _block(path, top.data.get("axes") or {}, "axes", _AXES)
    env = _env(axes)
    launchers = top.many("launcher", Choice(tuple(launcher_names())), ("horovodrun",))
    pairs = launcher_pairs(top, launchers, top.many("controller", Choice(CONTROLLERS), ()))
    given = top.options(Sweep, name=path.stem)
    knobs = tuple((name, values) for name in KNOB_AXES
                  if (values := axes.many(name, Whole(least=AXES[name].least) if AXES[name].kind is int else
                                          _KNOB_KINDS.get(AXES[name].kind, Text()))))
    sweep = Sweep(path=path, launchers=pairs, workloads=workloads, knobs=knobs, env=env, **given,
                  **axes.options(Sweep, block="axes"),
                  scheduler=_scheduler(top, job_minutes(given["timeout"])),
                  container=from_block(_block(path, top.data["container"], "container", keys_of(Container)))
                  if top.data.get("container") is not None else None,
                  fit=_fit(top, workloads))
    _check_sweep(sweep, top, axes)
    return sweep


def _scheduler(top: Block, minutes: int) -> Scheduler:
    """The scheduler the file's block names (one a file; none: the default), its options read from that block
    (a job's time where none is given: from the runs' timeout)."""
    named = [name for name in top.data if name in schedulers() and top.data[name] is not None]  # file order
    if len(named) > 1:
        top.fail(named[0], f"a sweep file names one scheduler: keep its {named[0]}: block or its {named[1]}: "
                           "block, not both")
    cls = schedulers()[named[0]] if named else default_scheduler()
    block = _block(top.path, top.data.get(cls.name) or {}, cls.name, keys_of(cls.options_class))
    return cls(cls.options_class(**block.options(cls.options_class, time_min=minutes)))


def _workloads(top: Block) -> tuple[Workload, ...]:
    """The sweep's workloads: a benchmark name, or a benchmark with its args and own batch sizes and precisions."""
    if "workloads" not in top.data:
        top.fail("workloads", "missing: name at least one benchmark, e.g. [{benchmark: cifar10}]")
    raw = top.data["workloads"]
    if not isinstance(raw, list) or not raw:
        top.fail("workloads", "expected a non-empty list of {benchmark: NAME, args: [...]}")
    return tuple(Workload(**_block(top.path, {"benchmark": item} if isinstance(item, str) else item,
                                   f"workloads[{i}]", keys_of(Workload)).options(Workload))
                 for i, item in enumerate(raw))


def _env(axes: Block) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """axes.env: each variable's values, sorted by name."""
    block = _block(axes.path, axes.data.get("env") or {}, "axes.env", tuple(axes.data.get("env") or {}))
    out = []
    for name in map(str, block.data):
        problem = name_problem(name)
        if problem:
            block.fail(block.key(name), problem)
        out.append((name, block.many(name, KnobValue(name))))
    return tuple(sorted(out))


def _fit(top: Block, workloads: tuple[Workload, ...]) -> FitOptions | None:
    """The fit: table (absent: the sweep measures): every workload must have a shape to grow."""
    if top.data.get("fit") is None:
        return None
    block = _block(top.path, top.data["fit"], "fit", keys_of(FitOptions))
    for i, workload in enumerate(workloads):
        if workload.benchmark not in GROWABLE:
            top.fail(f"workloads[{i}]", f"{workload.benchmark} has no shape for fit: to grow (offered: "
                                        f"{', '.join(GROWABLE)})")
    return FitOptions(**block.options(FitOptions))


def sweep_warnings(sweep: Sweep) -> list[str]:
    """What a valid sweep will cost its measurements, one line each (its scheduler block's)."""
    return scheduler_of(sweep).warnings()


def _check_sweep(sweep: Sweep, top: Block, axes: Block) -> None:
    """What the values mean together: a usable name, a scheduler block that stands with the rest (no directive
    hvdbench sets itself, ...), transports the launchers know, a container its launchers can start, max_steps
    without target_ci, sizes to run."""
    if not NAME.match(sweep.name):
        top.fail("name", f"{sweep.name[:60]!r} names the results directory and the jobs: letters, digits and ._- "
                         "only, starting with a letter or digit")
    refusal = scheduler_of(sweep).problem(sweep)
    if refusal:
        top.fail(*refusal)
    for name, _ in sweep.launchers:
        try:
            launcher_class(name).check_transport(sweep.transport)
        except UsageError as exc:
            top.fail("transport", str(exc))
    refused = RUNTIMES[sweep.container.runtime].launcher_problem([n for n, _ in sweep.launchers]) \
        if sweep.container is not None else None
    if refused:
        top.fail("container.runtime", refused)
    if sweep.max_steps is not None and sweep.target_ci is None:
        top.fail("max_steps", "applies with target_ci (a fixed-length run takes its --steps)")
    problem = until_decided_problem(sweep, strays=False)  # the command line's --until-decided may yet turn it on
    if problem:
        top.fail(*problem.split(": ", 1))
    if not (sweep.np or sweep.nodes or sweep.gpus_per_node):
        axes.fail("axes.np", "give the rank counts to run: np (one node) and/or nodes with gpus_per_node")
    if bool(sweep.nodes) != bool(sweep.gpus_per_node):
        axes.fail("axes.nodes" if not sweep.nodes else "axes.gpus_per_node",
                  "nodes and gpus_per_node go together (ranks = nodes x gpus_per_node)")


MOST_BUDGET = 200  # runs a configuration the sequential rule plans for (a look every round: 200 looks take seconds)


def until_decided_problem(sweep: Sweep, strays: bool = True) -> str | None:
    """What keeps a sweep from running until decided (``key: why``), or None: a budget below the first look
    (MIN_RUNS runs, or the sweep's repeats where more) or beyond any practical number, a fit (it measures no
    throughput), a results root to judge against that is not a folder; budget, against or margin given to a sweep
    that does not run until decided (``strays``: a file's own, read before the command line may turn it on)."""
    if not sweep.until_decided:
        stray = [name for name in DECISION[1:] if strays and getattr(sweep, name) != options_of(Sweep)[name].default]
        return f"{stray[0]}: applies with until_decided (a fixed plan runs its repeats)" if stray else None
    if sweep.budget > MOST_BUDGET:
        return (f"budget: {sweep.budget:,} runs a configuration: more than a sequential rule with a look every round "
                f"is planned for ({MOST_BUDGET} at most, checked before the first run)")
    if sweep.budget < max(MIN_RUNS, sweep.repeats):
        return (f"budget: {sweep.budget} runs a configuration is fewer than the first look needs "
                f"({max(MIN_RUNS, sweep.repeats)}: the spread between runs needs {MIN_RUNS}, or the repeats asked)")
    if sweep.fit is not None:
        return "until_decided: a fit: search measures no throughput to decide; leave one of them out"
    if sweep.against is not None and not sweep.against.is_dir():
        return f"against: {sweep.against} is not a results folder"
    return None


NOT_DECIDED = 4  # exit status of a run or sweep that ended with a configuration still undecided at its budget
DECISION = ("until_decided", "budget", "against", "margin")  # the options run and sweep take on their command line


def with_decision(sweep: Sweep, args: Any) -> Sweep:
    """The sweep with the command line's --until-decided, --budget, --against and --margin in place of its file's
    (a flag not given leaves the file's), checked together; running until decided, its first round of repeats is the
    first look's (MIN_RUNS runs, or more where the sweep asks more)."""
    given = {name: value for name in DECISION if (value := getattr(args, name, None)) not in (None, False)}
    sweep = replace(sweep, **given)
    problem = until_decided_problem(sweep)
    if problem:
        key, why = problem.split(": ", 1)
        if key in given:
            raise UsageError(f"--{key.replace('_', '-')}: {why.replace('until_decided', '--until-decided')}")
        raise UsageError(f"{sweep.path or 'the sweep file'}: {key}: {why}")
    return replace(sweep, repeats=max(sweep.repeats, MIN_RUNS)) if sweep.until_decided else sweep


def sweep_flags(group: Any, names: tuple[str, ...], **defaults: Any) -> None:
    """Command-line flags of the sweep's options (``defaults``: this command's own; None says "the file's")."""
    add_flags(group, Sweep, names, defaults=defaults, note="default: the sweep file's")

