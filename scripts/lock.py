"""Prints the lock (constraints.txt) of the environment it runs in: every installed distribution pinned
to its exact version, in sections by who brings it. scripts/lock.sh runs it inside a scratch environment
that scripts/setup.sh made without a lock, so the lock is what set-up's own pip resolved.

Sections: [frameworks] (PyTorch, TensorFlow, Horovod: the defaults of set-up's settings), [torch] and
[tensorflow] (what only that framework needs: applied only with its default version), [common] (the rest).
"""

from __future__ import annotations

import configparser
import datetime
import importlib.metadata as md
import platform
import sys
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
NOT_LOCKED = {"pip", "hvdbench"}  # pip comes with the interpreter's venv; hvdbench is this checkout


def installed() -> dict[str, md.Distribution]:
    """Distributions of this environment by canonical name (its own site-packages first)."""
    found: dict[str, md.Distribution] = {}
    for dist in md.distributions():
        found.setdefault(canonicalize_name(dist.metadata["Name"]), dist)
    return found


def requirements_of(dist: md.Distribution, extras: frozenset[str]) -> list[Requirement]:
    """``dist``'s requirements that apply here with ``extras`` asked for."""
    out = []
    for line in dist.requires or []:
        req = Requirement(line)
        if req.marker is None or any(req.marker.evaluate({**default_environment(), "extra": e})
                                     for e in (extras or {""})):
            out.append(req)
    return out


def closure(roots: list[tuple[str, frozenset[str]]], dists: dict[str, md.Distribution],
            stop: set[str]) -> set[str]:
    """Every installed distribution ``roots`` need, not walking into ``stop``."""
    walked: set[tuple[str, frozenset[str]]] = set()
    todo = list(roots)
    while todo:
        name, extras = todo.pop()
        name = canonicalize_name(name)
        if name in stop or name not in dists or (name, extras) in walked:
            continue
        walked.add((name, extras))
        todo += [(r.name, frozenset(r.extras)) for r in requirements_of(dists[name], extras)]
    return {name for name, _ in walked}


def setup_roots() -> list[tuple[str, frozenset[str]]]:
    """What set-up asks pip for besides the frameworks: hvdbench with its extras, Horovod's build and run
    requirements, mpi4py."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    extras = frozenset(("mpi", "slurm", "gpu", "report", "test"))
    lines = (ROOT / "scripts" / "horovod-requirements.txt").read_text().splitlines()
    roots = [(Requirement(line.split("#")[0]).name, frozenset()) for line in lines if line.split("#")[0].strip()]
    return roots + [("hvdbench", extras), ("horovod", frozenset()), ("mpi4py", frozenset())]


def public(version: str) -> str:
    return Version(version).public


def main() -> int:
    dists = installed()
    tf_name = next((n for n in ("tensorflow-cpu", "tensorflow") if n in dists), None)
    frameworks = {"torch", "horovod", *([tf_name] if tf_name else [])}
    missing = {"torch", "horovod"} - set(dists)
    if missing:
        print(f"lock: error: {', '.join(sorted(missing))} not installed here: run it through scripts/lock.sh",
              file=sys.stderr)
        return 1
    common = closure(setup_roots(), dists, stop=frameworks) - NOT_LOCKED
    torch_only = closure([("torch", frozenset())], dists, stop=set()) - common - frameworks
    tf_only = (closure([(tf_name, frozenset())], dists, stop=set()) - common - torch_only - frameworks
               if tf_name else set())
    leftover = set(dists) - common - torch_only - tf_only - frameworks - NOT_LOCKED
    common |= leftover  # installed by set-up's own steps (e.g. a build tool); pinned all the same

    def pins(names: set[str]) -> list[str]:
        return [f"{n}=={public(dists[n].version)}" for n in sorted(names)]

    when = datetime.date.today().isoformat()
    print("# hvdbench's lock: every package scripts/setup.sh installs, pinned to one version (pip constraints).")
    print(f"# Made by `make lock` on Python {platform.python_version()}, {platform.machine()}, {when}:")
    print("# set-up in a scratch environment without a lock, then scripts/lock.py. Set-up, scripts/bundle.sh and")
    print("# CI use it; HVDBENCH_LOCK=FILE uses another file, HVDBENCH_LOCK=none none (README: Versions).")
    print("#")
    print("# [frameworks] defaults of HVDBENCH_TORCH_SPEC, HVDBENCH_TF_SPEC, HOROVOD_VERSION (installed through them)")
    print("\n".join(pins(frameworks)))
    print("# [torch] what only PyTorch needs: applied with the default PyTorch (another one brings its own)")
    print("\n".join(pins(torch_only)))
    print("# [tensorflow] what only TensorFlow needs: applied with the default TensorFlow")
    print("\n".join(pins(tf_only)))
    print("# [common] everything else")
    print("\n".join(pins(common)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
