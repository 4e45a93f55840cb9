"""What a run's job asks of each node, whatever the scheduler: its GPUs, the CPUs a rank needs (one, and one a
loader worker, from the run's flags as its benchmark reads them), and the CPUs a rank is given of a node whose shape
the scheduler's node query says."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from hvdbench.core.spec import RunSpec


def gpus_needed(spec: RunSpec) -> int:
    """GPUs a run needs on each node: one per rank, or (a placement names node-physical ids) GPUs 0 up to
    the highest id it names, since a scheduler grants the lowest free ids."""
    return spec.ranks_per_node if spec.devices is None else max(spec.devices, default=-1) + 1


def cpus_per_rank(spec: RunSpec) -> int:
    """CPUs a rank needs: one, and one for each loader worker where its batches come from a DataLoader or files
    (``--loader-workers``, its default where not given), as the workload's own parser reads its arguments (however
    they are spelled: ``--data files`` or ``--data=files``)."""
    flags = spec.train
    if flags is None or flags.data not in ("loader", "files", "pipeline"):
        return 1
    return 1 + flags.loader_workers


@dataclass(frozen=True)
class NodeShape:
    """What a scheduler's smallest nodes hold, as its node query says (sinfo, pbsnodes): CPUs, and GPUs (None where
    the node does not say)."""

    cpus: int
    gpus: int | None

    def share(self, spec: RunSpec, gpus: bool) -> int:
        """CPUs a rank of ``spec`` gets of such a node: its CPUs over its GPUs (over the run's ranks a node where the
        job asks no GPUs or the node declares none), at least one."""
        over = self.gpus if gpus and self.gpus else spec.ranks_per_node
        return max(1, self.cpus // max(1, over))


@dataclass(frozen=True)
class NodeShapes:
    """Every node shape a scheduler's node query says (sinfo, pbsnodes), so that a run is sized from the nodes that
    can hold it, never from one that cannot (a GPU-less login node in the partition, a 2-GPU node beside 8-GPU ones)."""

    nodes: tuple[NodeShape, ...]

    def fitting(self, spec: RunSpec, gpus: bool) -> list[NodeShape]:
        """The nodes that can hold a node's share of ``spec``: as many GPUs as it needs where the job asks GPUs (a
        node that does not say its GPUs counted in)."""
        need = gpus_needed(spec)
        return [n for n in self.nodes if not gpus or n.gpus is None or n.gpus >= need]

    def for_spec(self, spec: RunSpec, gpus: bool) -> NodeShape | None:
        """The node, of those that can hold the run, whose share of CPUs a rank is the least (what the job may ask
        wherever it lands); None where none can hold it."""
        fit = self.fitting(spec, gpus)
        return min(fit, key=lambda n: (n.share(spec, gpus), n.cpus)) if fit else None

    def least_cpus(self, spec: RunSpec, gpus: bool) -> int | None:
        """The fewest CPUs a node that can hold the run has."""
        fit = self.fitting(spec, gpus)
        return min(n.cpus for n in fit) if fit else None


def billed_gpus(spec: RunSpec, exclusive: bool, shape: NodeShapes | None) -> int:
    """GPUs a run's job is billed on each node: those it asks (``gpus_needed``), or, where the job has its nodes to
    itself, every GPU of the largest node that can hold it (a scheduler bills an exclusive node whole); what it asks
    where the nodes' GPUs are unknown."""
    need = gpus_needed(spec)
    if not exclusive or shape is None:
        return need
    return max([need, *(n.gpus for n in shape.fitting(spec, True) if n.gpus is not None)])


def shapes_of(nodes: Sequence[NodeShape]) -> NodeShapes | None:
    return NodeShapes(tuple(nodes)) if nodes else None


def cpus_a_rank(spec: RunSpec, shape: NodeShape | NodeShapes | None, *, fixed: int | None, gpus: bool, asked: str,
                key: str, where: str) -> tuple[int, str]:
    """CPUs a rank is given, and why: the scheduler block's own figure (``fixed``, its ``key``); else the node's
    share (its CPUs over its GPUs, or over the ranks where the job asks no GPUs; of every node shape, the least share
    among the nodes that can hold the run), or what the rank's loader needs where that is more; else (the scheduler's
    node query, ``asked``, could not say what ``where`` hold) what the loader needs."""
    need = cpus_per_rank(spec)
    if fixed is not None:
        return fixed, key
    if isinstance(shape, NodeShapes):
        shape = shape.for_spec(spec, gpus)
        where += f" that hold {gpus_needed(spec)} GPU(s)" if gpus else ""
    loader = f"; a rank and its loader's workers need {need}" if need > 1 else ""
    if shape is None:
        return need, (f"what a rank{' and its loader' if need > 1 else ''} needs: {asked} could not say what "
                      f"{where} hold; {key} sets it")
    share = shape.share(spec, gpus)
    over = f"{shape.gpus} GPUs" if gpus and shape.gpus else f"{spec.ranks_per_node} rank(s)"
    said = f"{where}: {shape.cpus} CPUs / {over}{loader}"
    if need > share:
        return need, said + f", more than the node's share of {share}"
    return share, said
