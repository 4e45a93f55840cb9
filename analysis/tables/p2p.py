"""Peer-to-peer and host bandwidth from suite/p2p.py's records: GB/s from bytes over the median iteration,
a GPU x GPU matrix beside each pair's link class, and host-device rates per GPU."""

from __future__ import annotations

import pandas as pd

from ..collect import Collection

Rows = tuple[list[str], list[list[str]]]
P2P_TABLE_SCHEMA: dict[str, str] = {
    "run_id": "string", "system": "string", "host": "string", "src": "string", "dst": "string", "mode": "string",
    "bytes": "int64", "link": "string", "peer_access": "boolean", "iterations": "int64", "median_s": "float64",
    "gbs": "float64",
}


def bandwidth_gbs(nbytes: float, seconds: float) -> float:
    """GB/s (10^9 bytes per second) of nbytes moved in seconds."""
    return nbytes / seconds / 1e9


def p2p_table(collection: Collection) -> pd.DataFrame:
    """One row per complete run and case: the median iteration and its bandwidth (a run left out, a copy among them,
    counts for nothing)."""
    ok = set(collection.runs.loc[collection.runs["status"] == "ok", "run_id"])
    p2p = collection.p2p[collection.p2p["run_id"].isin(ok)]
    if p2p.empty:
        return pd.DataFrame(columns=list(P2P_TABLE_SCHEMA)).astype(P2P_TABLE_SCHEMA)
    keys = ["run_id", "src", "dst", "mode", "bytes"]
    grouped = p2p.groupby(keys, sort=False, dropna=False)
    out = grouped.agg(link=("link", "first"), peer_access=("peer_access", "first"), iterations=("time", "size"),
                      median_s=("time", "median")).reset_index()
    out["gbs"] = [bandwidth_gbs(b, s) for b, s in zip(out["bytes"], out["median_s"])]
    runs = collection.runs.set_index("run_id")
    hosts = collection.env.drop_duplicates("run_id").set_index("run_id")["host"]
    out["system"] = [runs.loc[r, "system"] for r in out["run_id"]]
    out["host"] = [hosts.get(r) for r in out["run_id"]]
    return out[list(P2P_TABLE_SCHEMA)].astype(P2P_TABLE_SCHEMA)


def _gpus(cases: pd.DataFrame) -> list[str]:
    ids = {x for x in pd.concat([cases["src"], cases["dst"]]) if x != "host"}
    return sorted(ids, key=int)


def matrix_rows(cases: pd.DataFrame, mode: str) -> Rows:
    """GPU x GPU: ``link · GB/s`` of copies from the row's GPU to the column's (``bi``: both at once)."""
    gpus = _gpus(cases)
    pairs = cases[(cases["mode"] == mode) & (cases["src"] != "host") & (cases["dst"] != "host")]
    cell = {(r.src, r.dst): f"{r.link + ' · ' if isinstance(r.link, str) else ''}{r.gbs:,.1f}"
            for r in pairs.itertuples()}
    if mode == "bi":
        cell |= {(dst, src): text for (src, dst), text in cell.items()}
    return (["from ↓ to →"] + [f"GPU{g}" for g in gpus],
            [[f"GPU{a}"] + ["X" if a == b else cell.get((a, b), "-") for b in gpus] for a in gpus])


def host_rows(cases: pd.DataFrame) -> Rows:
    """Per GPU: host-to-device and device-to-host GB/s (pinned memory)."""
    gpus = _gpus(cases)
    rate = {(r.src, r.dst): r.gbs for r in cases.itertuples()}
    return (["GPU", "host → GPU (GB/s)", "GPU → host (GB/s)"],
            [[f"GPU{g}", f"{rate.get(('host', g), float('nan')):,.1f}", f"{rate.get((g, 'host'), float('nan')):,.1f}"]
             for g in gpus])


P2P_TEXT = ("Device-to-device copies from the row's GPU to the column's: the pair's link class (from the "
            "node's topology) and GB/s (10^9 bytes over the median of the timed copies, each bounded by device "
            "syncs). A PIX pair at PCIe rates or an NV# pair at NVLink rates shows here.")
