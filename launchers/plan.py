"""The plan: a validated sweep expanded into RunSpecs, with the 1-GPU baseline each speedup needs."""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import socket
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Sequence

from hvdbench.core.axes import AXES, axis_flags, data_mode
from hvdbench.core.exchanges import exchange_flags
from hvdbench.core.run_flags import without
from hvdbench.core.catalog import get_benchmark
from hvdbench.core.containers import RECIPE_PYTHON, Container
from hvdbench.core.datasets import listing_digest
from hvdbench.core.errors import UsageError
from hvdbench.core.exchanges import DEFAULT, EXCHANGES, listed, offered, without_horovod
from hvdbench.core.spec import RunSpec
from hvdbench.core.topology import Topology, format_cpus, link_rank

from .base import launcher_class, launcher_names
from .placement import Placement, by_link_class, check_devices, cpu_slots, explicit
from .sweep import Sweep, SweepError, Workload

COMM_PREFIXES = ("HOROVOD_", "NCCL_")


@dataclass(frozen=True)
class Plan:
    """Every run of a sweep in order (baselines first), and the combinations left out, with why."""

    specs: tuple[RunSpec, ...]
    baselines: frozenset[str] = frozenset()
    skipped: tuple[str, ...] = field(default_factory=tuple)


def sizes(sweep: Sweep) -> list[tuple[int, int]]:
    """(nodes, ranks per node) pairs: ``np`` on one node, then ``nodes`` x ``gpus_per_node``."""
    pairs = [(1, n) for n in sweep.np] + [(n, g) for n in sweep.nodes for g in sweep.gpus_per_node]
    return sorted(dict.fromkeys(pairs), key=lambda p: (p[0] * p[1], p[0]))


EACH = "each"  # every GPU alone at one GPU, one placement per link class at more (screening)
ALL = "all"  # every GPU of the node (or, screening a node without GPUs, every CPU slot)


def _resolve(sweep: Sweep, topo: Topology | None, per_node: int,
             skipped: list[str]) -> list[Placement | None]:
    """The placements one size runs on: every named one that exists for that many GPUs; at one GPU per
    node the first id of each explicit placement, and with ``each`` every GPU of the node alone."""
    if per_node == 1:
        explicit_ids = [w[:1] for w in sweep.placements if isinstance(w, tuple)]
        if EACH in sweep.placements and topo is None:
            return list(cpu_slots(sweep.cpu_slots or 1, sorted(os.sched_getaffinity(0))))
        if EACH in sweep.placements:
            assert topo is not None
            explicit_ids += [(g.index,) for g in topo.gpus]
        return list(dict.fromkeys(explicit(topo, ids) for ids in explicit_ids)) or [None]  # type: ignore[arg-type]
    if not sweep.placements:
        return [None]
    if topo is None and sweep.cpu_slots and ALL in sweep.placements:  # a whole node without GPUs, slot by slot
        slots = cpu_slots(sweep.cpu_slots, sorted(os.sched_getaffinity(0)))[:per_node]
        return [Placement("cpu:all", (), None, tuple(c for slot in slots for c in slot.cpus), ())]
    assert topo is not None
    found: list[Placement | None] = []
    classes = by_link_class(topo, per_node)
    for wanted in sweep.placements:
        if isinstance(wanted, tuple):
            if len(wanted) < per_node:
                skipped.append(f"placement {list(wanted)} for {per_node} GPUs: it names only {len(wanted)}")
                continue
            found.append(explicit(topo, wanted[:per_node]))
        elif wanted == "auto":
            found.append(None)
        elif wanted == EACH:
            found.extend(classes)
        else:
            match = [p for p in classes if p.name == wanted or p.slowest == wanted]
            if not match:
                skipped.append(f"placement {wanted} for {per_node} GPUs: this node offers "
                               + ", ".join(p.name.split(":")[0] for p in classes))
            found.extend(match)
    return list(dict.fromkeys(found))


