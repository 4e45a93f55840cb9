"""Evidence for a slow GPU or rank: what its telemetry and NVML facts say, against its peers and against
the GPU's own limits (clocks below their maxima, clock-event reasons, temperature, power at its limit,
a PCIe link below its generation or width, ECC errors, retired pages)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

# Per-rank summaries of telemetry (mean, or the worst where a lower value is the problem).
MEANS = ("sm_clock_mhz", "memory_clock_mhz", "power_w", "temperature_c", "process_cpu_pct")
LOWEST = ("pcie_gen", "pcie_width")
CLOCK_GAP = 0.02       # clocks this much below the peers' median or the GPU's maximum are named
POWER_GAP = 0.05       # power this much off the peers' median is named
TEMPERATURE_GAP = 5.0  # degrees C above the peers' median
CPU_GAP = 0.10         # a rank's process getting this much less CPU than its peers (contention)
AT_LIMIT = 0.97        # power at this fraction of the enforced limit is "at the limit"
NO_DIFFERENCE = "telemetry shows no difference"
EVIDENCE_COLUMNS = ["run_id", "rank", *MEANS, *LOWEST, "clock_events"]
UNITS = {"sm_clock_mhz": "MHz", "memory_clock_mhz": "MHz", "power_w": "W", "temperature_c": "°C",
         "process_cpu_pct": "% of a core"}
LABELS = {"sm_clock_mhz": "SM clock", "memory_clock_mhz": "memory clock", "power_w": "power",
          "process_cpu_pct": "process CPU",
          "temperature_c": "temperature", "pcie_gen": "PCIe generation", "pcie_width": "PCIe width"}


def rank_telemetry(telemetry: pd.DataFrame) -> pd.DataFrame:
    """Per run and rank: mean clocks, power and temperature, the lowest PCIe generation and width, and
    every clock-event reason seen (sorted, joined by commas; empty when none)."""
    if telemetry.empty:
        return pd.DataFrame(columns=EVIDENCE_COLUMNS)
    grouped = telemetry.groupby(["run_id", "rank"])
    out = grouped[list(MEANS)].mean().join(grouped[list(LOWEST)].min())
    events = grouped["clock_events"].agg(
        lambda v: ",".join(sorted({e for cell in v.dropna() for e in str(cell).split(",") if e})))
    return out.join(events.rename("clock_events")).reset_index()


def _num(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def against_peers(mine: pd.Series, peers: pd.DataFrame) -> list[str]:
    """How this rank's telemetry differs from the median of the others'."""
    found = []
    for column in MEANS:
        me, them = _num(mine.get(column)), _num(peers[column].median()) if len(peers) else None
        if me is None or them is None or them == 0:
            continue
        gap = me / them - 1.0
        if column == "temperature_c":
            named = me - them > TEMPERATURE_GAP
        elif column == "power_w":
            named = abs(gap) > POWER_GAP
        elif column == "process_cpu_pct":
            named = gap < -CPU_GAP
        else:
            named = gap < -CLOCK_GAP
        if named:
            change = f"{me - them:+.0f} °C" if column == "temperature_c" else f"{gap:+.1%}"
            found.append(f"{LABELS[column]} {me:,.0f} vs {them:,.0f} {UNITS[column]} on the others ({change})")
    for column in LOWEST:
        me, them = _num(mine.get(column)), _num(peers[column].median()) if len(peers) else None
        if me is not None and them is not None and me < them:
            found.append(f"{LABELS[column]} {me:.0f} vs {them:.0f} on the others")
    own = set(filter(None, str(mine.get("clock_events") or "").split(",")))
    others = {e for cell in peers.get("clock_events", pd.Series(dtype=str)).dropna() for e in str(cell).split(",") if e}
    if own - others - {"gpu_idle"}:
        found.append("clock events only here: " + ", ".join(sorted(own - others - {"gpu_idle"})))
    return found


def against_limits(mine: pd.Series, facts: pd.Series | None) -> list[str]:
    """How this rank's GPU compares with its own limits (from the env record's NVML facts)."""
    if facts is None:
        return []
    found = []
    for column, limit in (("sm_clock_mhz", "max_sm_clock_mhz"), ("memory_clock_mhz", "max_memory_clock_mhz")):
        me, top = _num(mine.get(column)), _num(facts.get(limit))
        if me is not None and top and me < top * (1 - CLOCK_GAP):
            found.append(f"{LABELS[column]} {me:,.0f} of its {top:,.0f} MHz maximum")
    power, cap = _num(mine.get("power_w")), _num(facts.get("power_limit_w"))
    if power is not None and cap and power >= cap * AT_LIMIT:
        found.append(f"power {power:,.0f} W at its {cap:,.0f} W limit")
    for column, widest in (("pcie_gen", "pcie_max_gen"), ("pcie_width", "pcie_max_width")):
        me, most = _num(mine.get(column)), _num(facts.get(widest))
        if me is not None and most and me < most:
            found.append(f"{LABELS[column]} {me:.0f} of {most:.0f}")
    for column, what in (("ecc_uncorrected", "uncorrected ECC errors"), ("retired_pages", "retired pages")):
        count = _num(facts.get(column))
        if count:
            found.append(f"{count:.0f} {what}")
    return found


def evidence(mine: pd.Series | None, peers: pd.DataFrame, facts: pd.Series | None) -> str:
    """One cell: what differs, ``; ``-separated, or why nothing can be said."""
    if mine is None:
        return "no telemetry recorded"
    found = against_peers(mine, peers) + against_limits(mine, facts)
    return "; ".join(found) if found else NO_DIFFERENCE
