"""Environment capture and telemetry: real on this machine (no GPU: a clear note, process CPU and RSS),
and the NVML path through an NVML-shaped stand-in carrying an H100 SXM's published figures."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from conftest import REPO
from hvdbench.core.environment import loaded_mpi, parse_library_version, parse_mpi_version, relevant_variables
from hvdbench.core.gpu import Nvml, TelemetrySampler, clock_event_names, telemetry_for
from hvdbench.core.records import RecordWriter, read_records


class H100Nvml:
    """Answers the pynvml calls hvdbench makes with an H100 SXM5's values (700 W, 1980/2619 MHz max)."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0

    class NVMLError(Exception):
        pass

    def nvmlInit(self) -> None: ...
    def nvmlSystemGetDriverVersion(self) -> bytes: return b"550.54.15"
    def nvmlSystemGetCudaDriverVersion(self) -> int: return 12040
    def nvmlSystemGetNVMLVersion(self) -> str: return "12.550.54.15"
    def nvmlDeviceGetHandleByPciBusId(self, bus: str) -> str: return f"h:{bus}"
    def nvmlDeviceGetHandleByIndex(self, index: int) -> str: return f"i:{index}"
    def nvmlDeviceGetName(self, h: str) -> str: return "NVIDIA H100 80GB HBM3"
    def nvmlDeviceGetUUID(self, h: str) -> str: return "GPU-5f1a0d6e-0000-0000-0000-000000000000"
    def nvmlDeviceGetPciInfo(self, h: str) -> Any: return SimpleNamespace(busId=b"00000000:18:00.0")
    def nvmlDeviceGetIndex(self, h: str) -> int: return 0
    def nvmlDeviceGetMemoryInfo(self, h: str) -> Any: return SimpleNamespace(total=85520809984, used=1234567890)
    def nvmlDeviceGetMaxClockInfo(self, h: str, kind: int) -> int: return {1: 1980, 2: 2619}[kind]
    def nvmlDeviceGetClockInfo(self, h: str, kind: int) -> int: return {1: 1755, 2: 2619}[kind]
    def nvmlDeviceGetEnforcedPowerLimit(self, h: str) -> int: return 700000
    def nvmlDeviceGetPowerUsage(self, h: str) -> int: return 612345
    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: str) -> int: return 5
    def nvmlDeviceGetMaxPcieLinkWidth(self, h: str) -> int: return 16
    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: str) -> int: return 5
    def nvmlDeviceGetCurrPcieLinkWidth(self, h: str) -> int: return 16
    def nvmlDeviceGetUtilizationRates(self, h: str) -> Any: return SimpleNamespace(gpu=97, memory=41)
    def nvmlDeviceGetTemperature(self, h: str, sensor: int) -> int: return 63
    def nvmlDeviceGetCurrentClocksEventReasons(self, h: str) -> int: return 0x4 | 0x20

    def nvmlDeviceGetPersistenceMode(self, h: str) -> int:
        raise self.NVMLError("Not Supported")  # some fields are unsupported on some GPUs


def test_no_driver_is_a_note_not_an_exception() -> None:
    nvml = Nvml()
    if nvml.available:  # a machine with a driver: nothing to prove here
        return
    assert nvml.driver() == {"available": False, "reason": nvml.reason}
    assert "no NVIDIA driver" in (nvml.reason or "") or "nvidia-ml-py" in (nvml.reason or "")
    assert nvml.handle("00000000:18:00.0", "0") is None
    sample, note = telemetry_for(nvml, None)
    assert note and note.startswith("GPU telemetry off: ")
    assert set(sample()) == {"process_cpu_pct", "rss_bytes"}