def check_placements(sweep: Sweep, topo: Topology) -> None:
    """Every named placement must exist for some size of the sweep, and every explicit id on the node."""
    counts = [per for _, per in sizes(sweep) if per > 1]
    offered: set[str] = set()
    for placement in (p for k in counts if k <= len(topo.gpus) for p in by_link_class(topo, k)):
        offered |= {placement.name.split(":")[0], *([placement.slowest] if placement.slowest else [])}
    for i, wanted in enumerate(sweep.placements):
        key = f"{sweep.path}: axes.placements[{i}]"
        if isinstance(wanted, tuple):
            try:
                check_devices(topo, wanted)
            except UsageError as exc:
                raise SweepError(f"{key}: {exc}") from None
        elif wanted not in ("auto", EACH) and wanted not in offered:
            valid = sorted(offered, key=lambda c: (c != "all", link_rank(c) if c != "all" else (0, 0)))
            raise SweepError(f"{key}: the topology ({topo.source}) has no {wanted!r} placement for "
                             f"{', '.join(map(str, counts))} GPU(s); valid: {', '.join(valid + ['auto', EACH])}")


def _bench_args(workload: Workload, framework: str, batch: int | None, precision: str | None, independent: bool,
                knobs: dict[str, Any], adaptive: tuple[str, ...] = ()) -> tuple[str, ...]:
    args = [*workload.args, *adaptive,
            *axis_flags(framework, {"batch_size": batch, "precision": precision, **knobs}, workload.args,
                       workload.benchmark)]
    if independent:
        args.append("--independent")
    return tuple(args)


def _nothing_to_change(framework: str, knobs: dict[str, Any], independent: bool, args: Sequence[str],
                       benchmark: str) -> str | None:
    """Why a combination of swept values is left out of the plan, or None: an exchange other than the default on
    independent ranks (they exchange nothing: one independent run serves every exchange), one the framework does
    not offer, or one with a swept knob it refuses (core/exchanges.py); a knob's value the framework has not
    (a PyTorch loader on TensorFlow workloads)."""
    reads = (knobs.get("data") or data_mode(benchmark, args)) == "files"
    refused = next((why for knob, value in knobs.items() if (reads or not AXES[knob].files_only)
                    and (why := AXES[knob].refused(framework, value))), None)
    if refused:
        return refused
    name = knobs.get("exchange", DEFAULT)
    if name == DEFAULT:
        return None
    if independent:
        return f"exchange {name} with independent ranks: they exchange nothing, one independent run serves all"
    mine = offered(framework) or (DEFAULT,)
    if name not in mine:
        return f"exchange {name} on {framework} workloads: theirs are {', '.join(mine)}"
    refusal = next(((option, why) for option, why in EXCHANGES[name].refuses if knobs.get(option)), None)
    return f"exchange {name} with {refusal[0]}: {refusal[1]}" if refusal else None


def _container_fields(container: Container | None) -> dict[str, Any]:
    """The run spec's fields of the container its ranks run in, whole (none on the host)."""
    if container is None:
        return {}
    return {"image": container.image, "runtime": container.runtime, "mounts": container.mounts or None,
            "container_env": container.env or None,
            "container_python": None if container.python == RECIPE_PYTHON else container.python}


def _needs_horovod(launcher: str, info: Any, flags: Any) -> str | None:
    """Why a launcher whose ranks meet through torch.distributed alone (torchrun) cannot run this workload, or
    None: TensorFlow's and the collectives' ranks meet through Horovod, as does Horovod's own exchange."""
    if launcher_class(launcher).starts_horovod:
        return None
    if info.framework != "pytorch" or not info.trains:
        return f"{info.name} with launcher {launcher}: its ranks meet through Horovod, which {launcher} does not start"
    if EXCHANGES[flags.exchange].needs_horovod and not flags.independent:
        return (f"{info.name} with launcher {launcher}: --exchange {flags.exchange} needs Horovod, which {launcher} "
                f"does not start; give --exchange {listed(without_horovod(info.framework))} (or --independent)")
    return None


def _checked(sweep: Sweep, index: int, info: Any, args: tuple[str, ...]) -> Any:
    """A run's arguments parsed by its benchmark; a flag given twice or a bad value is a SweepError naming the
    workload."""
    name = sweep.workloads[index].benchmark
    twice = _given_twice(args)
    if twice:
        raise SweepError(f"{sweep.path}: workloads[{index}] ({name}): {twice} is given twice (its args and the "
                         "sweep's axes or target_ci/max_steps); keep one")
    try:
        return info.check(args)
    except UsageError as exc:
        raise SweepError(f"{sweep.path}: workloads[{index}] ({name} {' '.join(args)}): {exc}") from None


