"""The node's CPU and DRAM power from RAPL (core/node_power.py), on a powercap tree laid out as the kernel lays it
out: packages and their DRAM counted, cores and the platform zone not (they overlap), a wrapped counter counted
once round, an unreadable or absent tree said in one line. On this machine: read where the kernel exposes it,
else the reason is what the env record says. The whole node from the BMC (ipmitool dcmi power reading) where the
tool and an IPMI device are present, its failures said; and the costs take the best power a run measured."""

from __future__ import annotations

from pathlib import Path

import pytest

import subprocess
import math

from hvdbench.analysis.verdicts.costs import CAPITAL_ONLY, Cost
from hvdbench.core.node_power import POWERCAP, BmcSampler, NodePower, RaplSampler, bmc_watts, rapl_zones

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


# ipmitool 1.8's answer on a node whose BMC supports DCMI power readings
DCMI = """
    Instantaneous power reading:                   642 Watts
    Minimum during sampling period:                 95 Watts
    Maximum during sampling period:               1210 Watts
    Average power reading over sample period:      640 Watts
    IPMI timestamp:                           Thu Nov 26 01:50:00 2026
    Sampling period:                          00000001 Seconds.
    Power reading state is:                   activated
"""


def _ipmitool(stdout: str, code: int = 0, stderr: str = "") -> tuple[list[list[str]], object]:
    calls: list[list[str]] = []

    def run(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, code, stdout, stderr)
    return calls, run


def test_the_bmc_reads_the_whole_node_at_most_every_five_seconds(tmp_path: Path) -> None:
    device, now = tmp_path / "ipmi0", [0.0]
    device.touch()
    calls, run = _ipmitool(DCMI)
    bmc = BmcSampler(run, lambda _: "/usr/bin/ipmitool", (device,), clock=lambda: now[0])
    assert bmc.facts() == {"bmc": "ipmitool dcmi power reading", "bmc_reason": None}
    assert bmc.sample() == {"node_power_w": 642.0}
    now[0] = 2.0
    assert bmc.sample() == {}  # the BMC refreshes about once a second: not asked again before 5 s
    now[0] = 5.0
    assert bmc.sample() == {"node_power_w": 642.0} and len(calls) == 3  # the check at start, then two readings
    assert calls[0] == ["/usr/bin/ipmitool", "dcmi", "power", "reading"]
    assert bmc_watts(DCMI.replace("642", "0")) is None  # reading state deactivated


@pytest.mark.bad_input
def test_a_node_without_a_bmc_reading_says_why_in_one_line(tmp_path: Path) -> None:
    assert BmcSampler(which=lambda _: None).reason == "BMC not read: ipmitool is not installed"
    absent = BmcSampler(which=lambda _: "/usr/bin/ipmitool", devices=(tmp_path / "ipmi0",))
    assert absent.reason == f"BMC not read: no IPMI device ({tmp_path / 'ipmi0'})" and absent.sample() == {}
    (tmp_path / "ipmi0").touch()
    _, run = _ipmitool("", 1, "Could not open device at /dev/ipmi0: Permission denied\nmore")
    denied = BmcSampler(run, lambda _: "/usr/bin/ipmitool", (tmp_path / "ipmi0",))
    assert denied.reason == ("BMC not read: ipmitool dcmi power reading exited 1: Could not open device at /dev/ipmi0: "
                             "Permission denied") and denied.sample() == {}
    facts = NodePower(RaplSampler(tmp_path / "none"), denied).facts()
    assert set(facts) == {"rapl", "reason", "bmc", "bmc_reason"} and facts["bmc"] is None


def test_costs_count_the_best_power_a_run_measured() -> None:
    owned = Cost("DGX", 8, purchase_usd=1.0, years=1.0, utilisation=1.0, power_usd_per_kwh=1.0, pue=1.0)
    capital = 1.0 / 8766.0 / 8
    assert owned.per_gpu_hour(500.0, 100.0, 1000.0) == (pytest.approx(capital + 1.0), "node power measured by the BMC")
    usd, said = owned.per_gpu_hour(500.0, 100.0)
    assert usd == pytest.approx(capital + 0.6) and said.startswith("GPU power and CPUs/DRAM (RAPL)")
    assert owned.per_gpu_hour(500.0) == (pytest.approx(capital + 0.5), "GPU power only")
    # no power recorded at all: the capital part alone, said as a lower bound (never no cost and no word why)
    assert owned.per_gpu_hour(math.nan) == (pytest.approx(capital), CAPITAL_ONLY)


def test_a_runs_node_power_is_what_each_nodes_first_rank_read(tmp_path: Path) -> None:
    from conftest import write_run
    from hvdbench.analysis.collect import collect
    from hvdbench.analysis.tables.scaling import run_stats_table
    from hvdbench.core.spec import RunSpec

    tele = [{"power_w": 300.0, "node_power_w": 2000.0, "cpu_power_w": 250.0}, {"power_w": 310.0}]
    write_run(tmp_path, RunSpec(benchmark="cifar10", np=2), [[0.1] * 30] * 2, telemetry=tele)
    stats = run_stats_table(collect([tmp_path])).iloc[0]
    assert (stats["mean_power_w"], stats["node_power_w"], stats["cpu_power_w"]) == (610.0, 2000.0, 250.0)
