"""What a sample costs on each offer: a costs file (TOML, one table per system) turned into US dollars per GPU-hour,
then into dollars per million samples with the throughput's 95% interval. An owned system: purchase price over its
years of use at its expected utilisation, plus energy (node power from the file, else as measured: the BMC's whole
node, else the GPUs' plus the CPUs' and DRAM's from RAPL, else the GPUs' alone, said as "GPU power only"; times PUE
times the power price); a rented one: its hourly price per node, or per GPU as clouds quote it.

    [systems.DGX]                       [systems.L40S]
    purchase_usd = 400000               hourly_usd = 14.0   # per node-hour, energy included
    years = 5                           gpus_per_node = 8
    utilisation = 0.7
    gpus_per_node = 8                   [systems.cloud-h100]
    power_usd_per_kwh = 0.12            usd_per_gpu_hour = 2.49   # per GPU-hour, as a cloud quotes it
    pue = 1.3
    node_power_kw = 10.2                # optional: else the GPUs' measured power only

docs/procurement.md ("Costs") shows the file with every field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from hvdbench.core.errors import UsageError
from hvdbench.core.validate import read_toml_table, text_problem

HOURS_PER_YEAR = 8766.0  # 365.25 days
OWNED = ("purchase_usd", "years", "utilisation", "gpus_per_node", "power_usd_per_kwh", "pue")
RENTED = ("hourly_usd", "gpus_per_node")
RENTED_PER_GPU = ("usd_per_gpu_hour",)
KINDS_SAID = ("an owned system: " + ", ".join(OWNED) + " (node_power_kw optional); a system rented by the node: "
              + ", ".join(RENTED) + " (hourly_usd per node-hour); rented by the GPU: usd_per_gpu_hour")
OPTIONAL = ("node_power_kw",)
CAPITAL_ONLY = "capital only: the runs recorded no power (give node_power_kw in the costs file); a lower bound"


@dataclass(frozen=True)
class Cost:
    """One system's costs: rented (``hourly_usd`` per node-hour, or ``usd_per_gpu_hour``) or owned (the rest)."""

    system: str
    gpus_per_node: float = 1.0
    hourly_usd: float | None = None
    usd_per_gpu_hour: float | None = None
    purchase_usd: float | None = None
    years: float | None = None
    utilisation: float | None = None
    power_usd_per_kwh: float | None = None
    pue: float | None = None
    node_power_kw: float | None = None

    def per_gpu_hour(self, gpu_power_w: float, cpu_power_w: float = math.nan,
                     node_power_w: float = math.nan) -> tuple[float, str]:
        """Dollars per GPU-hour and what the energy counted (each figure per GPU): the node's power from the file,
        else the node's as its BMC measured it, else the GPUs' measured power plus the CPUs' and DRAM's (RAPL),
        else the GPUs' only; none for a rented node (its price includes it). Where an owned system's runs recorded
        no power at all, the capital part alone, said as such (CAPITAL_ONLY: a lower bound)."""
        if self.usd_per_gpu_hour is not None:
            return self.usd_per_gpu_hour, "in the hourly price"
        if self.hourly_usd is not None:
            return self.hourly_usd / self.gpus_per_node, "in the hourly price"
        assert self.purchase_usd is not None and self.years and self.utilisation and self.pue is not None
        capital = self.purchase_usd / (self.years * HOURS_PER_YEAR * self.utilisation) / self.gpus_per_node
        if self.node_power_kw is not None:
            kw, said = self.node_power_kw / self.gpus_per_node, "node power from the costs file"
        elif math.isfinite(node_power_w):
            kw, said = node_power_w / 1000.0, "node power measured by the BMC"
        elif math.isfinite(cpu_power_w) and math.isfinite(gpu_power_w):
            kw, said = (gpu_power_w + cpu_power_w) / 1000.0, "GPU power and CPUs/DRAM (RAPL); not NICs, fans"
        elif math.isfinite(gpu_power_w):
            kw, said = gpu_power_w / 1000.0, "GPU power only"
        else:
            return capital, CAPITAL_ONLY
        return capital + kw * self.pue * (self.power_usd_per_kwh or 0.0), said


# what each field may hold: (least, most, what it is); a figure outside is a typo, not a price
BOUNDS: dict[str, tuple[float, float, str]] = {
    "purchase_usd": (1.0, 1e11, "US dollars for the whole system"), "years": (0.1, 50.0, "years of use"),
    "utilisation": (1e-3, 1.0, "a share of the time, above 0 and at most 1"),
    "gpus_per_node": (1.0, 1024.0, "a whole number of GPUs"), "power_usd_per_kwh": (0.0, 100.0, "US dollars a kWh"),
    "pue": (1.0, 10.0, "power usage effectiveness: 1 (none lost) or more"),
    "node_power_kw": (0.01, 1000.0, "kW a node draws"), "hourly_usd": (0.001, 1e6, "US dollars a node-hour"),
    "usd_per_gpu_hour": (0.001, 1e5, "US dollars a GPU-hour"),
}