def _given_twice(args: tuple[str, ...]) -> str | None:
    """The first flag a run's arguments give more than once (the last would silently win), or None."""
    seen: set[str] = set()
    for arg in args:
        if arg.startswith("--"):
            flag = arg.split("=", 1)[0]
            if flag in seen:
                return flag
            seen.add(flag)
    return None


def _adaptive(sweep: Sweep) -> tuple[str, ...]:
    """The flags of the sweep's target_ci and max_steps (training workloads only)."""
    if sweep.target_ci is None:
        return ()
    return ("--target-ci", f"{sweep.target_ci:g}", *(("--max-steps", str(sweep.max_steps)) if sweep.max_steps else ()))


def _cpus(topo: Topology | None, placement: Placement | None, per_node: int, bind: bool) -> tuple[str, ...] | None:
    """The CPUs of each local rank's GPU (or of a CPU slot), where they are known and binding is on."""
    if bind and placement is not None and not placement.devices and placement.cpus:  # CPU slots: an even share each
        share = len(placement.cpus) // per_node
        return tuple(format_cpus(placement.cpus[i * share:(i + 1) * share]) for i in range(per_node))
    if not bind or topo is None:
        return None
    devices = placement.devices if placement is not None else tuple(range(per_node))
    if any(d >= len(topo.gpus) or not topo.gpus[d].cpus for d in devices):
        return None
    return tuple(format_cpus(topo.gpus[d].cpus) for d in devices)


def _env_product(sweep: Sweep) -> list[tuple[tuple[str, str], ...]]:
    names = [name for name, _ in sweep.env]
    return [tuple(zip(names, values)) for values in itertools.product(*(v for _, v in sweep.env))]


def _check_size(sweep: Sweep, placed: dict[int, list[Placement | None]]) -> None:
    """Refuse, before expanding it, a plan of more runs than the sweep's max_runs (a typo such as
    ``repeats: 100000000`` or a dozen knobs of eight values each would never end)."""
    per_workload = sum(len(w.batch_size or sweep.batch_size or (None,)) * len(w.precision or sweep.precision or (None,))
                       for w in sweep.workloads)
    runs = (per_workload * math.prod(len(v) for _, v in sweep.knobs) * len(sweep.independent) * len(sweep.launchers)
            * math.prod(len(v) for _, v in sweep.env) * sum(len(placed[per]) for _, per in sizes(sweep))
            * sweep.repeats)
    if runs > sweep.max_runs:
        raise SweepError(f"{sweep.path}: the plan would hold {runs:,} runs, more than max_runs ({sweep.max_runs:,}); "
                         "shrink the axes or repeats, or raise max_runs in the sweep file")


def too_many_for_the_gpus(nodes: int, per_node: int, here_gpus: int | None, flags: Any, hosts: tuple[str, ...]) -> bool:
    """Whether a one-node size needs more GPUs than this node shows its processes (``here_gpus``: NVML's count
    narrowed by CUDA_VISIBLE_DEVICES; None or 0 on a machine without GPUs, where ranks share the CPU)."""
    on_gpu = getattr(flags, "device", "cpu") != "cpu"
    here = not hosts or hosts[0] in ("localhost", "127.0.0.1", socket.gethostname())  # one-node runs use the first
    return bool(here_gpus) and on_gpu and nodes == 1 and here and per_node > here_gpus  # type: ignore[operator]


