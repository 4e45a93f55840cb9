"""The node's RDMA network as its own tools say it: each HCA port's state, rate and link layer from ``ibstat``,
``ibv_devinfo`` or ``ibstatus`` output (one parser for the three), and the fabric software a rank ran beside
(OFED, UCX, HPC-X, the loaded modules). Recorded with every rank's environment, so a run that used sockets on a node
with active InfiniBand or RoCE ports says so. Framework-free; a tool that is missing or hangs gives nothing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable, Mapping

from .bounded import run_bounded

_STATE = {"active": "active", "port_active": "active", "4": "active", "down": "down", "port_down": "down",
          "1": "down", "init": "init", "port_init": "init", "2": "init", "armed": "armed", "port_armed": "armed",
          "3": "armed"}
_HEADER = re.compile(r"^(?:CA '(?P<ca>[^']+)'|hca_id:\s*(?P<hca>\S+)|Infiniband device '(?P<dev>[^']+)' port "
                     r"(?P<devport>\d+) status:)")
_PORT = re.compile(r"^\s*(?:Port (?P<port>\d+):|port:\s*(?P<port2>\d+))\s*$")
_FIELD = re.compile(r"^\s*(?P<key>[A-Za-z_ ]+?)\s*:\s*(?P<value>.*?)\s*$")
Runner = Callable[..., Any]


def _state(text: str) -> str:
    """Active, ACTIVE, 4: ACTIVE, PORT_ACTIVE (4) -> active."""
    word = re.sub(r"\(\d+\)", "", text).strip().split(":")[-1].strip().lower()
    return _STATE.get(word, word or "unknown")


MOST_GBPS = 10_000.0  # a port faster than 10 Tb/s is no port of today's: a damaged output


def _rate(text: str) -> float | None:
    """Rate: 200 | 25 Gb/sec (1X EDR) -> Gb/s; None where the tool says something else (``Rate: unknown``, ``...``,
    ``1e400``: a number is whole or decimal, followed by no letter or digit, and no faster than any port)."""
    match = re.match(r"^\s*([0-9]{1,6}(?:\.[0-9]{1,6})?)(?![0-9.A-Za-z])", text)
    value = float(match.group(1)) if match else None
    return value if value is not None and 0 < value <= MOST_GBPS else None


def parse_hca_ports(text: str) -> list[dict[str, Any]]:
    """Every HCA port the output shows (ibstat, ibv_devinfo or ibstatus): device, port, state, physical state,
    rate (Gb/s; None where the tool does not say, as ibv_devinfo without -v), link layer, model and firmware."""
    ports: list[dict[str, Any]] = []
    device: dict[str, Any] = {}
    current: dict[str, Any] | None = None
    for line in text.splitlines():
        line = line[:512]  # a tool's line is short; a longer one is read up to here
        header = _HEADER.match(line.strip())
        if header:
            name = header.group("ca") or header.group("hca") or header.group("dev")
            device = {"device": name, "model": None, "firmware": None}
            current = None
            if header.group("devport"):  # ibstatus: one block per port
                current = _new_port(device, int(header.group("devport")), ports)
            continue
        port = _PORT.match(line)
        if port and device:
            current = _new_port(device, int(port.group("port") or port.group("port2")), ports)
            continue
        field = _FIELD.match(line)
        if field and device:
            _take(field.group("key").strip().lower(), field.group("value"), device, current)
    return ports


def _new_port(device: dict[str, Any], number: int, ports: list[dict[str, Any]]) -> dict[str, Any]:
    port = {"device": device["device"], "port": number, "state": None, "physical_state": None, "rate_gbps": None,
            "link_layer": None, "model": device["model"], "firmware": device["firmware"]}
    ports.append(port)
    return port


def _take(key: str, value: str, device: dict[str, Any], port: dict[str, Any] | None) -> None:
    """One ``key: value`` line into the device's or the port's facts."""
    if key in ("ca type", "vendor_part_id"):
        device["model"] = value if key == "ca type" else f"part {value}"
    elif key in ("firmware version", "fw_ver"):
        device["firmware"] = value
    elif port is not None and key == "state":
        port["state"] = _state(value)
    elif port is not None and key in ("physical state", "phys state"):
        port["physical_state"] = value.split(":")[-1].strip()
    elif port is not None and key == "rate":
        port["rate_gbps"] = _rate(value)
    elif port is not None and key in ("link layer", "link_layer"):
        port["link_layer"] = value


def _ask(argv: list[str], run: Runner) -> str | None:
    """A tool's output, or None where it is not here, fails or hangs."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def node_fabric(environ: Mapping[str, str] | None = None, run: Runner = run_bounded) -> dict[str, Any]:
    """This node's HCA ports (ibstat, else ibv_devinfo) and the fabric software: OFED, UCX, HPC-X, loaded modules."""
    environ = os.environ if environ is None else environ
    ports, source = [], None
    for argv in (["ibstat"], ["ibv_devinfo"]):
        text = _ask(argv, run)
        if text:
            ports, source = parse_hca_ports(text), argv[0]
            break
    ofed = (_ask(["ofed_info", "-s"], run) or "").strip().rstrip(":") or None
    ucx = re.search(r"version[=\s]+([0-9][\w.]*)", _ask(["ucx_info", "-v"], run) or "")
    hpcx = environ.get("HPCX_DIR") or environ.get("HPCX_HOME")
    modules = [m for m in environ.get("LOADEDMODULES", "").split(":") if m]
    return {"hca_ports": ports, "source": source, "ofed": ofed, "ucx": ucx.group(1) if ucx else None,
            "hpcx": os.path.basename(hpcx.rstrip("/")) if hpcx else None, "modules": modules}


