"""The node's own power where the kernel tells it: RAPL's energy counters of the CPU packages and their DRAM under
/sys/class/powercap (Intel, and AMD since Linux 5.8), read by local rank 0 beside the GPUs' NVML power. What a
node draws besides its GPUs (CPUs, memory; not NICs, switches or fans, which only the BMC sees) is part of what
a buyer pays for. Where the counters are absent or unreadable (a VM, a kernel without the driver, counters
readable by root alone since Linux 5.10) the reason is recorded once instead. Framework-free."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

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
