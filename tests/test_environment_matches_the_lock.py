"""One lock of the Python environment (constraints.txt): it pins every requirement set-up installs, once,
at one exact version, and the environment these tests run in holds exactly what set-up was held to
(the constraints it wrote beside the environment), so a fresh machine tests what the suite was developed
against."""

from __future__ import annotations

import importlib.metadata as md
import re
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import setup_requirements
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "constraints.txt"
SECTIONS = ("frameworks", "torch", "tensorflow", "common")
NOT_LOCKED = {"pip", "hvdbench"}


def read_lock(text: str) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """Pins by canonical name, each pin's section, and lines that are neither a pin nor a comment."""
    pins: dict[str, str] = {}
    section_of: dict[str, str] = {}
    bad: list[str] = []
    section = ""
    for line in text.splitlines():
        heading = re.match(r"# \[([a-z]+)\]", line)
        if heading:
            section = heading.group(1)
        elif line.strip() and not line.startswith("#"):
            match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][A-Za-z0-9.+!-]*)", line.strip())
            name = canonicalize_name(match.group(1)) if match else ""
            if not match or name in pins or section not in SECTIONS:
                bad.append(line)
            else:
                pins[name], section_of[name] = match.group(2), section
    return pins, section_of, bad


def test_the_lock_pins_every_requirement_once_at_an_exact_version() -> None:
    pins, section_of, bad = read_lock(LOCK.read_text())
    assert not bad, f"constraints.txt lines that are not one exact pin in a known section: {bad}"
    assert {"torch", "horovod"} <= {n for n, s in section_of.items() if s == "frameworks"}
    unmet = []
    for line in setup_requirements():
        req = Requirement(line)
        name = canonicalize_name(req.name)
        if name not in pins or not req.specifier.contains(pins[name], prereleases=True):
            unmet.append(f"{line} (lock: {pins.get(name, 'none')})")
    assert not unmet, f"requirements the lock does not pin to a version they accept: {unmet}"


def _applied() -> tuple[str, dict[str, str], set[str], dict[str, str]]:
    """What set-up held this environment to: its header line, the applied pins, the names it said it left
    unpinned, and the frameworks' settings it installed them through."""
    written = Path(sys.prefix) / ".hvdbench-constraints.txt"
    if not written.is_file():
        pytest.skip(f"{sys.prefix} was not made by scripts/setup.sh (no .hvdbench-constraints.txt)")
    text = written.read_text()
    if "HVDBENCH_LOCK=none" in text.splitlines()[0]:
        pytest.skip("set-up ran with HVDBENCH_LOCK=none: nothing pinned")
    pins, _, _ = read_lock(text)
    unpinned = {canonicalize_name(m.group(1)) for m in re.finditer(r"^# not applied \(.*\): ([^=\s]+)==", text, re.M)}
    specs = dict(re.findall(r"^# (torch|tensorflow|horovod): (.*)$", text, re.M))
    return text.splitlines()[0], pins, unpinned, specs


def _framework_problem(name: str, version: Version, specs: dict[str, str]) -> str | None:
    """Whether framework ``name`` is at the version set-up was told to install (its setting or the lock's)."""
    if name == "horovod":
        return None if version == Version(specs["horovod"]) else f"horovod {version}, asked {specs['horovod']}"
    spec = specs["torch" if name == "torch" else "tensorflow"].split()[0]
    req = Requirement(spec)
    if canonicalize_name(req.name) != name or req.specifier.contains(version, prereleases=True):
        return None
    return f"{name} {version}, asked {spec}"


def test_this_environment_holds_what_the_lock_pins() -> None:
    header, pins, unpinned, specs = _applied()
    own = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    problems = []
    for dist in md.distributions(path=sorted(own)):
        name = canonicalize_name(dist.metadata["Name"])
        version = Version(dist.version)
        if name in NOT_LOCKED:
            continue
        if name in ("torch", "horovod", "tensorflow", "tensorflow-cpu"):
            problems.append(_framework_problem(name, version, specs) or "")
        elif name in pins:
            if version != Version(pins[name]):
                problems.append(f"{name} {version}, pinned {pins[name]}")
        elif name not in unpinned:  # unpinned: a section set-up said it left out, and why
            problems.append(f"{name} {version} is installed but not in the lock (make lock)")
    problems = [p for p in problems if p]
    assert not problems, f"{header}: " + "; ".join(problems)