def plan(sweep: Sweep, topo: Topology | None = None, here_gpus: int | None = None, scheduled: bool = False) -> Plan:
    """Expand the sweep: workloads x batch sizes x precisions x exchange x launchers x knobs x sizes x
    placements x repeats. Arguments are checked against each benchmark; sizes against the node's GPUs and hosts.
    ``here_gpus`` (runs on this node: the GPUs it shows) leaves out, each with a line, one-node GPU runs of
    more ranks than that, which NCCL would refuse ("Duplicate GPU"); a plan left with nothing is refused.
    ``scheduled``: each run is a job of its own nodes, whose hosts the launcher takes from the allocation (a
    sweep file's hosts then need not list them)."""
    _check_sizes(sweep, topo, scheduled)
    skipped: list[str] = []
    placed = {per_node: _resolve(sweep, topo, per_node, skipped) for _, per_node in sizes(sweep)}
    _check_size(sweep, placed)
    specs: list[RunSpec] = []
    baselines: dict[str, RunSpec] = {}
    for index, workload in enumerate(sweep.workloads):
        try:
            info = get_benchmark(workload.benchmark)
        except UsageError as exc:
            raise SweepError(f"{sweep.path}: workloads[{index}].benchmark: {exc}") from None
        knob_names = [name for name, _ in sweep.knobs]
        combos = itertools.product(workload.batch_size or sweep.batch_size or (None,),
                                   workload.precision or sweep.precision or (None,),
                                   itertools.product(*(values for _, values in sweep.knobs)), sweep.independent)
        for batch, precision, knob_values, independent in combos:
            unchanged = _nothing_to_change(info.framework, dict(zip(knob_names, knob_values)), independent,
                                           workload.args, workload.benchmark)
            if unchanged:
                skipped.append(unchanged)
                continue
            args = info.resolved(_bench_args(workload, info.framework, batch, precision, independent,
                                             dict(zip(knob_names, knob_values)),
                                             _adaptive(sweep) if info.trains else ()),
                                 _base(sweep))
            flags = _checked(sweep, index, info, args)
            for (launcher, controller), env in itertools.product(sweep.launchers, _env_product(sweep)):
                unstartable = _needs_horovod(launcher, info, flags)
                if unstartable:
                    skipped.append(unstartable)
                    continue
                run = RunSpec(benchmark=info.name, framework=info.framework, args=args, inputs=file_inputs(info, args),
                              launcher=launcher,
                              controller=controller, env=env, system=sweep.system, transport=_transport(sweep),
                              **_container_fields(sweep.container))
                specs += _sized(sweep, run, flags, topo, placed, here_gpus, skipped)
                if sweep.baseline and not independent:
                    for base in _baselines(sweep, run, topo):
                        baselines.setdefault(base.id, base)
    single = {(s.benchmark, s.args, s.launcher, s.controller) for s in specs if s.np == 1}  # 1 GPU in the sweep
    extra = [b for b in baselines.values() if (b.benchmark, b.args, b.launcher, b.controller) not in single]
    # repeat-major: every configuration once, then again, so drift over a long sweep (clocks, heat, other
    # jobs) spreads over configurations instead of favouring whichever ran first; baselines lead each round
    ordered = sorted(_unique(extra + specs), key=lambda spec: spec.repeat)
    skipped = list(dict.fromkeys(skipped))
    if not ordered and skipped:
        raise SweepError(f"{sweep.path}: no run fits: {skipped[0]}")
    return Plan(tuple(ordered), frozenset(b.id for b in extra), tuple(skipped))


def _check_sizes(sweep: Sweep, topo: Topology | None, scheduled: bool = False) -> None:
    """Placements need a topology and must exist on it; GPUs per node within the node's; nodes within hosts."""
    node_gpus = sweep.node_gpus or (len(topo.gpus) if topo is not None else None)
    if sweep.placements and topo is None and not (set(sweep.placements) <= {EACH, ALL} and sweep.cpu_slots):
        raise SweepError(f"{sweep.path}: axes.placements needs the node's topology: give topology: FILE "
                         "(saved 'nvidia-smi topo -m') or run where GPUs are visible")
    if topo is not None and sweep.placements:
        check_placements(sweep, topo)
    for nodes, per_node in sizes(sweep):
        if node_gpus is not None and per_node > node_gpus:
            raise SweepError(f"{sweep.path}: axes: {per_node} GPUs per node, but a node has {node_gpus} "
                             f"(node_gpus / topology); valid: 1-{node_gpus}")
        listed = [name for name, _ in sweep.launchers if launcher_class(name).needs_hosts]
        if listed and nodes > len(sweep.hosts) and not scheduled:
            schedulers = [name for name in launcher_names() if not launcher_class(name).needs_hosts]
            raise SweepError(f"{sweep.path}: axes.nodes: {nodes} node(s) need as many hosts for {', '.join(listed)}, "
                             f"but hosts lists {len(sweep.hosts)} ({', '.join(sweep.hosts)}); add hosts"
                             + (f" or use launcher {' or '.join(schedulers)}" if schedulers else ""))


