"""The node's CPU and DRAM power from RAPL (core/node_power.py), on a powercap tree laid out as the kernel lays it
out: packages and their DRAM counted, cores and the platform zone not (they overlap), a wrapped counter counted
once round, an unreadable or absent tree said in one line. On this machine: read where the kernel exposes it,
else the reason is what the env record says."""

from __future__ import annotations

from pathlib import Path

import pytest

from hvdbench.suite.core.node_power import POWERCAP, RaplSampler, rapl_zones

WRAPS = 262_143_328_850  # max_energy_range_uj of a real package zone


def _zone(root: Path, folder: str, name: str, energy_uj: int) -> Path:
    path = root / folder
    path.mkdir(parents=True)
    (path / "name").write_text(name + "\n")
    (path / "energy_uj").write_text(f"{energy_uj}\n")
    (path / "max_energy_range_uj").write_text(f"{WRAPS}\n")
    return path


def _tree(root: Path, package0: int = 1_000_000) -> Path:
    _zone(root, "intel-rapl:0", "package-0", package0)
    _zone(root, "intel-rapl:0:0", "core", 500_000)
    _zone(root, "intel-rapl:0:1", "dram", 2_000_000)
    _zone(root, "intel-rapl:1", "package-1", 3_000_000)
    _zone(root, "intel-rapl:2", "psys", 9_000_000)
    return root


def _add(root: Path, folder: str, joules: float) -> None:
    path = root / folder / "energy_uj"
    path.write_text(f"{(int(path.read_text()) + int(joules * 1e6)) % (WRAPS + 1)}\n")


def test_packages_and_their_dram_are_summed_into_watts(tmp_path: Path) -> None:
    root = _tree(tmp_path / "powercap")
    zones, reason = rapl_zones(root)
    assert reason is None and [z.name for z in zones] == ["package-0", "dram of intel-rapl:0", "package-1"]
    now = [100.0]
    sampler = RaplSampler(root, clock=lambda: now[0])
    assert sampler.sample() == {}  # the first reading only starts the window
    for folder, joules in (("intel-rapl:0", 50.0), ("intel-rapl:0:1", 10.0), ("intel-rapl:1", 40.0),
                           ("intel-rapl:0:0", 999.0), ("intel-rapl:2", 999.0)):
        _add(root, folder, joules)
    now[0] = 102.0
    assert sampler.sample()["cpu_power_w"] == pytest.approx(50.0)  # (50 + 10 + 40) J over 2 s
    assert sampler.facts() == {"rapl": ["package-0", "dram of intel-rapl:0", "package-1"], "reason": None}


def test_a_counter_that_wrapped_is_counted_once_round(tmp_path: Path) -> None:
    root = _tree(tmp_path / "powercap", package0=WRAPS - 5_000_000)  # 5 J before it wraps
    now = [0.0]
    sampler = RaplSampler(root, clock=lambda: now[0])
    sampler.sample()
    _add(root, "intel-rapl:0", 25.0)  # wraps to 20 J
    now[0] = 1.0
    assert sampler.sample()["cpu_power_w"] == pytest.approx(25.0, abs=1e-5)


@pytest.mark.bad_input
def test_an_absent_or_unreadable_tree_is_one_line_and_no_figure(tmp_path: Path) -> None:
    missing = RaplSampler(tmp_path / "nothing")
    assert missing.sample() == {} and "RAPL not exposed" in str(missing.reason)
    root = tmp_path / "powercap"
    zone = _zone(root, "intel-rapl:0", "package-0", 1)
    (zone / "energy_uj").unlink()
    (zone / "energy_uj").mkdir()  # unreadable as a number, as a root-only counter is to everyone else
    zones, reason = rapl_zones(root)
    assert zones == [] and "RAPL counters not readable (intel-rapl:0" in str(reason) and "\n" not in str(reason)


def test_this_machine_reads_rapl_or_says_why_not() -> None:
    facts = RaplSampler().facts()
    if POWERCAP.is_dir() and facts["rapl"]:
        assert facts["reason"] is None
    else:
        assert facts["rapl"] is None and facts["reason"].startswith(("RAPL not exposed", "RAPL counters not readable"))
