"""What a result depends on besides the code: hosts, devices, versions and the relevant variables."""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, MutableMapping

from .containers import container_facts
from .hca import node_fabric
from .job_env import RECORDED, job_env

_ENV_PATTERNS = re.compile(
    r"^(HOROVOD_|NCCL_|OMPI_COMM_WORLD_|OMPI_MCA_|PMIX_RANK$|PMI_RANK$|PMI_SIZE$|CUDA_VISIBLE_DEVICES$|"
    r"CUDA_DEVICE_ORDER$|CUDA_LAUNCH_BLOCKING$|CUBLAS_WORKSPACE_CONFIG$|NVIDIA_TF32_OVERRIDE$|TF_CUDNN_USE_AUTOTUNE$|"
    r"OMP_NUM_THREADS$|UCX_|MPIR_CVAR_|I_MPI_|FI_PROVIDER$|FI_TCP_IFACE$|HYDRA_)"
)


def gloo_on_loopback(environ: MutableMapping[str, str] | None = None) -> bool:
    """Before Horovod starts: a process that is the whole job (started directly, or one rank of any launcher)
    gets HOROVOD_GLOO_IFACE=lo where it is unset, as horovodrun gives its local ranks. Without it Gloo finds
    its address by looking up the host's name, which fails on a node without DNS. True where it was set."""
    environ = os.environ if environ is None else environ
    job = job_env(environ)
    sizes = [size for size in (job.get("world_size"), job.get("step_tasks")) if size]
    if "HOROVOD_GLOO_IFACE" in environ or any(size != "1" for size in sizes):
        return False
    environ["HOROVOD_GLOO_IFACE"] = "lo"
    return True


