"""The environment variables a sweep sets on its runs (axes.env), checked before anything runs: a name that no
Horovod, NCCL or Open MPI release reads is a typo that would be ignored silently, and a value Horovod reads as a
number or a switch must be one. Each check returns its reason (None: it passes), for the sweep reader."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

from hvdbench.core.options import OptionError, Text
from hvdbench.core.validate import number_problem

# Horovod's run-time knobs (horovod/common/common.h, 0.28); a HOROVOD_* name outside this list is a typo.
HOROVOD_KNOBS = frozenset("""
HOROVOD_FUSION_THRESHOLD HOROVOD_CYCLE_TIME HOROVOD_CACHE_CAPACITY HOROVOD_HIERARCHICAL_ALLREDUCE
HOROVOD_HIERARCHICAL_ALLGATHER HOROVOD_TIMELINE HOROVOD_TIMELINE_MARK_CYCLES HOROVOD_AUTOTUNE
HOROVOD_AUTOTUNE_LOG HOROVOD_AUTOTUNE_WARMUP_SAMPLES HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE
HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE HOROVOD_STALL_CHECK_DISABLE
HOROVOD_STALL_CHECK_TIME_SECONDS HOROVOD_STALL_SHUTDOWN_TIME_SECONDS HOROVOD_MPI_THREADS_DISABLE
HOROVOD_NUM_NCCL_STREAMS HOROVOD_DISABLE_GROUP_FUSION HOROVOD_ELASTIC HOROVOD_LOG_LEVEL HOROVOD_LOG_HIDE_TIME
HOROVOD_CPU_OPERATIONS HOROVOD_CONTROLLER HOROVOD_GLOO_IFACE HOROVOD_GLOO_TIMEOUT_SECONDS
HOROVOD_ADASUM_MPI_CHUNK_SIZE HOROVOD_BATCH_D2D_MEMCOPIES HOROVOD_ENABLE_ASYNC_COMPLETION
HOROVOD_THREAD_AFFINITY HOROVOD_NCCL_ENABLE_ASYNC_COMPLETION HOROVOD_GPU_OPERATIONS
""".split())
# NCCL's own variables (nccl-variables.txt, from NCCL's source), and the prefixes and names its plugins and PyTorch
# read: HPC-X's RDMA/SHARP plugin, aws-ofi-nccl, Google's FasTrak/TCPX plugins, PyTorch's process group
NCCL_VARIABLES = frozenset(word for line in (Path(__file__).parent / "nccl-variables.txt").read_text().splitlines()
                           if not line.startswith("#") for word in line.split()
                           if re.fullmatch(r"NCCL_[A-Z0-9_]*[A-Z0-9]", word))  # its comments' words are no names
NCCL_PLUGIN_PREFIXES = ("NCCL_IBEXT_", "NCCL_SHARP_", "NCCL_FASTRAK_", "NCCL_GPUDIRECTTCPX_", "NCCL_TCPX_", "NCCL_OFI_")
NCCL_OTHER_NAMES = frozenset(("NCCL_PLUGIN_P2P", "NCCL_ASYNC_ERROR_HANDLING", "NCCL_BLOCKING_WAIT", "NCCL_DESYNC_DEBUG",
                              "NCCL_ENABLE_TIMING"))  # whole names: NCCL_BLOCKING_WAITT is none of them
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
KNOB_PREFIXES = ("HOROVOD_", "NCCL_", "UCX_", "OMPI_", "CUDA_")
MCA_PREFIX = "OMPI_MCA_"  # then an Open MPI parameter's own (lower-case) name: OMPI_MCA_btl_tcp_if_include
# Horovod knobs whose values are numbers or switches, checked before anything runs
NUMERIC_KNOBS = {"HOROVOD_FUSION_THRESHOLD": True, "HOROVOD_CACHE_CAPACITY": True, "HOROVOD_NUM_NCCL_STREAMS": True,
                 "HOROVOD_CYCLE_TIME": False, "HOROVOD_STALL_CHECK_TIME_SECONDS": True,
                 "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS": True, "HOROVOD_GLOO_TIMEOUT_SECONDS": True,
                 "HOROVOD_AUTOTUNE_WARMUP_SAMPLES": True, "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE": True,
                 "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES": True}  # name -> whole numbers only
SWITCH_KNOBS = ("HOROVOD_HIERARCHICAL_ALLREDUCE", "HOROVOD_HIERARCHICAL_ALLGATHER", "HOROVOD_AUTOTUNE",
                "HOROVOD_TIMELINE_MARK_CYCLES", "HOROVOD_STALL_CHECK_DISABLE", "HOROVOD_MPI_THREADS_DISABLE",
                "HOROVOD_DISABLE_GROUP_FUSION", "HOROVOD_ELASTIC", "HOROVOD_ENABLE_ASYNC_COMPLETION",
                "HOROVOD_NCCL_ENABLE_ASYNC_COMPLETION", "HOROVOD_BATCH_D2D_MEMCOPIES", "HOROVOD_LOG_HIDE_TIME")


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a variable Horovod, NCCL, UCX, Open MPI or CUDA reads as spelled, or None."""
    if not ENV_NAME.match(name):
        return f"{name[:60]!r} is not an environment variable name"
    if name.upper() in (*KNOB_PREFIXES, MCA_PREFIX):
        return f"{name} is a prefix alone, no variable: name the whole variable ({name.upper()}...)"
    if name.upper().startswith(MCA_PREFIX):  # Open MPI's parameter names are lower case after the prefix
        right = MCA_PREFIX + name[len(MCA_PREFIX):].lower()
        if name != right:
            return f"{name} is not how Open MPI reads an MCA parameter; did you mean {right}?"
    elif name.upper().startswith(KNOB_PREFIXES) and name != name.upper():
        return f"{name} is not upper case; did you mean {name.upper()}?"
    if name.startswith("HOROVOD_") and name not in HOROVOD_KNOBS:
        hint = difflib.get_close_matches(name, sorted(HOROVOD_KNOBS), n=1)
        return (f"{name} is not a Horovod knob" + (f" (did you mean {hint[0]}?)" if hint else "")
                + "; see Horovod's documentation of HOROVOD_* variables")
    if name.startswith("NCCL_") and name not in NCCL_VARIABLES | NCCL_OTHER_NAMES \
            and not name.startswith(NCCL_PLUGIN_PREFIXES):
        hint = difflib.get_close_matches(name, sorted(NCCL_VARIABLES), n=1)
        return (f"{name} is read by no NCCL release from 2.28 to 2.30 nor a known NCCL plugin"
                + (f" (did you mean {hint[0]}?)" if hint else "") + "; NCCL would ignore it silently")
    return None


class KnobValue(Text):
    """A variable's value: a number where Horovod reads one, a switch where it reads 0/1, else plain text."""

    def __init__(self, name: str) -> None:
        self.name = name

    def read(self, value: Any, base: Path) -> str:
        text, name = super().read(value, base), self.name
        if name in NUMERIC_KNOBS:
            try:
                number = int(text) if NUMERIC_KNOBS[name] else float(text)
            except ValueError:
                number = None
            if number is None or number_problem(number, minimum=0):
                raise OptionError(f"{name} takes a non-negative {'whole ' if NUMERIC_KNOBS[name] else ''}number, "
                                  f"got {text!r}")
        if name in SWITCH_KNOBS and text.lower() not in ("0", "1", "true", "false"):
            raise OptionError(f"{name} takes 0 or 1, got {text!r}")
        return text

