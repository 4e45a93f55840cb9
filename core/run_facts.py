"""What one run's row of the run table is made of (``RunFacts``: its spec, its ranks' records, what the collector
judged) and the derivations the run table's columns read from them: the model, the device, TF32, the tuning
variables, the MPI, the node's power source and fabric software, whether the ranks' parameters agree. Framework-free;
core/run_table.py declares the columns."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable

from .axes import read_axes
from .hca import named_down
from .spec import RunSpec
from .time_to_train import counts_as_run


def is_number(value: Any) -> bool:
    """A number that is not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass
class RunFacts:
    """What one run's row is made of: its spec, each rank's first record of each kind, and what the collector
    judged (JUDGED: where the run was found, how it ended, its rank logs, attempts and times)."""

    spec: RunSpec
    records: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    judged: dict[str, Any] = field(default_factory=dict)

    def first(self, kind: str) -> dict[str, Any]:
        """The lowest rank's first record of ``kind`` (rank 0's, where it wrote one); empty where none did."""
        by_rank = self.records.get(kind) or {}
        return by_rank[min(by_rank)] if by_rank else {}

    @cached_property
    def env(self) -> dict[str, Any]:
        return self.first("env")

    @cached_property
    def variables(self) -> dict[str, Any]:
        found = self.env.get("variables")
        return found if isinstance(found, dict) else {}

    @cached_property
    def axes(self) -> dict[str, Any]:
        """Every swept axis's value: from the recorded flags, else from the arguments."""
        flags = self.env.get("flags")
        return read_axes(flags if isinstance(flags, dict) else None, self.spec.args, self.spec.framework,
                         self.spec.benchmark)


def params_agree(facts: RunFacts) -> bool | None:
    """Whether every rank's parameter sum after training is the same, for a run whose ranks exchange gradients;
    None for independent ranks, one rank, or a rank without a sum."""
    if "--independent" in facts.spec.args or facts.spec.np < 2:
        return None
    given: list[Any] = [summary.get("param_checksum") for summary in (facts.records.get("summary") or {}).values()]
    sums = [float(s) for s in given if is_number(s) and math.isfinite(s)]
    if len(sums) < facts.spec.np or len(sums) < len(given):
        return None
    return all(s == sums[0] for s in sums)



def hca_named_down(facts: RunFacts) -> str | None:
    """What rank 0's NCCL_IB_HCA names that its node's ports say is down (core/hca.named_down)."""
    variables, fabric = facts.env.get("variables"), facts.env.get("node_fabric")
    hca = variables.get("NCCL_IB_HCA") if isinstance(variables, dict) else None
    ports = fabric.get("hca_ports") if isinstance(fabric, dict) else None
    if not isinstance(hca, str) or not isinstance(ports, list):
        return None
    return "; ".join(named_down(hca, [p for p in ports if isinstance(p, dict)])) or None



def power_source(power: Any) -> str | None:
    """Where rank 0's node read its own power from: ``RAPL package-0, dram; BMC ipmitool dcmi power reading``, or
    ``none (...)`` with the reasons; null where the run recorded nothing of it."""
    if not isinstance(power, dict):
        return None
    parts = []
    if isinstance(power.get("rapl"), list) and power["rapl"]:
        parts.append("RAPL " + ", ".join(map(str, power["rapl"])))
    if isinstance(power.get("bmc"), str):
        parts.append("BMC " + power["bmc"])
    reasons = [str(power[key]) for key in ("reason", "bmc_reason") if isinstance(power.get(key), str)]
    return "; ".join(parts) if parts else f"none ({'; '.join(reasons)})" if reasons else "none"



def fabric_software(fabric: Any) -> str | None:
    """``OFED MLNX_OFED_LINUX-24.10; UCX 1.17.0; HPC-X hpcx-v2.21; modules cuda/12.8:nccl/2.26`` of a node_fabric."""
    if not isinstance(fabric, dict):
        return None
    parts = [f"{name} {fabric[key]}" for name, key in (("OFED", "ofed"), ("UCX", "ucx"), ("HPC-X", "hpcx"))
             if isinstance(fabric.get(key), str)]
    modules = fabric.get("modules")
    if isinstance(modules, list) and modules:
        parts.append("modules " + ":".join(map(str, modules)))
    return "; ".join(parts) or None



def model_of(facts: RunFacts) -> str:
    """The model: what the run recorded, else its --model as its benchmark's parser reads it (an imported run's
    arguments: their ``--model`` word)."""
    named = facts.env.get("model") or facts.spec.flags.get("model")
    if named:
        return str(named)
    found = None
    for i, arg in enumerate(facts.spec.args):
        if arg == "--model" and i + 1 < len(facts.spec.args):
            found = facts.spec.args[i + 1]
        elif arg.startswith("--model="):
            found = arg.split("=", 1)[1]
    return found or ""


def device_name(facts: RunFacts) -> Any:
    """The device that did the work: the GPU's NVML name, or on a CPU run the CPU's model name."""
    env = facts.env
    gpu, device = env.get("gpu") or {}, env.get("device") or {}
    if not isinstance(gpu, dict) or not isinstance(device, dict):
        return None
    on_gpu = device.get("type") in ("cuda", "GPU", "gpu") or bool(gpu)
    return (gpu.get("name") or device.get("name")) if on_gpu else env.get("cpu_model")