def active_rdma(fabric: Any) -> list[str]:
    """``mlx5_0 (InfiniBand 400 Gb/s)`` for each active port of a recorded node_fabric."""
    ports = fabric.get("hca_ports") if isinstance(fabric, dict) else None
    out = []
    for port in ports if isinstance(ports, list) else []:
        if isinstance(port, dict) and port.get("state") == "active":
            rate = f" {port['rate_gbps']:g} Gb/s" if isinstance(port.get("rate_gbps"), (int, float)) else ""
            out.append(f"{port.get('device')} ({port.get('link_layer') or 'link layer unknown'}{rate})")
    return out


PEERMEM = ("/sys/module/nvidia_peermem", "/sys/module/nv_peer_mem")  # GPUDirect RDMA's kernel module, loaded


def port_findings(ports: list[dict[str, Any]]) -> list[str]:
    """What is wrong with a node's HCA ports, one line each: a port down, or up at a lower rate than the node's
    fastest port of the same link layer (a bad cable, a port that trained down)."""
    found = []
    fastest: dict[Any, float] = {}
    for port in ports:
        if port.get("state") == "active" and isinstance(port.get("rate_gbps"), (int, float)):
            layer = port.get("link_layer")
            fastest[layer] = max(fastest.get(layer, 0.0), float(port["rate_gbps"]))
    for port in ports:
        name = f"{port.get('device')} port {port.get('port')}"
        if port.get("state") != "active":
            found.append(f"{name} is {port.get('state') or 'in no known state'}"
                         + (f" ({port['physical_state']})" if port.get("physical_state") else ""))
            continue
        rate, best = port.get("rate_gbps"), fastest.get(port.get("link_layer"))
        if isinstance(rate, (int, float)) and best and rate < best:
            found.append(f"{name} runs at {rate:g} Gb/s where the node's other {port.get('link_layer')} ports run "
                         f"{best:g}: a cable or a port that trained down")
    return found


