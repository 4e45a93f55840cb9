"""An MLPerf system description (``<submitter>/systems/<system>.json``) read as a system: its nodes, accelerators a
node, accelerator, host network and framework (numbers as the files give them, often as strings: "8"), and the
systems of one submitter that differ only in their node count told as one family, whose results read as one system
scaled over nodes."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from hvdbench.core.errors import UsageError
from hvdbench.core.validate import read_small_text, text_problem

MOST_RANKS = 65536  # accelerators of one result: more than any machine has
_COUNT = re.compile(r"^\s*\+?(\d{1,6})(?:\.0*)?\s*$")


@dataclass(frozen=True)
class System:
    """What a system description says of the machine a result ran on."""

    submitter: str
    name: str
    nodes: int
    per_node: int  # accelerators a node (1 for a CPU-only system: one process a node)
    accelerator: str
    network: str
    framework: str

    @property
    def accelerators(self) -> int:
        return self.nodes * self.per_node

    @property
    def family(self) -> tuple[str, str, int, str, str]:
        """What systems of one family share: all but the node count."""
        return self.submitter, self.accelerator, self.per_node, self.network, self.framework


def _count(path: Path, data: dict[str, Any], key: str, least: int) -> int:
    """A count the description gives as a number or as text ("8", " 8 ", "8.0"); a UsageError where it is none or
    impossible."""
    value = data.get(key)
    text = str(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    found = _COUNT.match(text)
    number = int(found.group(1)) if found else -1
    if not least <= number <= MOST_RANKS:
        raise UsageError(f"{path}: {key} {str(value)[:40]!r} is not a count of {least} to {MOST_RANKS:,}")
    return number


def _text(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    return str(value)[:200] if isinstance(value, (str, int, float)) and not text_problem(str(value)) else ""


def read_system(path: Path) -> tuple[dict[str, str], System | None]:
    """The description's fields as text, and the system; ({}, None) where the file does not exist; a UsageError of
    one line where it is not one (no JSON object, impossible counts)."""
    if not path.exists():
        return {}, None
    try:
        data = json.loads(read_small_text(path, 1 << 20, "an MLPerf system description"))
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}" if str(path) not in str(exc) else str(exc)) from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: not a JSON object: no MLPerf system description")
    raw = {str(k)[:60]: str(v)[:200] for k, v in data.items() if v not in ("", None) and not text_problem(str(v))}
    nodes = _count(path, data, "number_of_nodes", 1)
    per_node = _count(path, data, "accelerators_per_node", 0)
    if nodes * max(per_node, 1) > MOST_RANKS:
        raise UsageError(f"{path}: {nodes} nodes x {per_node} accelerators: more than any machine has")
    accelerator = _text(data, "accelerator_model_name") if per_node else _text(data, "host_processor_model_name")
    return raw, System(_text(data, "submitter"), _text(data, "system_name") or path.stem, nodes, max(per_node, 1),
                       accelerator, _text(data, "host_networking"), _text(data, "framework"))


def _without_count(name: str, nodes: int) -> str:
    """A system's name without its node count (``dgxh100_n64`` -> ``dgxh100``, ``16xXE8545x4A100`` ->
    ``XE8545x4A100``)."""
    pattern = rf"(?:(?<=[_\-\s])|^)(?:n{nodes}|{nodes}x|{nodes}n|{nodes}_?nodes?)(?=[_\-\sA-Z]|$)"
    return re.sub(pattern, "", name, flags=0).strip("_- ") or name


def family_labels(systems: Sequence[System | None]) -> list[str | None]:
    """For each system, the label its family shares where it has members at more than one node count (the
    submitter and the name without its count), else None (the system stands alone)."""
    members: dict[tuple[str, str, int, str, str], list[System]] = {}
    for system in systems:
        if system is not None:
            members.setdefault(system.family, []).append(system)
    labels: list[str | None] = []
    for system in systems:
        family = members.get(system.family, []) if system is not None else []
        if system is None or len({s.nodes for s in family}) < 2:
            labels.append(None)
            continue
        names = {_without_count(s.name, s.nodes) for s in family}
        name = names.pop() if len(names) == 1 else f"{system.per_node}x {system.accelerator}"
        labels.append(" ".join(filter(None, (system.submitter, name))))
    return labels