def tf32_of(facts: RunFacts) -> bool | None:
    """Whether fp32 products could run as TF32: allowed (env.math, and NVIDIA_TF32_OVERRIDE not 0) on a GPU of
    compute capability 8.0 or newer, which has TF32 tensor cores; None where the run did not record it (a CPU
    run, an older log)."""
    math_, device = facts.env.get("math"), facts.env.get("device") or {}
    if not isinstance(math_, dict) or not isinstance(device, dict):
        return None
    try:
        major = int(str(device.get("capability", "")).split(".")[0])
    except ValueError:
        return None
    allowed = bool(math_.get("tf32_matmul") or math_.get("tf32_convolution"))
    return allowed and facts.variables.get("NVIDIA_TF32_OVERRIDE") != "0" and major >= 8



def forward_share(facts: RunFacts) -> float | None:
    total, forward = facts.env.get("flops_per_sample"), facts.env.get("flops_forward_per_sample")
    if not (is_number(total) and is_number(forward)):
        return None
    total_f, forward_f = float(total), float(forward)  # type: ignore[arg-type]
    return forward_f / total_f if total_f > 0 and forward_f > 0 else None



def variable_number(name: str, per: float = 1.0) -> Callable[[RunFacts], float | None]:
    """A recorded variable as a number, divided by ``per`` (None where it is not one)."""
    def read(facts: RunFacts) -> float | None:
        try:
            return float(facts.variables.get(name)) / per  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None
    return read



def tuning_text(variables: Any) -> str | None:
    """The variables that tune the exchange, as KEY=VALUE; KEY=VALUE ... (Horovod's, NCCL's, UCX's, Open
    MPI's, MPICH's, Intel MPI's and libfabric's)."""
    if not isinstance(variables, dict):
        return None
    picked = sorted(f"{k}={v}" for k, v in variables.items()
                    if str(k).startswith(("HOROVOD_", "NCCL_", "UCX_", "OMPI_MCA_", "MPIR_CVAR_", "I_MPI_", "FI_"))
                    and not PLUMBING.match(str(k)))
    return "; ".join(picked)



def mpi_text(mpi: Any) -> str | None:
    """The MPI a rank ran on, in words: the library it loaded where recorded (implementation, version, MPICH's
    device), else what mpirun on PATH said."""
    if not isinstance(mpi, dict):
        return None
    found = mpi.get("loaded")
    loaded: dict[str, Any] = found if isinstance(found, dict) else {}
    source: dict[str, Any] = loaded if loaded.get("implementation") else mpi
    words = [source.get("implementation"), source.get("version"), loaded.get("device")]
    return " ".join(str(x) for x in words if x) or None


# what a launcher sets for each process (its place in the job, where to meet, its session folders and ssh
# arguments, Intel MPI's hydra's description of the node and its pinning): no tuning, and it differs run to run
PLUMBING = re.compile(r"HOROVOD_(HOSTNAME|RANK|SIZE|LOCAL_RANK|LOCAL_SIZE|CROSS_RANK|CROSS_SIZE|GLOO_RENDEZVOUS_\w+|"
                       r"GLOO_IFACE)$|OMPI_MCA_(orte_\w+|ess\w*|pmix|initial_wdir|shmem_RUNTIME_QUERY_hint|"
                       r"plm_rsh_args)$|MPIR_CVAR_CH3_INTERFACE_HOSTNAME$|"
                       r"I_MPI_(INFO_\w+|PIN_INFO|PIN_MAPPING|HYDRA_TOPOLIB|BIND_WIN_ALLOCATE|INTERNAL_MEM_POLICY|"
                       r"RETURN_WIN_MEM_NUMA)$")


def _quality(facts: RunFacts) -> dict[str, Any]:
    """The run's summary ``quality`` (its lowest rank's), {} where it wrote none."""
    found = facts.first("summary").get("quality")
    return found if isinstance(found, dict) else {}


def target_asked(facts: RunFacts) -> tuple[str, float] | None:
    """The metric and target a run to a quality target recorded, else what its flags asked (a run that wrote no
    summary: killed, failed, lost with its node); None for a run to no target."""
    quality = _quality(facts)
    if is_number(quality.get("target")):
        return str(quality.get("metric") or ""), float(quality["target"])
    flags = facts.spec.flags
    for metric in ("accuracy", "loss"):
        if is_number(flags.get(f"target_{metric}")):
            return metric, float(flags[f"target_{metric}"])
    return None


def converged_of(facts: RunFacts) -> bool | None:
    """Whether a run to a quality target reached it (core/time_to_train.py): as its summary says, and no where it
    ended without one (a timeout, a failure, a lost node); None for runs to no target and runs still under way."""
    said = _quality(facts).get("converged")
    if isinstance(said, bool):
        return said
    return False if target_asked(facts) is not None and counts_as_run(facts.judged.get("status")) else None


def not_converged_why(facts: RunFacts) -> str | None:
    """Why a run to a quality target did not converge: its record's rule, the cap it reached, or how it ended."""
    if converged_of(facts) is not False:
        return None
    quality = _quality(facts)
    if isinstance(quality.get("why"), str):
        return quality["why"]
    if quality:
        cap = quality.get("max_epochs")
        return f"the epoch cap ({cap:g} epochs) came first" if is_number(cap) else "it ended before its target"
    return str(facts.judged.get("reason") or facts.judged.get("status") or "it ended before its target")
