"""``hvdbench fabric``: the node's HCA ports (or saved outputs) before a benchmark, or nccl-tests between nodes."""

from __future__ import annotations

import argparse
import json
import os
import sys
import shlex
from pathlib import Path
from typing import Any, Sequence

from hvdbench.core.containers import container_flags as generated_container_flags
from hvdbench.core.containers import from_flags
from hvdbench.core.errors import UsageError
from hvdbench.core.flags import MOST_BUSBW, MOST_SECONDS, bounded, positive_int
from hvdbench.core.hostlist import hosts_of
from hvdbench.core.pair_judging import drain_command, drained
from hvdbench.core.validate import inert, text_problem


def _fabric_pairs(args: argparse.Namespace) -> int:
    """nccl-tests between every pair of nodes and across all (launchers/fabric_pairs.py): 1 where a set is flagged
    or a step gave no output."""
    from hvdbench.core.job_env import job_env
    from hvdbench.launchers.fabric_pairs import check_pairs, steps
    from hvdbench.launchers.schedulers import allocation_hosts

    for name, value in (("--nccl-tests-flags", args.nccl_tests_flags), ("--system", args.system),
                        ("--mpi", args.mpi)):
        if (problem := text_problem(value)) is not None:
            raise UsageError(f"{name}: {problem}")
    if args.timeout <= 0 or args.timeout != args.timeout:
        raise UsageError(f"--timeout {args.timeout:g}: seconds a step may take, above 0")
    hosts = hosts_of(args.hosts) or allocation_hosts()
    per_node = args.gpus_per_node or job_env().number("gpus_on_node") or 1
    plan = steps(hosts, per_node, args.nccl_tests, shlex.split(args.nccl_tests_flags), args.mpi, serial=args.serial,
                 container=from_flags(args), root=args.output.resolve())
    rounds = max(step.round for step in plan) + 1
    said = (f"{len(plan)} step(s) in {rounds} round(s), the steps of a round side by side on nodes of their own; "
            f"at most {rounds * args.timeout / 60:,.0f} min (--timeout {args.timeout:g} s a round)")
    if args.dry_run:
        for step in plan:
            print(f"round {step.round + 1}, {step.label}: {shlex.join(step.argv)}")
        print(said)
        return 0
    print(said, flush=True)
    judged, failed = check_pairs(plan, args.output, args.system, args.timeout, expected=args.expect_busbw)
    for where, busbw, said in judged:
        print(f"{inert(where)}: busbw {busbw:,.2f} GB/s at the largest size; {inert(said)}")
    for line in failed:
        print(f"no result: {inert(line)}")
    for node in drained(judged):  # the command for the engineer to run; hvdbench changes no node's state
        print("to take it out of service: " + shlex.join(drain_command(node)))
    _keep(args.output, judged, failed)
    print(f"outputs in {shlex.quote(str(args.output / 'nccl-tests'))}; report with: hvdbench report "
          f"{shlex.quote(str(args.output))}")
    return 1 if failed or any(said.startswith("flagged") for _, _, said in judged) else 0

FINDINGS = "fabric-findings.json"  # what fabric --nccl-tests found, kept beside its outputs


def _keep(root: Path, judged: list[tuple[str, float, str]], failed: list[str]) -> None:
    """The findings in the results root, for a script or a later report to read (one line where it cannot be)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        (root / FINDINGS).write_text(json.dumps({"pairs": [{"nodes": w, "busbw_gbs": b, "finding": f}
                                                           for w, b, f in judged], "no_result": failed,
                                                 "drain": drained(judged)}, indent=1) + "\n", encoding="utf-8")
    except OSError as exc:
        print(f"hvdbench: the findings were not kept in {inert(str(root / FINDINGS))} ({exc.strerror})",
              file=sys.stderr)


def cmd_fabric(args: argparse.Namespace) -> int:
    """The node's (or the saved outputs', or with --all-nodes every node of the allocation's) HCA ports, what is
    wrong with them, GPUDirect RDMA's module; with --nccl-tests, nccl-tests between the nodes."""
    if args.nccl_tests:
        return _fabric_pairs(args)
    from hvdbench.core.hca import allocation_findings, gdr_ready

    if args.all_nodes and args.files:
        raise UsageError("--all-nodes asks every node of the allocation; saved outputs are given without it")
    sources, silent = _asked_nodes(args) if args.all_nodes else (_given_sources(args), [])
    across = allocation_findings(dict(sources)) if len(sources) > 1 else []
    here = not args.files and not args.all_nodes
    if args.json:
        return _fabric_json(sources, gdr_ready() if here else None, args.files, across, silent)
    if here:
        if not sources:
            print("no HCA port here: neither ibstat nor ibv_devinfo answered (not installed, or no RDMA device)")
        print(gdr_ready())
    flagged = _print_sources(sources, args.files)
    for node, why in silent:
        print(f"{inert(node)}: no answer ({inert(why)})")
    for line in across:
        print(f"flagged across the nodes: {inert(line)}")
    for node in sorted({line.split(" ", 1)[0].removesuffix("'s") for line in across}):
        print("to take it out of service: " + shlex.join(drain_command(node, "ports differ from the others'")))
    return 1 if flagged or across or silent else 0 if sources else 4


