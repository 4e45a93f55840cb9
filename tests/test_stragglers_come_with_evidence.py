"""A straggling rank is named with the evidence: its telemetry against the other ranks' (clocks, power,
temperature, PCIe link, clock-event reasons) and against its GPU's own limits (NVML facts)."""

from __future__ import annotations

from pathlib import Path

from conftest import write_run
from hvdbench.analysis.collect import collect
from hvdbench.analysis.tables.scaling import run_stats_table, straggler_table
from hvdbench.core.spec import RunSpec

FACTS = {"name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "00000000:19:00.0", "max_sm_clock_mhz": 1980,
         "max_memory_clock_mhz": 2619, "power_limit_w": 700.0, "pcie_max_gen": 5, "pcie_max_width": 16}
NORMAL = {"sm_clock_mhz": 1980, "memory_clock_mhz": 2619, "power_w": 650.0, "temperature_c": 60,
          "pcie_gen": 5, "pcie_width": 16, "clock_events": []}


def test_a_slow_gpu_is_named_with_what_differs(tmp_path: Path) -> None:
    slow = {**NORMAL, "memory_clock_mhz": 2493, "temperature_c": 81, "pcie_width": 8,
            "clock_events": ["sw_thermal_slowdown"]}
    telemetry = [NORMAL, NORMAL, slow, NORMAL]
    gpus = [FACTS, FACTS, {**FACTS, "ecc_uncorrected": 2}, FACTS]
    durations = [[0.1] * 30, [0.1] * 30, [0.112] * 30, [0.1] * 30]
    write_run(tmp_path, RunSpec(benchmark="imagenet", np=4), durations, telemetry=telemetry, gpu=gpus)
    collection = collect([tmp_path])
    table = straggler_table(collection, run_stats_table(collection))
    assert list(table["rank"]) == [2]
    row = table.iloc[0]
    assert row["gpu"] == "NVIDIA H100 80GB HBM3 00000000:19:00.0" and row["clock_events"] == "sw_thermal_slowdown"
    found = row["evidence"].split("; ")
    assert found == ["memory clock 2,493 vs 2,619 MHz on the others (-4.8%)",
                     "temperature 81 vs 60 °C on the others (+21 °C)",
                     "PCIe width 8 vs 16 on the others",
                     "clock events only here: sw_thermal_slowdown",
                     "memory clock 2,493 of its 2,619 MHz maximum",
                     "PCIe width 8 of 16",
                     "2 uncorrected ECC errors"]


def test_a_slow_rank_without_telemetry_differences_says_so(tmp_path: Path) -> None:
    write_run(tmp_path, RunSpec(benchmark="imagenet", np=2), [[0.1] * 30, [0.12] * 30], telemetry=NORMAL, gpu=FACTS)
    collection = collect([tmp_path])
    assert list(straggler_table(collection, run_stats_table(collection))["evidence"]) == [
        "telemetry shows no difference"]
    bare = tmp_path / "bare"
    write_run(bare, RunSpec(benchmark="imagenet", np=2), [[0.1] * 30, [0.12] * 30])
    collection = collect([bare])
    assert list(straggler_table(collection, run_stats_table(collection))["evidence"]) == ["no telemetry recorded"]