def test_nvml_facts_and_samples_from_an_nvml_shaped_source() -> None:
    nvml = Nvml(H100Nvml())
    handle = nvml.handle("00000000:18:00.0", "0")
    assert handle == "h:00000000:18:00.0"
    assert nvml.driver() == {"available": True, "driver": "550.54.15", "cuda_driver": "12.4", "nvml": "12.550.54.15"}
    static = nvml.static(handle)
    assert static["name"] == "NVIDIA H100 80GB HBM3" and static["pci_bus_id"] == "00000000:18:00.0"
    assert (static["max_sm_clock_mhz"], static["max_memory_clock_mhz"], static["power_limit_w"]) == (1980, 2619, 700.0)
    assert static["persistence_mode"] is None  # unsupported: None, not an exception
    sample, note = telemetry_for(nvml, handle)
    values = sample()
    assert note is None
    assert values["sm_clock_mhz"] == 1755 and values["power_w"] == 612.345 and values["gpu_util_pct"] == 97
    assert values["clock_events"] == ["sw_power_cap", "sw_thermal_slowdown"] and values["pcie_width"] == 16
    assert "rss_bytes" in values


def test_clock_event_mask_decoding() -> None:
    assert clock_event_names(0) == []
    assert clock_event_names(0x1 | 0x8 | 0x40) == ["gpu_idle", "hw_slowdown", "hw_thermal_slowdown"]


