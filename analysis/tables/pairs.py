"""The fabric between nodes as ``hvdbench fabric --nccl-tests`` measured it, judged again from the runs it took in:
each set of nodes' nccl-tests all_reduce busbw at its largest size (the median where a set ran more than once), the
verdict by the fabric command's own rule (core/pair_judging.py), the nodes low with every other and the command to
drain each. The nominal figure (``--expect-busbw``) is the command's alone; here the pairs are judged against one
another."""

from __future__ import annotations

import shlex
import statistics

import pandas as pd

from hvdbench.core.pair_judging import NodeSet, drain_command, drained, judge_sets
from hvdbench.core.validate import inert
from hvdbench.readers.nccl_tests import BACKEND as IMPORTED

from ..formatting import Rows

PAIRS_SCHEMA: dict[str, str] = {"system": "string", "nodes": "string", "sets": "int64", "busbw_gbs": "float64",
                                "verdict": "string"}
PAIRS_TEXT = ("nccl-tests' all_reduce between every pair of nodes and across all of them (hvdbench fabric "
              "--nccl-tests), each set's bus bandwidth at its largest size set against the best any pair reaches: "
              "below 90% of it flagged low, and a node low with every other named, with the command to take it out "
              "of service (hvdbench changes no node's state). Judged against one another: the link's nominal figure "
              "(--expect-busbw) is the fabric command's own.")


def pair_table(comm: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per system and set of nodes that nccl-tests' all_reduce ran across (two nodes or more)."""
    mine = comm[(comm["backend"] == IMPORTED) & (comm["op"] == "allreduce") & (comm["nodes"] >= 2)]
    hosts = runs.set_index("run_id")["imported_hosts"] if "imported_hosts" in runs else pd.Series(dtype="string")
    rows = []
    for system, group in mine.groupby("system", sort=True):
        found: dict[tuple[str, ...], list[float]] = {}
        for run_id, case in group.groupby("run_id", sort=True):
            nodes = tuple(h for h in str(hosts.get(run_id) or "").split(",") if h)
            largest = case[case["bytes"] == case["bytes"].max()]["busbw_gbs"].dropna()
            if len(nodes) >= 2 and len(largest):
                found.setdefault(nodes, []).append(float(largest.max()))
        sets = [NodeSet(nodes, ",".join(nodes), statistics.median(v)) for nodes, v in found.items()]
        for (where, busbw, said), nodes in zip(judge_sets(sets), found):
            rows.append({"system": system, "nodes": where, "sets": len(found[nodes]), "busbw_gbs": busbw,
                         "verdict": said})
    return pd.DataFrame(rows, columns=list(PAIRS_SCHEMA)).astype(PAIRS_SCHEMA)


def pair_rows(table: pd.DataFrame) -> Rows:
    """The table as a report section's header and rows."""
    return (["system", "nodes", "busbw at the largest size (GB/s)", "verdict"],
            [[inert(r.system), inert(r.nodes), f"{r.busbw_gbs:,.2f}" + (f" (median of {r.sets})" if r.sets > 1 else ""),
              inert(r.verdict)] for r in table.itertuples()])


def pair_alerts(table: pd.DataFrame) -> list[str]:
    """The executive summary's lines: each node low with every other, with its drain command, and how many sets
    were flagged."""
    if not len(table):
        return []
    judged = [(r.nodes, r.busbw_gbs, r.verdict) for r in table.itertuples()]
    lines = [f"Fabric: {inert(node)} is low with every other node in nccl-tests (see Fabric between nodes); to take "
             f"it out of service: {inert(shlex.join(drain_command(node)))}" for node in drained(judged)]
    flagged = sum(str(v).startswith("flagged") for v in table["verdict"])
    if flagged and not lines:
        lines.append(f"Fabric: {flagged} of {len(table)} set(s) of nodes flagged in nccl-tests (see Fabric between "
                     "nodes).")
    return lines