def _given_sources(args: argparse.Namespace) -> list[tuple[str, list[dict[str, Any]]]]:
    """The saved outputs' ports, else this node's (none where no tool answered)."""
    from hvdbench.core.hca import node_fabric, parse_hca_ports
    from hvdbench.core.validate import read_small_text

    sources: list[tuple[str, list[dict[str, Any]]]] = []
    for path in args.files:
        try:
            ports = parse_hca_ports(read_small_text(path, 1 << 20, "a saved ibstat output"))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        if not ports:
            raise UsageError(f"{path}: no HCA port in it (not ibstat, ibstatus or ibv_devinfo output?)")
        sources.append((str(path), ports))
    if not args.files:
        facts = node_fabric()
        if facts["hca_ports"]:
            sources.append((f"this node ({facts['source']})", facts["hca_ports"]))
    return sources


def _asked_nodes(args: argparse.Namespace) -> tuple[list[tuple[str, list[dict[str, Any]]]], list[tuple[str, str]]]:
    """Every node's ports (--hosts, else the allocation's), asked by srun: those that answered, and why the others
    did not (a node that answers with no port is one of them)."""
    from hvdbench.core.hca import parse_hca_ports
    from hvdbench.launchers.fabric_ports import ask_nodes
    from hvdbench.launchers.schedulers import allocation_hosts

    hosts = hosts_of(args.hosts) or allocation_hosts()
    if not hosts:
        raise UsageError("--all-nodes: no nodes: run it inside an allocation (salloc, sbatch) or give --hosts")
    sources, silent = [], []
    for node, text, why in ask_nodes(hosts, args.timeout):
        ports = parse_hca_ports(text) if text else []
        if ports:
            sources.append((node, ports))
        else:
            silent.append((node, why or "its output shows no HCA port"))
    return sources, silent


def _print_sources(sources: list[tuple[str, list[dict[str, Any]]]], files: Sequence[Path]) -> int:
    """Each source's ports and what is flagged in it; how many lines were flagged."""
    from hvdbench.core.hca import port_findings

    flagged = 0
    for where, ports in sources:
        print(f"{inert(where)}:")
        for p in ports:
            rate = f"{p['rate_gbps']:g} Gb/s" if isinstance(p.get("rate_gbps"), (int, float)) else "rate not shown"
            print(f"  {inert(p['device'])} port {p['port']}: {p['state']}, {inert(p.get('physical_state') or '-')}, "
                  f"{rate}, {inert(p.get('link_layer') or 'link layer not shown')}")
        for line in port_findings(ports) + _hca_lines(where, ports, files):
            flagged += 1
            print(f"  flagged: {inert(line)}")
    return flagged


def _hca_lines(where: str, ports: list[dict[str, Any]], files: Sequence[Path]) -> list[str]:
    """This node's ports against the NCCL_IB_HCA set here (what a sweep run from here would pass its ranks)."""
    from hvdbench.core.hca import named_down

    hca = os.environ.get("NCCL_IB_HCA")
    return named_down(hca, ports) if hca and not files else []

