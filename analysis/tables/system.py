"""The system under test, as its runs recorded it (in the spirit of MLPerf's system descriptions): per system label,
its hosts, devices, driver and libraries, MPI, CPUs, the network NCCL used and the node's RDMA ports, the image,
and when the runs were made. Nothing here is typed in by hand: a fact no run recorded reads "-"."""

from __future__ import annotations

import pandas as pd

from hvdbench.core.validate import inert

from ..collect import Collection

# (fact, run-table column): each a column of the runs table, every distinct value of a system's complete runs
FACTS = (("devices", "device_name"), ("driver", "driver"), ("CUDA", "cuda"), ("NCCL", "nccl"),
         ("NCCL Horovod was built with", "horovod_nccl"), ("cuDNN", "cudnn"), ("PyTorch", "torch"),
         ("TensorFlow", "tensorflow"), ("Horovod", "horovod_version"), ("MPI", "mpi"), ("CPU", "cpu_model"),
         ("CPUs per host", "cpu_count"), ("network NCCL used", "nccl_network"), ("RDMA ports", "rdma_ports"),
         ("fabric software", "fabric_software"), ("image", "container_image"),
         ("container runtime", "container_runtime"), ("exchange tuning", "tuning"))


def _values(column: pd.Series, most: int = 6) -> str:
    found = sorted({inert(str(v)) for v in column.dropna() if str(v)})
    if not found:
        return "-"
    return ", ".join(found[:most]) + (f" (+{len(found) - most} more)" if len(found) > most else "")


def system_table(collection: Collection) -> pd.DataFrame:
    """One row per fact, one column per system (the fact's distinct values over that system's complete runs)."""
    runs = collection.runs[collection.runs["status"] == "ok"]
    env = collection.env
    systems = sorted(set(runs["system"].dropna()))
    rows: dict[str, dict[str, str]] = {}
    for system in systems:
        mine = runs[runs["system"] == system]
        hosts = env[env["run_id"].isin(mine["run_id"])]["host"]
        started = mine["started"].dropna()
        when = (f"{pd.Timestamp(started.min(), unit='s'):%Y-%m-%d %H:%M} to "
                f"{pd.Timestamp(started.max(), unit='s'):%Y-%m-%d %H:%M} UTC" if len(started) else "-")
        column = {"hosts": f"{hosts.nunique()}: {_values(hosts)}" if hosts.notna().any() else "-",
                  **{fact: _values(mine[name]) if name in mine else "-" for fact, name in FACTS},
                  "runs": f"{len(mine)} complete, made {when}"}
        for fact, value in column.items():
            rows.setdefault(fact, {})[system] = value
    named = {system: inert(system) for system in systems}  # a system label is text from a file: inert everywhere
    return pd.DataFrame([{"fact": fact, **{named[s]: v for s, v in values.items()}} for fact, values in rows.items()],
                        columns=["fact", *named.values()]).astype("string")


def system_json(table: pd.DataFrame) -> dict[str, dict[str, str]]:
    """The table as ``{system: {fact: value}}`` (system.json beside the report)."""
    return {system: dict(zip(table["fact"], table[system])) for system in table.columns if system != "fact"}