def _sized(sweep: Sweep, run: RunSpec, flags: Any, topo: Topology | None, placed: dict[int, list[Placement | None]],
           here_gpus: int | None, skipped: list[str]) -> list[RunSpec]:
    """One configuration at every size, placement and repeat (``run`` holds what they share); sizes this node's
    GPUs cannot hold left out with a line in ``skipped``, as are independent runs at a second node count of the
    same ranks per node (each node's ranks train alone: the first node count measures what all would)."""
    out = []
    first_nodes: dict[int, int] = {}
    for nodes, per_node in sizes(sweep):
        if "--independent" in run.args and first_nodes.setdefault(per_node, nodes) != nodes:
            skipped.append(f"independent {run.benchmark} at {nodes} nodes x {per_node}: ranks that exchange nothing "
                           f"train on every node as on one (synthetic data); the {first_nodes[per_node]}-node twin "
                           "serves every node count")
            continue
        if too_many_for_the_gpus(nodes, per_node, here_gpus, flags, sweep.hosts):
            skipped.append(f"{run.benchmark} at {per_node} ranks: this node shows {here_gpus} GPU(s) and every rank "
                           "needs its own (NCCL refuses a shared one); --device cpu runs several ranks per node")
            continue
        for placement in placed[per_node]:
            out += [replace(run, np=nodes * per_node, nodes=nodes, placement=placement.name if placement else None,
                            devices=placement.devices if placement else None,
                            cpus=_cpus(topo, placement, per_node, sweep.bind_cpus), repeat=repeat)
                    for repeat in range(sweep.repeats)]
    return out


def _baselines(sweep: Sweep, run: RunSpec, topo: Topology | None) -> list[RunSpec]:
    """The 1-GPU runs a configuration's speedup is measured against: its arguments without the exchange's flags
    (one baseline serves every exchange; under a launcher without Horovod, the exchange's own at one rank) and
    without the variables that only tune the exchange (HOROVOD_*, NCCL_*), one per repeat."""
    compute_env = tuple((k, v) for k, v in run.env if not k.startswith(COMM_PREFIXES))
    args = without(run.args, exchange_flags()) if launcher_class(run.launcher).starts_horovod else run.args
    return [replace(run, args=args, np=1, nodes=1, env=compute_env,
                    cpus=_cpus(topo, None, 1, sweep.bind_cpus), repeat=repeat) for repeat in range(sweep.repeats)]


def file_inputs(info: Any, args: Sequence[str]) -> tuple[tuple[str, str], ...] | None:
    """What the files a run's path flags name hold, hashed (``--model-file``: its source; a dataset folder: what it
    holds now, core/datasets.listing_digest): part of the run's identity, so a file edited or a dataset changed in
    place between two runs makes another run, never the old one's twin, and resume runs it; None where no flag names
    a regular file or a folder."""
    found = []
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        given = value if name in info.paths and eq else args[i + 1] if arg in info.paths and i + 1 < len(args) else None
        if given is not None and Path(given).is_dir():
            found.append((name, f"listing:{listing_digest(Path(given).resolve())[:16]}"))
            continue
        if given is None or not Path(given).is_file():
            continue
        digest = hashlib.sha256()
        try:
            with open(given, "rb") as handle:
                for chunk in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(chunk)
        except OSError:
            continue
        found.append((name, f"sha256:{digest.hexdigest()[:16]}"))
    return tuple(found) or None


def _base(sweep: Sweep) -> Path:
    """What a relative path in a workload's arguments is relative to: a sweep file's folder (as its topology:),
    else (``hvdbench run``, ``screen``) the folder the command runs in."""
    return sweep.path.parent if sweep.path.is_file() else Path.cwd()


def _transport(sweep: Sweep) -> str | None:
    """The spec's transport: None for auto (MPI's own choice; ids of older runs unchanged)."""
    return None if sweep.transport == "auto" else sweep.transport


def _unique(specs: Iterable[RunSpec]) -> list[RunSpec]:
    seen: dict[str, RunSpec] = {}
    for spec in specs:
        seen.setdefault(spec.id, spec)
    return list(seen.values())