def _fabric_json(sources: list[tuple[str, list[dict[str, Any]]]], gdr: str | None, files: Sequence[Path],
                 across: Sequence[str] = (), silent: Sequence[tuple[str, str]] = ()) -> int:
    """fabric --json: each source's ports and findings, the nodes set against one another, the nodes that gave no
    answer, GPUDirect RDMA's line (this node only); the same exit status as the text."""
    from hvdbench.core.hca import port_findings

    said = [{"source": where, "ports": ports, "flagged": port_findings(ports) + _hca_lines(where, ports, files)}
            for where, ports in sources]
    print(json.dumps({"sources": said, "across_nodes": list(across),
                      "no_answer": [{"node": n, "why": w} for n, w in silent], "gpudirect_rdma": gdr},
                     indent=1, default=str))
    return 1 if any(s["flagged"] for s in said) or across or silent else 0 if said else 4


def declare(sub: Any) -> None:
    """hvdbench fabric: the node's network ports before a benchmark."""
    fabric = sub.add_parser(
        "fabric", help="check this node's HCA ports and GPUDirect RDMA before a benchmark",
        description="Every HCA port this node's ibstat (else ibv_devinfo) shows, or the saved outputs given: state, "
                    "physical state, rate and link layer; a port down, or up at a lower rate than its node's other "
                    "ports, is flagged; whether GPUDirect RDMA's kernel module is loaded. What is absent is said in "
                    "one line each. Exit status: 0 nothing flagged, 1 a port flagged, 4 no port to judge.")
    fabric.set_defaults(func=cmd_fabric)
    fabric.add_argument("files", nargs="*", type=Path,
                        help="saved ibstat, ibstatus or ibv_devinfo outputs (default: ask this node's tools)")
    fabric.add_argument("--json", action="store_true",
                        help="print JSON for other tools: each source's ports and what is flagged, GPUDirect RDMA")
    fabric.add_argument("--all-nodes", action="store_true",
                        help="inside an allocation: every node's ports (ibstat, else ibv_devinfo, as a one-task srun "
                             "step on each node, 16 at a time, each bounded by --timeout), each node judged and the "
                             "nodes set against one another: fewer active ports or a slower fastest port than the "
                             "others flagged, with the node's drain command; a node that gives no answer is flagged")
    pairs = fabric.add_argument_group(
        "nccl-tests between nodes", "Inside a SLURM allocation: PROGRAM (nccl-tests' all_reduce_perf, built by "
        "scripts/nccl-tests.sh or the cluster's) as one srun step for every pair of nodes and across all of them; "
        "the outputs kept under -o's nccl-tests/, taken in as runs (hvdbench import), each pair's busbw at its largest "
        "size set against the best its two nodes reach with any other node (below 90% or above 111%: flagged, exit "
        "1), and against --expect-busbw where given; a lone pair is too few to compare without it.")
    pairs.add_argument("--nccl-tests", metavar="PROGRAM", default=None, help="the nccl-tests program to run")
    pairs.add_argument("--nccl-tests-flags", default="-b 1M -e 1G -f 2 -g 1", metavar="FLAGS",
                       help="its flags, one string (default: -b 1M -e 1G -f 2 -g 1)")
    pairs.add_argument("--expect-busbw", type=bounded(MOST_BUSBW, "GB/s"), default=None, metavar="GBS",
                       help="the bus bandwidth the link should give at the largest size (nominal, or the vendor's "
                            "figure): every set below 90%% of it is flagged")
    pairs.add_argument("--gpus-per-node", type=positive_int, default=None,
                       help="tasks (GPUs) a node (default: SLURM_GPUS_ON_NODE, else 1)")
    pairs.add_argument("--hosts", default=None, help="the nodes (default: the allocation's)")
    pairs.add_argument("--mpi", default="pmix", help="srun's --mpi (default pmix)")
    pairs.add_argument("-o", "--output", type=Path, default=Path("results/fabric"), help="results root")
    pairs.add_argument("--system", default="local", help="the system's label in the report")
    pairs.add_argument("--timeout", type=bounded(MOST_SECONDS, "seconds"), default=600.0,
                       help="seconds a step may take (default 600)")
    pairs.add_argument("--dry-run", action="store_true", help="print each step's srun command; run nothing")
    pairs.add_argument("--serial", action="store_true",
                       help="one pair at a time (default: disjoint pairs side by side, n-1 rounds for n nodes; one "
                            "pair's traffic alone on the fabric, at n(n-1)/2 steps' time)")
    generated_container_flags(fabric.add_argument_group("nccl-tests in a container image (its program inside it)"))