def relevant_variables(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The HOROVOD_*, NCCL_*, MPI rank, SLURM job and CUDA variables of this process, sorted (not where NCCL
    writes its log: a path of each rank's own, no setting to compare)."""
    environ = os.environ if environ is None else environ
    return {k: environ[k] for k in sorted(environ)
            if (_ENV_PATTERNS.match(k) or RECORDED.match(k)) and k != "NCCL_DEBUG_FILE"}


def cpu_model() -> str:
    """The CPU's model name as the kernel reports it, or the platform's processor string."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


@lru_cache(maxsize=1)
def mpirun_version_output() -> str | None:
    """What ``mpirun --version`` prints for the MPI on PATH (asked once), or None where there is none."""
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        return None
    try:
        return subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None


_MPI_PATTERNS = (
    ("Open MPI", re.compile(r"\(Open MPI\)\s*(\S+)")),
    ("Intel MPI", re.compile(r"Intel\(R\) MPI Library.*?Version\s+(\S+)")),
    ("MPICH", re.compile(r"HYDRA build details:.*?Version:\s*(\S+)", re.S)),
)


def parse_mpi_version(output: str | None) -> dict[str, str | None]:
    """``mpirun --version`` output as its first line, the implementation and its version."""
    lines = [line.strip() for line in (output or "").splitlines() if line.strip()]
    for name, pattern in _MPI_PATTERNS:
        match = pattern.search(output or "")
        if match:
            return {"mpirun": lines[0], "implementation": name, "version": match.group(1).rstrip(",")}
    return {"mpirun": lines[0] if lines else None, "implementation": None, "version": None}


def mpi_info() -> dict[str, str | None]:
    """The MPI on PATH: implementation and version."""
    return parse_mpi_version(mpirun_version_output())


_LOADED_MPI = re.compile(r"(/\S*/lib(?:mpi|mpich)\.so(?:\.\d+)*)\s*$", re.M)
_LIBRARY_PATTERNS = (
    ("Open MPI", re.compile(r"Open MPI v(\S+?),")),
    ("Intel MPI", re.compile(r"Intel\(R\) MPI Library (\S+)")),
    ("MPICH", re.compile(r"MPICH Version:\s*(\S+)")),
)


def parse_library_version(text: str, library: str | None = None) -> dict[str, Any]:
    """What ``MPI_Get_library_version`` says, as the implementation, its version and (MPICH's) device."""
    found: dict[str, Any] = {"library": library, "implementation": None, "version": None,
                             "text": text.strip().splitlines()[0][:200] if text.strip() else None}
    for name, pattern in _LIBRARY_PATTERNS:
        match = pattern.search(text)
        if match:
            found.update(implementation=name, version=match.group(1))
            break
    device = re.search(r"MPICH Device:\s*(\S+)", text)
    if device:
        found["device"] = device.group(1)
    return found


def loaded_mpi(maps: str | None = None) -> dict[str, Any] | None:
    """The MPI library this process has loaded (Horovod's MPI controller or mpi4py), as its own
    ``MPI_Get_library_version`` tells (callable before MPI starts): which MPI the rank ran on, whatever
    mpirun on PATH is. None where no MPI library is loaded (Gloo) or the system cannot say."""
    if maps is None:
        try:
            maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    match = _LOADED_MPI.search(maps)
    if match is None:
        return None
    import ctypes

    try:
        lib = ctypes.CDLL(match.group(1))
        text, length = ctypes.create_string_buffer(8192), ctypes.c_int(0)  # MPICH's MPI_MAX_LIBRARY_VERSION_STRING
        lib.MPI_Get_library_version(text, ctypes.byref(length))
        return parse_library_version(text.value.decode(errors="replace"), match.group(1))
    except (OSError, AttributeError):
        return {"library": match.group(1), "implementation": None, "version": None, "text": None}


_MCA_COMPONENT = re.compile(r"mca_(pml|btl|mtl|osc)_(\w+)\.so")


def mpi_components(maps: str | None = None) -> dict[str, list[str]] | None:
    """The Open MPI transport components loaded in this process (read from /proc/self/maps after MPI
    started: Open MPI unloads the components it did not select), e.g. ``{"pml": ["ucx"], "btl": [...]}``;
    None where no MPI runs in this process (Gloo) or the system cannot say."""
    if maps is None:
        try:
            maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
    found: dict[str, set[str]] = {}
    for match in _MCA_COMPONENT.finditer(maps):
        found.setdefault(match.group(1), set()).add(match.group(2))
    return {kind: sorted(names) for kind, names in sorted(found.items())} or None


@lru_cache(maxsize=1)
def hvdbench_version() -> str:
    """This hvdbench's version as installed, with the commit where it runs from a git checkout (``0.1.0+g1a2b3c4d5e``):
    what a verdict's runs were measured with."""
    try:
        from importlib.metadata import PackageNotFoundError, version
        release = version("hvdbench")
    except (ImportError, PackageNotFoundError):
        release = "unknown"
    for folder in Path(__file__).resolve().parents:
        head = folder / ".git" / "HEAD"
        if head.is_file():
            try:
                ref = head.read_text(encoding="utf-8", errors="replace").strip()
                if ref.startswith("ref: "):
                    target = folder / ".git" / ref[5:]
                    ref = target.read_text(encoding="ascii", errors="replace").strip() if target.is_file() else ""
            except OSError:
                break
            return f"{release}+g{ref[:10]}" if re.fullmatch(r"[0-9a-f]{40}", ref) else release
    return release


def base_environment() -> dict[str, Any]:
    """Host, CPU, OS, Python, MPI and the relevant variables; no framework needed."""
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "os": platform.platform(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "python": sys.version.split()[0],
        "hvdbench_version": hvdbench_version(),
        "mpi": {**mpi_info(), "loaded": loaded_mpi()},
        "mpi_components": mpi_components(),
        "variables": relevant_variables(),
        "container": container_facts(),
        # the node's HCA tools asked once per node (local rank 0), not by each of its ranks at start-up
        "node_fabric": node_fabric() if (job_env().number("local_rank") or 0) == 0 else None,
    }