def test_sampler_writes_records_on_time_and_stops(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.jsonl"
    with RecordWriter(path, rank=0, local_rank=0, size=1) as writer:
        sampler = TelemetrySampler(writer, 0.05, lambda: {"process_cpu_pct": 1.0},
                                   note="GPU telemetry off: test").start()
        time.sleep(0.5)
        sampler.stop()
        count = len(read_records(path))
        time.sleep(0.2)
        assert len(read_records(path)) == count  # stopped means stopped
    records = read_records(path)
    assert 4 <= len(records) <= 12 and all(r["kind"] == "telemetry" for r in records)
    assert records[0]["note"] == "GPU telemetry off: test" and all("note" not in r for r in records[1:])
    quiet = tmp_path / "rank-1.jsonl"
    with RecordWriter(quiet, rank=1, local_rank=1, size=2) as writer:
        off = TelemetrySampler(writer, 0, lambda: {"process_cpu_pct": 1.0}).start()  # interval 0: telemetry off
        time.sleep(0.2)
        off.stop()
    assert read_records(quiet) == []


@pytest.mark.no_gpu
@pytest.mark.slow
@pytest.mark.mpi
def test_run_records_environment_and_cpu_telemetry(tmp_path: Path, hvd_env: dict) -> None:
    env = {**hvd_env, "HOROVOD_FUSION_THRESHOLD": "33554432", "NCCL_DEBUG": "WARN"}
    proc = subprocess.run(["mpirun", "-np", "2", "-x", "HOROVOD_FUSION_THRESHOLD", "-x", "NCCL_DEBUG", sys.executable,
                           str(REPO / "suite" / "mlp.py"), "--batch-size", "8", "--mlp-widths", "256",
                           "--warmup-steps", "1", "--steps", "40", "--telemetry-interval", "0.02",
                           "--log-dir", str(tmp_path)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    records = read_records(tmp_path / "rank-1.jsonl")
    envrec = records[0]
    assert envrec["kind"] == "env" and envrec["variables"]["HOROVOD_FUSION_THRESHOLD"] == "33554432"
    assert envrec["variables"]["NCCL_DEBUG"] == "WARN" and envrec["variables"]["OMPI_COMM_WORLD_RANK"] == "1"
    assert envrec["mpi"]["implementation"] == "Open MPI" and envrec["horovod"]["frameworks"]["pytorch"]
    assert envrec["horovod"]["controller"] == "mpi" and envrec["cpu_model"]
    if not envrec["nvml"]["available"]:
        assert "no NVIDIA driver" in envrec["nvml"]["reason"] or "nvidia-ml-py" in envrec["nvml"]["reason"]
    telemetry = [r for r in records if r["kind"] == "telemetry"]
    assert telemetry and telemetry[0]["note"].startswith("GPU telemetry off")
    assert all(r["rss_bytes"] > 0 for r in telemetry)


def test_variable_capture_and_mpi_parsing() -> None:
    env = {"HOROVOD_CYCLE_TIME": "1", "NCCL_ALGO": "Ring", "OMPI_COMM_WORLD_SIZE": "8", "PMIX_RANK": "3",
           "SLURM_JOB_ID": "42", "SLURM_PROCID": "3", "CUDA_VISIBLE_DEVICES": "0,3", "HOME": "/root", "PATH": "/bin"}
    assert relevant_variables(env) == {k: v for k, v in sorted(env.items()) if k not in ("HOME", "PATH")}
    assert parse_mpi_version("mpirun (Open MPI) 4.1.4\n\nReport bugs to https://www.open-mpi.org/\n") == {
        "mpirun": "mpirun (Open MPI) 4.1.4", "implementation": "Open MPI", "version": "4.1.4"}
    mpich = "HYDRA build details:\n    Version:                                 4.1.2\n    Release Date: Wed Jun  7\n"
    assert parse_mpi_version(mpich)["implementation"] == "MPICH" and parse_mpi_version(mpich)["version"] == "4.1.2"
    intel = "Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619 (id: c2e19c2f3e)\n"
    assert parse_mpi_version(intel)["version"] == "2021.10"
    assert parse_mpi_version(None) == {"mpirun": None, "implementation": None, "version": None}


@pytest.mark.parametrize("text, implementation, version, device", [
    ("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022", "Open MPI", "4.1.4",
     None),
    ("MPICH Version:\t4.0.2\nMPICH Release date:\tThu Apr  7 2022\nMPICH ABI:\t14:2:2\nMPICH Device:\tch4:ucx\n",
     "MPICH", "4.0.2", "ch4:ucx"),
    ("Intel(R) MPI Library 2021.19 for Linux* OS\n", "Intel MPI", "2021.19", None),
])
def test_the_mpi_library_a_rank_loaded_is_named_by_its_own_version_string(text: str, implementation: str,
                                                                          version: str, device: str | None) -> None:
    found = parse_library_version(text, "/lib/libmpi.so.12")
    assert (found["implementation"], found["version"], found.get("device")) == (implementation, version, device)


def test_a_process_without_an_mpi_library_records_none_and_one_with_it_asks_the_library() -> None:
    assert loaded_mpi("7f00-7f01 r-xp 0 08:01 1 /usr/lib/libc.so.6\n") is None
    openmpi = next(iter(sorted(Path("/usr/lib").glob("*/libmpi.so.40*"))), None)
    if openmpi is None:
        pytest.skip("no Open MPI library on this machine")
    found = loaded_mpi(f"7f00-7f01 r-xp 0 08:01 1 {openmpi}\n")
    assert found is not None and found["library"] == str(openmpi) and found["implementation"] == "Open MPI"


def test_a_gpu_is_found_by_bus_id_then_by_what_cuda_visible_devices_names_it() -> None:
    from nvml_standin import StandInNvml

    from hvdbench.core.topology import parse_topo_text

    topo = parse_topo_text((REPO / "tests" / "fixtures" / "topology" / "pcie-8gpu-pix-phb-sys.txt").read_text())
    nvml = Nvml(StandInNvml(topo))
    assert nvml.handle("00000000:37:00.0", "0") == 3  # the bus id CUDA reports wins
    assert nvml.handle(None, "5") == 5
    assert nvml.handle(None, "GPU-5f1a0d6e-0000-4000-8000-000000000006") == 6  # SLURM and others may list UUIDs
    assert nvml.handle(None, "GPU-unknown") is None


def test_the_tuning_column_keeps_what_tunes_the_exchange_and_not_the_launchers_per_job_plumbing() -> None:
    from hvdbench.core.run_table import RUN_COLUMNS

    tuning = next(c for c in RUN_COLUMNS if c.name == "tuning").render
    assert tuning is not None
    variables = {"OMPI_MCA_pml": "ob1", "OMPI_MCA_btl_tcp_if_include": "eth1", "MPIR_CVAR_CH4_NETMOD": "ucx",
                 "I_MPI_FABRICS": "shm:ofi", "FI_PROVIDER": "tcp", "NCCL_ALGO": "Ring", "HOROVOD_RANK": "1",
                 "OMPI_MCA_orte_hnp_uri": "1.0;tcp://10.0.0.1:4", "OMPI_MCA_ess_base_jobid": "42",
                 "OMPI_MCA_plm_rsh_args": "-p 2222 -i /keys/id", "OMPI_MCA_initial_wdir": "/run", "HOME": "/root",
                 "I_MPI_INFO_BRAND": "Intel(R) Xeon(R)", "I_MPI_PIN_MAPPING": "1:0 0", "I_MPI_HYDRA_TOPOLIB": "ipl2"}
    assert tuning(variables) == ("FI_PROVIDER=tcp; I_MPI_FABRICS=shm:ofi; MPIR_CVAR_CH4_NETMOD=ucx; NCCL_ALGO=Ring; "
                                 "OMPI_MCA_btl_tcp_if_include=eth1; OMPI_MCA_pml=ob1")


def test_nvlink_payload_is_sampled_from_nvml_field_values_where_the_gpu_has_nvlink() -> None:
    from nvml_standin import StandInNvml

    from hvdbench.core.topology import parse_topo_text

    fixtures = REPO / "tests" / "fixtures" / "topology"
    hgx = StandInNvml(parse_topo_text((fixtures / "hgx-a100-nv12-mlx5.txt").read_text()))
    hgx.states[0].nvlink_kib_per_sample = 1000
    nvml = Nvml(hgx)
    first, second = nvml.sample(0), nvml.sample(0)
    assert nvml.nvlink_links(0) == 12
    assert second["nvlink_tx_kib"] - first["nvlink_tx_kib"] == 12 * 1000  # every link's counter, summed
    assert second["nvlink_rx_kib"] == second["nvlink_tx_kib"]
    pcie = Nvml(StandInNvml(parse_topo_text((fixtures / "pcie-8gpu-pix-phb-sys.txt").read_text())))
    assert pcie.sample(0)["nvlink_tx_kib"] is None and pcie.nvlink_links(0) == 0  # no NVLink: null, not 0
    assert Nvml(H100Nvml()).sample("h")["nvlink_tx_kib"] is None  # an NVML without field values: null


def test_nvlink_rate_in_the_run_details_comes_from_the_counters_difference() -> None:
    import pandas as pd

    from hvdbench.analysis.tables.details import _counter_rate

    samples = pd.DataFrame({"rank": [0, 0, 0, 1, 1], "t_s": [0.0, 1.0, 2.0, 0.0, 4.0],
                            "nvlink_tx_kib": [0.0, 1e6, 2e6, 5.0, 5.0 + 4e6], "nvlink_rx_kib": [0.0, 1e6, 2e6, 0, 0]})
    assert _counter_rate(samples, ("nvlink_tx_kib", "nvlink_rx_kib"), 1024 / 1e9) == pytest.approx(
        (4e6 * 1024 / 1e9 / 2 + 4e6 * 1024 / 1e9 / 4) / 2)
    assert np.isnan(_counter_rate(samples.iloc[:1], ("nvlink_tx_kib", "nvlink_rx_kib"), 1.0))


@pytest.mark.parametrize("code, text", [(22809, "2.28.9"), (21805, "2.18.5"), (2708, "2.7.8"), (0, None),
                                        (None, None)])
def test_horovods_own_nccl_version_is_read_from_its_version_code(code: int | None, text: str | None) -> None:
    from hvdbench.suite.harness import nccl_version_text

    assert nccl_version_text(code) == text


@pytest.mark.slow  # a fresh interpreter per case: PyTorch's TF32 switches are process-wide
@pytest.mark.parametrize("before, matmul, conv", [
    ("", False, True),  # PyTorch's defaults: TF32 convolutions, IEEE matrix products
    ("torch.backends.cuda.matmul.fp32_precision = 'tf32'", True, True),  # the new API: the legacy getter raises
    ("torch.backends.cuda.matmul.allow_tf32 = True; torch.backends.cudnn.allow_tf32 = False", True, False),
])
def test_tf32_settings_are_read_without_raising_whichever_api_set_them(before: str, matmul: bool, conv: bool) -> None:
    code = (f"import json, torch; {before}\nfrom hvdbench.suite.pytorch import tf32_settings\n"
            "print(json.dumps(tf32_settings()))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-1500:]
    found = __import__("json").loads(proc.stdout.splitlines()[-1])
    assert (found["tf32_matmul"], found["tf32_convolution"]) == (matmul, conv)
