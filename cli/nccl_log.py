"""``hvdbench nccl-log FILE...``: what each NCCL log says NCCL used."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hvdbench.core.validate import inert


def cmd_nccl_log(args: argparse.Namespace) -> int:
    """Print what each NCCL log says NCCL used, run by run where a log holds several; 2 where a file cannot be
    read (the others still printed)."""
    from hvdbench.readers.nccl_log import Fabric, fabric_lines, read_nccl_runs

    found: dict[str, object] = {}
    status = 0
    for path in args.files:
        try:
            runs = read_nccl_runs(path)
        except ValueError as exc:
            print(f"hvdbench: error: {inert(exc)}", file=sys.stderr)
            status = 2
            continue
        if all(run == Fabric() for run in runs):  # no line of it said anything of NCCL's
            print(f"hvdbench: error: {inert(path)}: not an NCCL log: no line of it is NCCL's INFO output (run with "
                  "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET)", file=sys.stderr)
            status = 2
            continue
        if args.json:
            found[str(path)] = runs[0].as_dict() if len(runs) == 1 else [run.as_dict() for run in runs]
            continue
        print(f"{inert(path)}:" + (f" {len(runs)} runs (NCCL started {len(runs)} times), each read on its own"
                                    if len(runs) > 1 else ""))
        for i, fabric in enumerate(runs, 1):
            if len(runs) > 1:
                print(f"  run {i} of {len(runs)}:")
            for line in fabric_lines(fabric):
                print(f"{'    ' if len(runs) > 1 else '  '}{inert(line)}")
    if args.json:
        print(json.dumps(found, indent=2))
    return status


def declare(sub: Any) -> None:
    """hvdbench nccl-log: the network NCCL used, from its INFO output."""
    nccl = sub.add_parser(
        "nccl-log", help="say which network and transports NCCL used, from NCCL_DEBUG=INFO output",
        description="Read NCCL_DEBUG=INFO output (NCCL_DEBUG_SUBSYS=INIT,NET at least; a launcher's prefixes are "
                    "fine) and print per file the NCCL version, the network it moved data over (IB, RoCE, Socket "
                    "or a plugin's network), the plugin, GPUDirect RDMA, the NICs, the transports within a node, "
                    "the node count where the log shows it, and warnings (sockets beside an RDMA device, no "
                    "GPUDirect RDMA). What the log shows NCCL did, not what the environment asked for.")
    nccl.set_defaults(func=cmd_nccl_log)
    nccl.add_argument("files", nargs="+", type=Path, help="NCCL log files")
    nccl.add_argument("--json", action="store_true", help="print JSON by file name: one object per file, a list of "
                                                         "them (run by run) where a log holds several runs")
