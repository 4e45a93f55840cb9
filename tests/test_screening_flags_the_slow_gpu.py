"""Screening: every GPU alone against its fleet. A GPU planted slow (an NVML stand-in reporting a lowered
memory clock, as a published study found in one box) is flagged with its evidence; a fleet of equal GPUs
flags none in 20 draws; a node counts as its slowest GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import REPO, hvdbench_exe, write_run
from hvdbench.analysis.collect import collect
from hvdbench.analysis.tables.scaling import run_stats_table
from hvdbench.analysis.tables.screening import screening_table
from hvdbench.launchers.runs import screen_sweep
from hvdbench.core.topology import parse_topo_text
from hvdbench.core.gpu import Nvml
from hvdbench.core.spec import RunSpec
from nvml_standin import StandInNvml

BUSY_ON_SLOT = 5  # busy loops pinned to the screened "busy" CPU slot (see the CPU-slot test)
PCIE = parse_topo_text((REPO / "tests" / "fixtures" / "topology" / "pcie-8gpu-pix-phb-sys.txt").read_text())


def _fleet(root: Path, rng: np.random.Generator, *, slow: dict[int, float], host: str = "node1",
           standin: StandInNvml | None = None) -> None:
    """One screening run per GPU: 30 steps of 0.1 s with 1% noise, slowed by the given factors; telemetry
    and GPU facts as the NVML stand-in reports them (through the harness's own NVML reader)."""
    standin = standin or StandInNvml(PCIE)
    nvml = Nvml(standin)
    for gpu in range(8):
        handle = nvml.handle(None, str(gpu))
        spec = RunSpec(benchmark="imagenet", np=1, placement=f"single:{gpu}", devices=(gpu,), host=host)
        steps = 0.1 * slow.get(gpu, 1.0) * (1 + 0.01 * rng.standard_normal(30))
        write_run(root, spec, [list(steps)], samples=64, telemetry=nvml.sample(handle), gpu=nvml.static(handle),
                  host=host)


def _screen(root: Path):  # type: ignore[no-untyped-def]
    collection = collect([root])
    return screening_table(collection, run_stats_table(collection))


def test_a_gpu_at_a_lower_memory_clock_is_flagged_with_its_evidence(tmp_path: Path) -> None:
    standin = StandInNvml(PCIE)
    standin.states[5].memory_clock = 1512  # 1593 MHz on the others: the box's memory clocks were set apart
    _fleet(tmp_path, np.random.default_rng(1), slow={5: 1.07}, standin=standin)
    table = _screen(tmp_path)
    assert len(table) == 8 and set(table["level"]) == {"gpu"}
    flagged = table[table["flagged"]]
    assert list(flagged["unit"]) == ["single:5"]
    row = flagged.iloc[0]
    assert row["vs_fleet"] < 0.95 and row["gpu"] == "NVIDIA A100-SXM4-80GB 00000000:57:00.0"
    assert row["evidence"] == ("memory clock 1,512 vs 1,593 MHz on the others (-5.1%); "
                               "memory clock 1,512 of its 1,593 MHz maximum")
    assert (table[~table["flagged"]]["evidence"] == "telemetry shows no difference").all()


def test_a_fleet_of_equal_gpus_flags_none_in_twenty_draws(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    for draw in range(20):
        root = tmp_path / f"draw{draw}"
        _fleet(root, rng, slow={})
        assert not _screen(root)["flagged"].any(), draw


def test_a_node_counts_as_its_slowest_gpu(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    for node in ("node1", "node2", "node3"):
        _fleet(tmp_path, rng, slow={2: 1.08} if node == "node2" else {}, host=node)
    table = _screen(tmp_path)
    nodes = table[table["level"] == "node"].set_index("host")
    assert list(nodes.index) == ["node1", "node2", "node3"]
    assert nodes.loc["node2", "flagged"] and not nodes.loc["node1", "flagged"] and not nodes.loc["node3", "flagged"]
    assert nodes.loc["node2", "evidence"] == "flagged GPU(s): single:2"
    gpus = table[(table["level"] == "gpu") & table["flagged"]]
    assert list(zip(gpus["host"], gpus["unit"])) == [("node2", "single:2")]


def _full_node(root: Path, standin: StandInNvml, slow: dict[int, float], alone: bool = True) -> None:
    """Each GPU alone (1% noise, all equal), then all 8 at once each training alone (slowed by ``slow``), then
    together; telemetry as the stand-in reports under full load."""
    rng = np.random.default_rng(3)
    nvml = Nvml(standin)
    handles = [nvml.handle(None, str(gpu)) for gpu in range(8)]
    for gpu in range(8) if alone else ():
        spec = RunSpec(benchmark="imagenet", np=1, placement=f"single:{gpu}", devices=(gpu,))
        write_run(root, spec, [list(0.1 * (1 + 0.01 * rng.standard_normal(30)))], samples=64,
                  gpu=nvml.static(handles[gpu]), host="node1")
    loaded = [list(0.102 * slow.get(g, 1.0) * (1 + 0.01 * rng.standard_normal(30))) for g in range(8)]
    for args, steps in ((("--independent",), loaded), ((), [[max(s) * 1.05 for s in zip(*loaded)]] * 8)):
        spec = RunSpec(benchmark="imagenet", args=args, np=8, placement="all", devices=tuple(range(8)))
        write_run(root, spec, steps, samples=64, telemetry=[nvml.sample(h) for h in handles],
                  gpu=[nvml.static(h) for h in handles], host="node1")


def test_full_node_screening_names_the_gpu_that_slows_only_under_full_load(tmp_path: Path) -> None:
    """All eight GPUs equal alone; at full load every one is at its power cap (normal), and GPU 3 also runs
    hot with its clocks slowed for heat and falls 8% behind: only GPU 3 is named, with the evidence."""
    from hvdbench.analysis.tables.full_node import full_node_table

    standin = StandInNvml(PCIE)
    for state in standin.states:
        state.clock_events, state.temperature = 0x4, 70  # sw_power_cap on every GPU under full load
    standin.states[3].clock_events, standin.states[3].temperature, standin.states[3].sm_clock = 0x24, 88, 1300
    _full_node(tmp_path, standin, {3: 1.08})
    collection = collect([tmp_path])
    full = full_node_table(collection, run_stats_table(collection))
    gpus = full[full["level"] == "gpu"]
    assert len(gpus) == 8 and list(gpus[gpus["flagged"]]["unit"]) == [standin.bus[3]]
    why = gpus[gpus["flagged"]].iloc[0]["evidence"]
    assert "below the node's median under full load" in why and "clocks slowed: sw_thermal_slowdown" in why
    assert "alone " in why and "under full load" in why and "temperature 88 vs 70" in why
    assert gpus["alone"].notna().all() and gpus[~gpus["flagged"]]["evidence"].eq("telemetry shows no difference").all()
    node = full[full["level"] == "node"].iloc[0]
    assert node["flagged"] and 0.8 < node["together"] / node["throughput"] < 1.0


def test_full_node_screening_flags_none_of_equal_gpus(tmp_path: Path) -> None:
    _full_node(tmp_path, StandInNvml(PCIE), {}, alone=False)
    collection = collect([tmp_path])
    from hvdbench.analysis.tables.full_node import full_node_table

    full = full_node_table(collection, run_stats_table(collection))
    assert len(full) == 9 and not full["flagged"].any() and full["alone"].isna().all()


def test_screen_mode_node_loads_every_gpu_at_once_then_together() -> None:
    from hvdbench.launchers.runs import screen_plan
    from hvdbench.core.errors import UsageError

    sweep = screen_sweep(None, [], topology=None, cpu_slots=None, pairs=True, launcher="horovodrun", system="s",
                         timeout=60)
    node = screen_plan(sweep, PCIE, "node").specs
    assert [(s.np, s.placement, "--independent" in s.args) for s in node] == [(8, "all", True), (8, "all", False)]
    both = screen_plan(sweep, PCIE, "both").specs
    assert len(both) == len(screen_plan(sweep, PCIE, "gpu").specs) + 2 and both[-2:] == node
    with pytest.raises(UsageError, match="nothing to load at once"):
        screen_plan(sweep, parse_topo_text("\tGPU0\tCPU Affinity\nGPU0\t X \t0-7\n"), "node")


@pytest.mark.slow
def test_screen_on_cpu_slots_flags_the_slot_a_busy_process_shares(tmp_path: Path, hvd_env: dict) -> None:
    """Real ranks: two CPU slots screened one after the other while busy loops hold the last CPU.

    Linux shares a CPU fairly between sessions first (autogroups), then between a session's processes, and the
    ranks run in a session of their own: BUSY_ON_SLOT loops, each in its own session, leave the rank on that slot a
    sixth of its core (one loop, or loops in one session, left it half). Three loops (a quarter) were not enough
    beside a busy neighbour: with two loops in sessions of their own on the machine the free slot's rank got 31% of
    a core and the busy slot's 24%, and their throughputs came out equal. With five: quiet 165 s, 163 vs 24
    samples/s; beside two such loops 257 s, 47 vs 22 samples/s (31% vs 16% of a core), flagged (2026-11-28)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs 2 CPUs")
    busy = [subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpus[-1]}}})\n"
                              "while True: pass"], start_new_session=True) for _ in range(BUSY_ON_SLOT)]
    try:
        out = tmp_path / "screen"
        proc = subprocess.run([hvdbench_exe(), "screen", "--cpu-slots", "2", "--mode", "both", "-o", str(out),
                               "--steps", "20"], capture_output=True, text=True, env=hvd_env, timeout=600)
    finally:
        for loop in busy:
            loop.kill()
            loop.wait()
    assert proc.returncode == 0, proc.stderr[-2000:]
    table = pd.read_csv(out / "report" / "screening.csv")
    assert list(table["unit"]) == ["cpu:0", "cpu:1"] and list(table["flagged"]) == [False, True]
    assert table.loc[1, "evidence"].startswith("process CPU ")  # the rank got less of its core: contention
    assert "screening: 1 of 2 GPU(s)/node(s) flagged" in proc.stdout
    # --mode both: then both slots at once, each rank alone on its own slot, then together
    full = pd.read_csv(out / "report" / "full_node.csv", keep_default_na=False)
    assert list(full["unit"]) == ["cpu:0", "cpu:1", "2 ranks"] and list(full["level"]) == ["gpu", "gpu", "node"]
    # the busy slot and the node are flagged for it; the free slot is never below the node's median. Whether the free
    # slot is also "further behind its own 1-slot figure than the median slot" rests on two single runs that swing by
    # a third on a shared 2-core machine (measured: 126/s alone, 169/s under full load), so it is not asserted here
    assert list(full["flagged"])[1:] == [True, True]
    assert "below the node's median under full load" in full.loc[1, "evidence"]
    assert "below the node's median" not in full.loc[0, "evidence"]
    assert full.loc[0, "alone"] and full.loc[2, "together"] and "of the ranks alone at once" in full.loc[2, "evidence"]
    flagged = int(full.loc[full["level"] == "gpu", "flagged"].sum())  # 1, or 2 where the free slot swung (above)
    assert f"full-node screening: {flagged} of 2 GPU(s) flagged under full load: " in proc.stdout


def test_screen_without_gpus_refuses_in_one_line(tmp_path: Path) -> None:
    proc = subprocess.run([hvdbench_exe(), "screen", "-o", str(tmp_path / "out")], capture_output=True, text=True,
                          env={**os.environ, "PATH": str(Path(sys.executable).parent)}, timeout=120)
    if proc.returncode == 0:
        pytest.skip("this machine has GPUs")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "--cpu-slots N screens N CPU slots" in lines[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("extra", [["--steps", "40"], ["--steps=40"]])
def test_a_flag_given_to_screen_replaces_the_default_workloads_own(extra: list[str]) -> None:
    sweep = screen_sweep(None, extra, topology=None, cpu_slots=1, pairs=False, launcher="horovodrun",
                         system="here", timeout=60)
    args = sweep.workloads[0].args
    assert [a for a in args if a.startswith("--steps")] == [extra[0]]
    assert args[args.index(extra[0]):][:len(extra)] == tuple(extra)
    assert "--warmup-steps" in args  # the other defaults stay
