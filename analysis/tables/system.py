"""The system under test, as its runs recorded it (in the spirit of MLPerf's system descriptions): per system label,
its hosts, devices, driver and libraries, MPI, CPUs, the network NCCL used and the node's RDMA ports, the image,
and when the runs were made. Nothing here is typed in by hand: a fact no run recorded reads "-"."""

from __future__ import annotations

import pandas as pd

from hvdbench.core.validate import inert

from ..collect import Collection
from ..formatting import Rows, dash, missing

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


def _taken_in_hosts(runs: pd.DataFrame) -> pd.Series:
    """The nodes runs taken in ran on (nccl-tests between a pair names both; its record's host is the first only)."""
    listed = runs["imported_hosts"].dropna() if "imported_hosts" in runs else pd.Series([], dtype="string")
    return pd.Series([h for text in listed for h in str(text).split(",") if h], dtype="string")


def system_table(collection: Collection) -> pd.DataFrame:
    """One row per fact, one column per system (the fact's distinct values over that system's complete runs)."""
    runs = collection.runs[collection.runs["status"] == "ok"]
    env = collection.env
    systems = sorted(set(runs["system"].dropna()))
    rows: dict[str, dict[str, str]] = {}
    for system in systems:
        mine = runs[runs["system"] == system]
        hosts = pd.concat([env[env["run_id"].isin(mine["run_id"])]["host"], _taken_in_hosts(mine)])
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


SYSTEM_TEXT = ("Each system as its complete runs recorded it (also system.json beside this report): every distinct "
               "value, so a fleet that is not uniform shows it; '-' where no run recorded the fact.")


FABRIC_TEXT = ("What each GPU run's NCCL said it used (its INFO output for INIT and NET, kept per rank in "
               "nccl-rank-N.log beside the run): the network that moved data between nodes, the plugin, GPUDirect "
               "RDMA, the NICs and the transports within a node. A run across nodes over TCP sockets on a cluster "
               "with InfiniBand or RoCE measures the fallback, not the fabric.")


def fabric_alerts(runs: pd.DataFrame, most: int = 3) -> list[str]:
    """Executive-summary lines for the runs whose NCCL logs warn (sockets beside RDMA, no GPUDirect RDMA)."""
    warned = runs[(runs["status"] == "ok") & runs["fabric_warnings"].notna()]
    lines = [f"Fabric warning: {r.run_id} ({r.nodes} node(s)): {str(r.fabric_warnings).split('; ')[0]} "
             "(see The network NCCL used)." for r in warned.head(most).itertuples()]
    if len(warned) > most:
        lines.append(f"Fabric warnings on {len(warned) - most} more run(s) (see The network NCCL used).")
    down = runs[runs["hca_named_down"].notna()] if "hca_named_down" in runs else runs.iloc[:0]
    lines += [f"Fabric warning: {r.run_id}: {str(r.hca_named_down).split('; ')[0]} on its first node: its traffic "
              "went another way, or nowhere (hvdbench fabric checks the ports)." for r in down.head(most).itertuples()]
    if len(down) > most:
        lines.append(f"NCCL_IB_HCA names a port not active in {len(down) - most} more run(s) (hca_named_down).")
    return lines


def params_alerts(runs: pd.DataFrame, most: int = 3) -> list[str]:
    """Executive-summary lines for exchanging runs whose ranks ended with different parameters: their gradients
    were not exchanged as said, so their throughput is not that of data-parallel training."""
    split = runs[(runs["status"] == "ok") & (runs["params_agree"] == False)]  # noqa: E712 - a nullable column
    lines = [f"Parameters differ across ranks after training: {r.run_id} (exchange {r.exchange}): its gradients "
             "were not exchanged as said; its throughput is not that of data-parallel training."
             for r in split.head(most).itertuples()]
    if len(split) > most:
        lines.append(f"Parameters differ across ranks in {len(split) - most} more run(s) (see the runs' details).")
    return lines


def fabric_rows(runs: pd.DataFrame) -> Rows:
    """The runs whose NCCL logs say which network NCCL used."""
    said = runs[runs["nccl_network"].notna() | runs["nccl_transports"].notna()]
    return (["run", "nodes", "GPUs", "network", "plugin", "GPUDirect RDMA", "NICs", "within a node", "warnings"],
            [[r.run_id, str(r.nodes), str(r.np), *(dash(v) for v in (r.nccl_network, r.nccl_plugin)),
              "-" if missing(r.nccl_gdr) else "yes" if r.nccl_gdr else "no",
              *(dash(v) for v in (r.nccl_nics, r.nccl_transports, r.fabric_warnings))] for r in said.itertuples()])