def allocation_findings(by_node: Mapping[str, list[dict[str, Any]]]) -> list[str]:
    """What sets a node's ports apart from the other nodes' of an allocation, one line each: fewer active ports of a
    link layer than most nodes have (a port down that the node alone would not show as missing: ibstat lists only what
    it sees), or a fastest active port below the fastest other nodes' of that link layer (the whole node trained down,
    which its own ports cannot show). Fewer than two nodes: nothing to set apart."""
    if len(by_node) < 2:
        return []
    counts: dict[Any, dict[str, int]] = {}
    fastest: dict[Any, dict[str, float]] = {}
    for node, ports in by_node.items():
        for port in ports:
            if port.get("state") != "active":
                continue
            layer = port.get("link_layer")
            counts.setdefault(layer, {}).setdefault(node, 0)
            counts[layer][node] += 1
            if isinstance(port.get("rate_gbps"), (int, float)):
                fastest.setdefault(layer, {})[node] = max(fastest.get(layer, {}).get(node, 0.0),
                                                          float(port["rate_gbps"]))
    found = []
    for layer, per_node in counts.items():
        usual = sorted(per_node.get(n, 0) for n in by_node)[len(by_node) // 2]  # the median node's count
        found += [f"{node} has {per_node.get(node, 0)} active {layer} port(s) where most nodes have {usual}"
                  for node in by_node if per_node.get(node, 0) < usual]
    for layer, rates in fastest.items():
        best = max(rates.values())
        found += [f"{node}'s fastest {layer} port runs {rate:g} Gb/s where other nodes' run {best:g}: the node's "
                  "links trained down (a switch port, a cable, a NIC setting)" for node, rate in rates.items()
                  if rate < best]
    return found


def gdr_ready(sys_module: Any = PEERMEM) -> str:
    """Whether GPUDirect RDMA's kernel module is loaded here, in words."""
    loaded = [Path(p).name for p in sys_module if Path(p).is_dir()]
    return (f"GPUDirect RDMA: {loaded[0]} loaded" if loaded else
            "GPUDirect RDMA: neither nvidia_peermem nor nv_peer_mem is loaded (modprobe nvidia-peermem; or NCCL's "
            "DMA-BUF path on a new enough driver and kernel)")


def _matching(entry: str, exact: bool, ports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ports one ``NCCL_IB_HCA`` entry (``mlx5_0`` or ``mlx5_0:1``) matches: by exact name or, as NCCL matches
    without ``=``, by prefix (``mlx5_0`` matches ``mlx5_0`` and ``mlx5_01``)."""
    device, _, port = entry.partition(":")
    return [p for p in ports if (str(p.get("device")) == device if exact else str(p.get("device")).startswith(device))
            and (not port or str(p.get("port")) == port)]


def _states(ports: list[dict[str, Any]]) -> str:
    return ", ".join(f"{p.get('device')} port {p.get('port')} {p.get('state') or 'in no known state'}" for p in ports)


def named_down(hca: str, ports: list[dict[str, Any]]) -> list[str]:
    """The ports an ``NCCL_IB_HCA`` value names that the node shows not active, one line each: an exact name
    (``=mlx5_0``) or a prefix (``mlx5_0`` matches ``mlx5_0`` and ``mlx5_01``, as NCCL matches), with ``:PORT`` or
    every port; flagged where every port it matches is down (NCCL then has none of them), or where it matches none.
    An exclusion (``^mlx5_1``, ``^=mlx5_1``) is flagged where the ports it leaves are none or none of them active."""
    text = hca.strip()
    if not text or not ports:
        return []
    excluding = text.startswith("^")
    text = text.lstrip("^")
    exact = text.startswith("=")
    entries = list(filter(None, (e.strip() for e in text.lstrip("=").split(","))))
    if excluding:
        gone = {id(p) for entry in entries for p in _matching(entry, exact, ports)}
        left = [p for p in ports if id(p) not in gone]
        if any(p.get("state") == "active" for p in left):
            return []
        return [f"NCCL_IB_HCA {hca.strip()} leaves " + (f"only ports that are not active ({_states(left)})" if left
                                                         else "no HCA port of this node")]
    found = []
    for entry in entries:
        matched = _matching(entry, exact, ports)
        if not matched:
            found.append(f"NCCL_IB_HCA names {entry}, which is no HCA port of this node")
        elif all(p.get("state") != "active" for p in matched):
            found.append(f"NCCL_IB_HCA names {entry}, and its port(s) are not active ({_states(matched)})")
    return found