def _number(path: Path, system: str, table: dict[str, Any], name: str, required: bool) -> float | None:
    value = table.get(name)
    if value is None:
        if required:
            raise UsageError(f"{path}: systems.{system}.{name}: missing")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise UsageError(f"{path}: systems.{system}.{name}: expected a positive, finite number, got {value!r}")
    least, most, what = BOUNDS[name]
    if not least <= value <= most or (name == "gpus_per_node" and value != int(value)):
        raise UsageError(f"{path}: systems.{system}.{name}: {what}, from {least:g} to {most:g}, got {value!r}")
    return float(value)


def load_costs(path: Path) -> dict[str, Cost]:
    """The costs file; every problem one line naming the file, the system and the field."""
    try:
        systems = read_toml_table(path, "a costs file", "systems", "[systems.NAME] tables only, one per system")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out = {}
    for system, table in systems.items():
        problem = text_problem(system)
        if problem or not isinstance(table, dict):
            raise UsageError(f"{path}: systems.{system[:40]!r}: {problem or 'expected a table of costs'}")
        rented = "hourly_usd" in table or "usd_per_gpu_hour" in table
        fields = (RENTED_PER_GPU if "usd_per_gpu_hour" in table else RENTED) if rented else OWNED
        unknown = sorted(set(table) - set(fields) - set(OPTIONAL if not rented else ()))
        if unknown or ("hourly_usd" in table and "usd_per_gpu_hour" in table):
            name = unknown[0] if unknown else "hourly_usd"
            raise UsageError(f"{path}: systems.{system}.{name}: not a field of this system; give the fields of one "
                             f"kind: {KINDS_SAID}")
        values = {name: _number(path, system, table, name, True) for name in fields}
        values.update({name: _number(path, system, table, name, False) for name in OPTIONAL if not rented})
        out[system] = Cost(system, **values)  # type: ignore[arg-type]
    return out


def cost_columns(compared: pd.DataFrame, scaling: pd.DataFrame, costs: dict[str, Cost]) -> pd.DataFrame:
    """``compared`` with dollars per million samples (and its interval from the throughput's), what the energy
    counted and the derived dollars per GPU-hour, for each system the costs file names (NaN and "no costs given"
    for the others), and samples per dollar from them where no --price gave it; a system the file names that no
    result has is a UsageError."""
    unknown = sorted(set(costs) - set(scaling["system"]))
    if unknown:
        raise UsageError(f"the costs file names system(s) {', '.join(unknown)} that no result has; systems: "
                         f"{', '.join(sorted(set(scaling['system'])))}")
    out = compared.copy()
    columns = ["mean_power_w", "cpu_power_w", "node_power_w"]
    power = scaling.set_index("runs")[columns] if "runs" in scaling else pd.DataFrame(columns=columns)
    spans = scaling.set_index("runs")[["ci_low", "ci_high"]] if "runs" in scaling else None
    per_m, low, high, said, hourly = [], [], [], [], []
    for row in out.itertuples():
        cost = costs.get(row.system)
        measured = power.loc[row.runs] if row.runs in power.index else pd.Series(math.nan, index=columns)
        watts = [float(measured[c]) / row.np for c in columns]  # per GPU: its own, its share of the node's
        if cost is None:
            per_m.append(math.nan)
            low.append(math.nan)
            high.append(math.nan)
            said.append("no costs given")
            hourly.append(math.nan)
            continue
        usd, what = cost.per_gpu_hour(*watts)
        hourly.append(usd)
        hour = usd * row.np
        per_m.append(hour / (row.throughput * 3600.0) * 1e6)
        ci = spans.loc[row.runs] if spans is not None and row.runs in spans.index else None
        low.append(hour / (float(ci["ci_high"]) * 3600.0) * 1e6 if ci is not None else math.nan)
        high.append(hour / (float(ci["ci_low"]) * 3600.0) * 1e6 if ci is not None else math.nan)
        said.append(what)
    out["usd_per_million"], out["usd_per_million_low"], out["usd_per_million_high"] = per_m, low, high
    out["energy_counted"] = said
    out["usd_per_gpu_hour"] = hourly
    priced = out["per_dollar"].isna() & pd.Series(hourly, index=out.index, dtype="float64").notna()
    out.loc[priced, "per_dollar"] = out["throughput"] * 3600.0 / (out["usd_per_gpu_hour"] * out["np"])
    return out
