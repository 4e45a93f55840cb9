"""Where a rank sends NCCL's INFO output (NCCL_DEBUG, NCCL_DEBUG_SUBSYS, NCCL_DEBUG_FILE), so its log can say which
network NCCL used (readers/nccl_log.py reads it). The rank's side: framework-free, the core's."""

from __future__ import annotations

from pathlib import Path
from typing import Mapping


def info_variables(environ: Mapping[str, str], path: Path) -> dict[str, str]:
    """The variables that send this process's NCCL INFO output for INIT and NET (where the channels, the
    network and the plugin are named) to ``path``: none where the user chose where NCCL logs or a level below
    INFO, or where the path holds a % (NCCL would read it as %h or %p)."""
    level = environ.get("NCCL_DEBUG", "INFO").upper()
    if "NCCL_DEBUG_FILE" in environ or level not in ("INFO", "TRACE") or "%" in str(path):
        return {}
    chosen = {"NCCL_DEBUG_FILE": str(path)}
    if "NCCL_DEBUG" not in environ:
        chosen["NCCL_DEBUG"] = "INFO"
    if "NCCL_DEBUG_SUBSYS" not in environ:
        chosen["NCCL_DEBUG_SUBSYS"] = "INIT,NET"
    return chosen
