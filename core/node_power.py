"""The node's own power where the kernel tells it: RAPL's energy counters of the CPU packages and their DRAM under
/sys/class/powercap (Intel, and AMD since Linux 5.8), read by local rank 0 beside the GPUs' NVML power. What a
node draws besides its GPUs (CPUs, memory; not NICs, switches or fans, which only the BMC sees) is part of what
a buyer pays for. Where the counters are absent or unreadable (a VM, a kernel without the driver, counters
readable by root alone since Linux 5.10) the reason is recorded once instead. The whole node (NICs, switches, fans
and power supplies included) only its BMC sees: ``ipmitool dcmi power reading`` where the tool and an IPMI device
are present, at most every BMC_INTERVAL_S. Framework-free."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

IPMI_DEVICES = (Path("/dev/ipmi0"), Path("/dev/ipmi/0"), Path("/dev/ipmidev/0"))
BMC_COMMAND = ("dcmi", "power", "reading")
BMC_INTERVAL_S = 5.0  # a BMC answers in tenths of a second and refreshes its reading about once a second
BMC_TIMEOUT_S = 5.0
READING = re.compile(r"Instantaneous power reading:\s*([0-9]+(?:\.[0-9]+)?)\s*Watts", re.IGNORECASE)

POWERCAP = Path("/sys/class/powercap")


@dataclass(frozen=True)
class RaplZone:
    """One counter: its name (package-0, dram), its energy file and the value at which it wraps (µJ)."""

    name: str
    energy: Path
    wraps_at: int


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None


def rapl_zones(root: Path = POWERCAP) -> tuple[list[RaplZone], str | None]:
    """The CPU packages' zones (``intel-rapl:N``) and their DRAM subzones, each readable; or none and why. The
    platform zone (psys) is left out: it holds the packages' energy too."""
    if not root.is_dir():
        return [], f"RAPL not exposed: {root} is absent (no powercap driver, or a virtual machine)"
    zones, unreadable = [], []
    for folder in sorted(root.glob("intel-rapl:*")):
        name = _name(folder)
        if not name or name == "psys" or (folder.name.count(":") == 2 and name != "dram"):
            continue
        energy, wraps = _read_int(folder / "energy_uj"), _read_int(folder / "max_energy_range_uj")
        if energy is None or wraps is None:
            unreadable.append(folder.name)
            continue
        label = name if folder.name.count(":") == 1 else f"{name} of {folder.name.rsplit(':', 1)[0]}"
        zones.append(RaplZone(label, folder / "energy_uj", wraps))
    if zones:
        return zones, None
    if unreadable:
        return [], (f"RAPL counters not readable ({', '.join(unreadable)}: energy_uj is root's alone since "
                    "Linux 5.10)")
    return [], f"RAPL not exposed: {root} holds no CPU package zone"


def _name(folder: Path) -> str:
    try:
        return (folder / "name").read_text(encoding="ascii").strip()
    except OSError:
        return ""


class RaplSampler:
    """The CPU packages' and DRAM's power since the previous sample, from RAPL's counters (a counter that wrapped
    is counted once round)."""

    def __init__(self, root: Path = POWERCAP, clock: Callable[[], float] = time.monotonic) -> None:
        self.zones, self.reason = rapl_zones(root)
        self._clock = clock
        self._last: tuple[float, list[int]] | None = None

    def facts(self) -> dict[str, Any]:
        """For the env record: the zones read, or why none is."""
        return {"rapl": [zone.name for zone in self.zones] or None, "reason": self.reason}

    def sample(self) -> dict[str, Any]:
        """``cpu_power_w`` over the time since the last call (nothing on the first, or without zones)."""
        if not self.zones:
            return {}
        now, read = self._clock(), [_read_int(zone.energy) for zone in self.zones]
        energies = [e for e in read if e is not None]
        last, self._last = self._last, ((now, energies) if len(energies) == len(read) else None)
        if last is None or self._last is None or now <= last[0]:
            return {}
        joules = sum(((e - b) % (zone.wraps_at + 1)) / 1e6 for zone, e, b in zip(self.zones, energies, last[1]))
        return {"cpu_power_w": joules / (now - last[0])}


def bmc_watts(text: str) -> float | None:
    """The instantaneous reading of ``ipmitool dcmi power reading``'s output, or None."""
    found = READING.search(text)
    watts = float(found.group(1)) if found else None
    return watts if watts else None  # 0 W: the BMC's power reading is deactivated


class BmcSampler:
    """The whole node's power as its BMC reads it (``ipmitool dcmi power reading``), checked once at start: where
    the tool, an IPMI device or a reading is missing, the reason instead."""

    def __init__(self, run: Callable[..., Any] = subprocess.run, which: Callable[[str], str | None] = shutil.which,
                 devices: tuple[Path, ...] = IPMI_DEVICES, clock: Callable[[], float] = time.monotonic) -> None:
        self._run, self._clock, self._next = run, clock, 0.0
        self.command: list[str] | None = None
        tool = which("ipmitool")
        if tool is None:
            self.reason: str | None = "BMC not read: ipmitool is not installed"
        elif not any(device.exists() for device in devices):
            self.reason = f"BMC not read: no IPMI device ({', '.join(map(str, devices))})"
        else:
            self.command, self.reason = [tool, *BMC_COMMAND], None
            if self._read() is None:
                self.command = None

    def _read(self) -> float | None:
        """One reading; on a failure the sampler stops, with the reason."""
        assert self.command is not None
        try:
            out = self._run(self.command, capture_output=True, text=True, timeout=BMC_TIMEOUT_S)
        except (OSError, subprocess.SubprocessError) as exc:
            self.reason = f"BMC not read: {' '.join(BMC_COMMAND)} failed ({type(exc).__name__})"
            return None
        watts = bmc_watts(out.stdout) if out.returncode == 0 else None
        if watts is None:
            first = (out.stderr or out.stdout or "").strip().splitlines()[:1]
            self.reason = (f"BMC not read: ipmitool {' '.join(BMC_COMMAND)} exited {out.returncode}"
                           + (f": {first[0][:160]}" if first else ", no reading in its output"))
        return watts

    def facts(self) -> dict[str, Any]:
        return {"bmc": "ipmitool " + " ".join(BMC_COMMAND) if self.command else None, "bmc_reason": self.reason}

    def sample(self) -> dict[str, Any]:
        """``node_power_w`` at most every BMC_INTERVAL_S (nothing between readings or without a BMC)."""
        now = self._clock()
        if self.command is None or now < self._next:
            return {}
        self._next = now + BMC_INTERVAL_S
        watts = self._read()
        if watts is None:
            self.command = None
            return {}
        return {"node_power_w": watts}


class NodePower:
    """Local rank 0's view of its node's power: RAPL's CPU packages and DRAM, and the BMC's whole node."""

    def __init__(self, rapl: RaplSampler | None = None, bmc: BmcSampler | None = None) -> None:
        self.rapl, self.bmc = rapl or RaplSampler(), bmc or BmcSampler()

    def facts(self) -> dict[str, Any]:
        return {**self.rapl.facts(), **self.bmc.facts()}

    def sample(self) -> dict[str, Any]:
        return {**self.rapl.sample(), **self.bmc.sample()}
