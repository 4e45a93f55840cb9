"""SLURM host-list expressions expanded in Python, as ``scontrol show hostnames`` does, so that
``--hosts 'node[01-16]'`` and an allocation's node list work where no SLURM client is installed.

    node[01-04,07]      node01 node02 node03 node04 node07
    gpu[1-2]-ib[0-1]    gpu1-ib0 gpu1-ib1 gpu2-ib0 gpu2-ib1
    a,b[1-2],c          a b1 b2 c

A range keeps the zero padding of its first number; several bracket groups multiply. A malformed list, or
one naming more than MAX_HOSTS hosts, is a UsageError in one line."""

from __future__ import annotations

import itertools
import re

from hvdbench.core.errors import UsageError
from hvdbench.core.validate import host_problem, text_problem

MAX_HOSTS = 100_000
_GROUP = re.compile(r"\[([^\[\]]*)\]")


def expand_hostlist(text: str) -> tuple[str, ...]:
    """Every host name of a SLURM host list, in its order, duplicates kept once."""
    hosts: list[str] = []
    for item in _items(text):
        hosts += _expand_item(item, text)
        if len(hosts) > MAX_HOSTS:
            raise UsageError(f"host list {text[:60]!r} names more than {MAX_HOSTS:,} hosts")
    return tuple(dict.fromkeys(hosts))


def _items(text: str) -> list[str]:
    """The list's top-level items: commas inside brackets belong to a range."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth not in (0, 1):
            raise UsageError(f"host list {text!r}: brackets do not nest")
        if char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise UsageError(f"host list {text!r}: a bracket is not closed")
    items.append(text[start:])
    if any(not item.strip() for item in items):
        raise UsageError(f"host list {text!r}: an empty item")
    return [item.strip() for item in items]


def _expand_item(item: str, text: str) -> list[str]:
    """One item's names: its text between bracket groups, times each group's numbers."""
    parts = _GROUP.split(item)  # text, group, text, group, ..., text
    if "[" in "".join(parts[0::2]) or "]" in "".join(parts[0::2]):
        raise UsageError(f"host list {text!r}: stray bracket in {item!r}")
    choices = [[p] if i % 2 == 0 else _numbers(p, text) for i, p in enumerate(parts)]
    count = 1
    for options in choices:
        count *= len(options)
        if count > MAX_HOSTS:
            raise UsageError(f"host list {text[:60]!r} names more than {MAX_HOSTS:,} hosts")
    return ["".join(combination) for combination in itertools.product(*choices)]


def _numbers(group: str, text: str) -> list[str]:
    """``01-04,07`` as ['01', '02', '03', '04', '07']: each range padded as its first number is."""
    out: list[str] = []
    for part in group.split(","):
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part.strip())
        if not match:
            raise UsageError(f"host list {text!r}: [{group}] is not numbers and ranges such as 01-04,07")
        first, last = match.group(1), match.group(2) or match.group(1)
        if int(last) < int(first):
            raise UsageError(f"host list {text!r}: range {part} runs backwards")
        if int(last) - int(first) >= MAX_HOSTS:
            raise UsageError(f"host list {text[:60]!r} names more than {MAX_HOSTS:,} hosts")
        width = len(first) if first.startswith("0") else 0
        out += [str(n).zfill(width) for n in range(int(first), int(last) + 1)]
    return out


def hosts_of(text: str | None) -> tuple[str, ...]:
    """A ``--hosts`` flag's ``a,b`` or SLURM host list (``node[01-04]``) as host names, each checked; every problem a
    UsageError naming the flag."""
    if not text:
        return ()
    problem = text_problem(text)
    if problem:
        raise UsageError(f"--hosts: {problem}")
    try:
        hosts = expand_hostlist(text)
    except UsageError as exc:
        raise UsageError(f"--hosts: {exc}") from None
    for host in hosts:
        problem = host_problem(host)
        if problem:
            raise UsageError(f"--hosts: {problem}")
    return hosts
