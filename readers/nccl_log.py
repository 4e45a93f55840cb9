"""The network NCCL really used, read from its ``NCCL_DEBUG=INFO`` output (INIT and NET subsystems).

What the log says NCCL did wins over what the environment asked: the transport on each channel's
``via NET/<network>/<device>[/GDRDMA]`` line first, then ``Using network <name>``, then the devices on the
``NET/IB : Using`` line. A ``NET/Socket : Using`` line alone is no evidence of sockets: NCCL 2.4 prints it for
its bootstrap interface beside an InfiniBand data network. Lines may carry a launcher's prefix
(``[1,0]<stdout>:``), NCCL's own (``host:pid:tid [dev] NCCL INFO``) or none. Pure text: no GPU needed.

Hostile input is read in linear time: every line is cut at MAX_LINE characters, and no pattern nests a quantifier
or scans to the line's end for each of its characters (the channel's network path and the trailing text of a line
are split, not matched). A log may hold several runs (a job's output of two runs, an appended file): a run is told
apart by what starts one (a process that printed NCCL's version before printing it again, a second nccl-tests header,
a process not seen before once the run's communicators are complete), never by a banner every rank repeats (recent
NCCL prints its version from each rank); each run is read on its own (``parse_nccl_runs``)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from hvdbench.core.validate import regular_file

INTERNAL_NETWORKS = ("IB", "Socket")  # NCCL's own; any other network name is a plugin's
_LAUNCHER_PREFIX = re.compile(r"^\[\d+(?:,\d+)?\]<std(?:out|err)>:")
_NCCL_PREFIX = re.compile(r"^(?P<host>[^\s:]+):(?P<pid>\d+):\d+ \[\d+\] (?:(?P<where>\S+) )?NCCL (?P<level>INFO|WARN) ")
_BARE_WARN = re.compile(r"^(?:\S+ )?NCCL WARN ")
_VERSION = re.compile(r"NCCL version (\S+)")
MAX_LINE = 4096  # characters of a line read; NCCL's INFO lines are a few hundred
_VIA = re.compile(r"\bvia ")
_CHANNEL = re.compile(r"(?:Channel|Ring) \d")
_IB_DEVICES = re.compile(r"^NET/IB ?: Using (?P<list>.*?)(?:;|$)")
_IB_DEVICE = re.compile(r"\[(?P<index>\d+)\](?P<name>[^:\s\[]+):\d+/(?P<layer>IB|RoCE)")
_SOCKET_DEVICES = re.compile(r"^NET/Socket ?: Using (?P<list>.*)$")
_SOCKET_DEVICE = re.compile(r"\[\d+\](?P<name>[^:\s]+):")
_GDR_STATE = re.compile(r"GPU Direct RDMA (?P<state>Enabled|Disabled) for HCA")
_NET_PLUGIN = re.compile(r"^NET/Plugin ?: Loaded net plugin ")
_COLLNET_PLUGIN = re.compile(r"^NET/Plugin ?: Loaded collnet plugin ")
_PLUGIN_VERSION = re.compile(r" \(v\d+\)$")
_NODES = re.compile(r"\bnNodes (\d+)\b")
_TESTS_RANK = re.compile(r"^#\s+Rank\s+\d+\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device")
_NO_IB = re.compile(r"^NET/IB ?: No device found|NET/IB ?: Unable to open device (\S+)|ibv_open_device failed")


@dataclass
class Fabric:
    """What one NCCL log says about the network and the transports NCCL used (None: the log does not say)."""

    nccl_version: str | None = None
    network: str | None = None   # IB, RoCE, Socket, or a plugin's network name (IBext_v8, AWS Libfabric)
    plugin: str | None = None    # the net plugin loaded (its own name), None: NCCL's internal networks
    collnet: str | None = None   # a collective-network plugin loaded (SHARP)
    gdr: bool | None = None      # GPUDirect RDMA on the network channels
    devices: list[str] = field(default_factory=list)     # NICs in use (names, else the channels' indices)
    intra_node: list[str] = field(default_factory=list)  # transports between GPUs of one node
    nodes: int | None = None
    warnings: list[str] = field(default_factory=list)
    available: list[str] = field(default_factory=list)  # what NCCL found but no channel line shows in use (NVLS ...)
    channel_lines: int = 0  # channel lines the log holds (0: it cannot show what carried data)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Seen:
    """Everything the lines said, before it is weighed."""

    version: str | None = None
    named: list[str] = field(default_factory=list)         # "Using network X"
    channels: dict[str, list[bool]] = field(default_factory=dict)  # network -> GDRDMA per NET channel line
    channel_devices: dict[str, set[str]] = field(default_factory=dict)
    ib_devices: dict[str, tuple[str, str]] = field(default_factory=dict)  # index -> (name, IB | RoCE)
    socket_devices: list[str] = field(default_factory=list)
    gdr_states: list[bool] = field(default_factory=list)
    plugin: str | None = None
    collnet: str | None = None
    intra: list[str] = field(default_factory=list)
    nodes: int | None = None
    tests_hosts: list[str] = field(default_factory=list)
    no_ib: list[str] = field(default_factory=list)
    nccl_warnings: list[str] = field(default_factory=list)
    available: list[str] = field(default_factory=list)
    channel_lines: int = 0
    no_peermem: bool = False


def _message(line: str) -> tuple[str, bool]:
    """A line's message without any launcher's or NCCL's prefix, and whether NCCL marked it WARN."""
    line = _LAUNCHER_PREFIX.sub("", line[:MAX_LINE].rstrip("\r\n"))
    match = _NCCL_PREFIX.match(line)
    if match:
        return line[match.end():].strip(), match["level"] == "WARN"
    bare = _BARE_WARN.match(line)
    if bare:
        return line[bare.end():].strip(), True
    return line.removeprefix("NCCL INFO ").strip(), False


def _transport(via: str) -> str:
    """An intra-node transport as NCCL names it, without its read/write mode (P2P/IPC/read -> P2P/IPC)."""
    return re.sub(r"/(?:read|write)$", "", via)


def _net_via(via: str) -> tuple[str, str, bool] | None:
    """``NET/<network>/<device>[/GDRDMA][/...]`` split into the network (which may hold a slash or a space: "AWS
    Libfabric"), the device index and whether GPUDirect RDMA was used; None for any other path."""
    if not via.startswith("NET/") or any(c.isspace() for c in via.split("/")[-1]):
        return None
    parts = via[4:].split("/")
    for i in range(1, len(parts)):
        if parts[i].isdigit() and parts[i].isascii():
            rest = parts[i + 1:]
            if all(rest) and not any(c.isspace() for part in rest for c in part):
                return "/".join(parts[:i]), parts[i], bool(rest) and rest[0] == "GDRDMA"
    return None


def _tail(message: str, pattern: re.Pattern[str]) -> str | None:
    """The text after ``pattern``'s match at the message's start, without trailing space; None where no match."""
    found = pattern.match(message)
    return message[found.end():].rstrip() if found else None


def _plugin(message: str, pattern: re.Pattern[str]) -> str | None:
    """A plugin's name from its load line (``... Loaded net plugin NAME (v8)``)."""
    rest = _tail(message, pattern)
    version = _PLUGIN_VERSION.search(rest) if rest else None
    return rest[:version.start()] if rest and version and version.start() > 0 else None


def _see_channel(seen: _Seen, via: str) -> None:
    net = _net_via(via)
    if net:
        seen.channels.setdefault(net[0], []).append(net[2])
        seen.channel_devices.setdefault(net[0], set()).add(net[1])
    elif via.split("/")[0] in ("P2P", "SHM", "CollNet", "NVLS"):
        transport = _transport(via)
        if transport not in seen.intra:
            seen.intra.append(transport)


def _see(seen: _Seen, message: str, warn: bool) -> None:
    """Take what one message says."""
    if warn:
        seen.nccl_warnings.append(message)
    if (version := _VERSION.search(message)) and seen.version is None:
        seen.version = version[1]
    if message.startswith("Using network ") and message[14:].strip():
        seen.named.append(message[14:].strip())
    if _CHANNEL.match(message) and (via := _VIA.search(message)) and message[via.end():].strip():
        seen.channel_lines += 1
        _see_channel(seen, message[via.end():].strip())
    if ib := _IB_DEVICES.match(message):
        for device in _IB_DEVICE.finditer(ib["list"]):
            seen.ib_devices[device["index"]] = (device["name"], device["layer"])
    if (sockets := _SOCKET_DEVICES.match(message)) and not seen.socket_devices:
        seen.socket_devices = [d["name"] for d in _SOCKET_DEVICE.finditer(sockets["list"])]
    if gdr := _GDR_STATE.search(message):
        seen.gdr_states.append(gdr["state"] == "Enabled")
    if plugin := _plugin(message, _NET_PLUGIN):
        seen.plugin = plugin
    if collnet := _plugin(message, _COLLNET_PLUGIN):
        seen.collnet = collnet
    if message.startswith("NVLS multicast support is available") and "NVLS" not in seen.available:
        seen.available.append("NVLS")  # available, not used: a channel line "via NVLS" says it was
    if "GPU Direct RDMA Disabled" in message and "(no module)" in message:
        seen.no_peermem = True
    if nodes := _NODES.search(message):
        seen.nodes = int(nodes[1])
    if host := _TESTS_RANK.match(message):
        seen.tests_hosts.append(host[1])
    if no_ib := _NO_IB.search(message):
        seen.no_ib.append(no_ib[1] or "")


def _network(seen: _Seen) -> str | None:
    """The data network: the channels' where they show one, else the one NCCL said it uses, else IB where
    it listed IB devices; RoCE where the IB network's devices are all Ethernet (RoCE) ports."""
    if seen.channels:
        name = max(seen.channels, key=lambda n: len(seen.channels[n]))
    elif seen.named:
        name = seen.named[-1]
    elif seen.ib_devices and not seen.no_ib:
        name = "IB"
    elif seen.no_ib and seen.socket_devices and not seen.ib_devices and not seen.plugin:
        name = "Socket"  # a log cut short: IB found no device and the socket transport was set up, so it served
    else:
        return None
    layers = {layer for _, layer in seen.ib_devices.values()}
    return "RoCE" if name == "IB" and layers == {"RoCE"} else name


def _devices(seen: _Seen, network: str | None) -> list[str]:
    """The NICs in use: the IB devices the channels used (all listed where no channel shows one), the
    socket interfaces where sockets carried the data, else the channels' device indices."""
    used = sorted(seen.channel_devices.get(_channel_name(seen, network) or "", set()), key=int)
    if network in ("IB", "RoCE") or (network and network not in INTERNAL_NETWORKS and seen.ib_devices):
        if seen.ib_devices:
            return [seen.ib_devices[i][0] if i in seen.ib_devices else i for i in used] if used else \
                [name for _, (name, _) in sorted(seen.ib_devices.items(), key=lambda kv: int(kv[0]))]
    if network == "Socket":
        return list(seen.socket_devices)
    return used


def _channel_name(seen: _Seen, network: str | None) -> str | None:
    if network == "RoCE":
        return "IB"
    return network if network in seen.channels else (max(seen.channels, key=lambda n: len(seen.channels[n]))
                                                     if seen.channels else None)


def _gdr(seen: _Seen, network: str | None) -> bool | None:
    """True where every network channel used GPUDirect RDMA, False where one did not or NCCL said it is
    disabled (and never enabled), or where the network is TCP sockets (no GPUDirect RDMA is possible over TCP), None
    where the log shows neither."""
    if network == "Socket":
        return False
    flags = seen.channels.get(_channel_name(seen, network) or "", [])
    if flags:
        return all(flags)
    if seen.gdr_states:
        return any(seen.gdr_states)
    return None


def _warnings(seen: _Seen, fabric: Fabric) -> list[str]:
    said = []
    named = sorted({d for d in seen.no_ib if d} | {n for n, _ in seen.ib_devices.values()})
    over = f"NCCL moved data over TCP sockets ({', '.join(seen.socket_devices) or 'an interface'})"
    if fabric.network == "Socket" and named:
        said.append(f"{over} though an RDMA device is there ({', '.join(named)}): the InfiniBand/RoCE path was not "
                    "used")
    elif fabric.network == "Socket" and seen.no_ib:
        said.append(f"{over}: NCCL found no InfiniBand/RoCE device it could use (NCCL's own line: \"NET/IB : No "
                    "device found\"): no RDMA driver or device on the node, or none NCCL may see")
    if len(seen.channels) > 1:
        counts = sorted(((len(v), k) for k, v in seen.channels.items()), reverse=True)
        said.append("channels disagree: " + ", ".join(f"{n} over {name}" for n, name in counts)
                    + f" (reported: {counts[0][1]}, the most)")
    flags = seen.channels.get(_channel_name(seen, fabric.network) or "", [])
    if flags and fabric.network != "Socket" and not all(flags):
        said.append(f"no GPUDirect RDMA on {flags.count(False)} of {len(flags)} network channel line(s): "
                    "data between GPU and NIC is staged through host memory"
                    + ("; the nvidia-peermem module is not loaded (NCCL says '(no module)')" if seen.no_peermem
                       else ""))
    elif not flags and seen.gdr_states and not any(seen.gdr_states):
        said.append("GPUDirect RDMA disabled for every HCA NCCL named"
                    + (": the nvidia-peermem module is not loaded (NCCL says '(no module)'; modprobe nvidia-peermem, "
                       "or NCCL's DMA-BUF path on a new enough driver and kernel)" if seen.no_peermem
                       else " (e.g. no nvidia-peermem module)"))
    said += [f"NCCL WARN {text}" for text in dict.fromkeys(seen.nccl_warnings)][:3]
    return said


def parse_nccl_runs(lines: Iterable[str]) -> list[Fabric]:
    """What each run in NCCL's INFO output says it used, in order, so a job's output of two runs, or a log appended
    to, is read run by run, never one run's version beside another's network and NICs. A run starts where a process
    prints NCCL's version a second time (a line without NCCL's prefix names no process: there, any second version
    line), where a version other than the run's is printed (one job runs one NCCL), at a second nccl-tests header
    (``# nThread``), and at a process not seen before once the run's communicators said "Init COMPLETE"; every
    rank's own version line of the same version belongs to the one run."""
    runs: list[_Seen] = [_Seen()]
    pids: set[str] = set()
    versioned: set[str | None] = set()  # the processes that printed the version in this run (None: unprefixed)
    complete = header = False
    said: str | None = None  # the version this run's processes printed
    for line in lines:
        message, warn = _message(line)
        pid = _pid(line)
        if not message:
            continue
        starts = message.startswith("# nThread ")
        found = _VERSION.search(message)
        version = found is not None
        if ((version and pid in versioned) or (starts and header) or (found and said and found[1] != said)
                or (complete and pid is not None and pid not in pids)):
            runs.append(_Seen())
            pids, versioned, complete, header, said = set(), set(), False, False, None
        header = header or starts
        complete = complete or "Init COMPLETE" in message
        if pid is not None:
            pids.add(pid)
        if found:
            versioned.add(pid)
            said = said or found[1]
        _see(runs[-1], message, warn)
    return [_fabric(seen) for seen in runs]


def _pid(line: str) -> str | None:
    """The process NCCL's prefix names (``host:pid:tid [dev] NCCL ...``) as ``host:pid`` (process ids repeat across
    hosts), None without one."""
    match = _NCCL_PREFIX.match(_LAUNCHER_PREFIX.sub("", line[:MAX_LINE]))
    return f"{match['host']}:{match['pid']}" if match else None


def _last(runs: list[Fabric]) -> Fabric:
    """The last run's fabric, with a warning where there were several."""
    last = runs[-1]
    if len(runs) > 1:
        last.warnings.insert(0, f"the log holds {len(runs)} runs (NCCL started {len(runs)} times): the last one's "
                                "figures are shown")
    return last


def parse_nccl_log(lines: Iterable[str]) -> Fabric:
    """What NCCL's INFO output says it used: its last run's, with a warning where the output holds several."""
    return _last(parse_nccl_runs(lines))


def _fabric(seen: _Seen) -> Fabric:
    """One run's fabric from what its lines said."""
    network = _network(seen)
    plugin = seen.plugin
    if plugin is None and network and network not in INTERNAL_NETWORKS + ("RoCE",):
        plugin = network  # a plugin's network with no load line in the log: its network name is its name
    nodes = seen.nodes if seen.nodes is not None else (len(set(seen.tests_hosts)) or None)
    fabric = Fabric(seen.version, network, plugin, seen.collnet, _gdr(seen, network), _devices(seen, network),
                    list(seen.intra), nodes, available=[a for a in seen.available if a not in seen.intra],
                    channel_lines=seen.channel_lines)
    if nodes == 1 and seen.channel_lines and not seen.channels and network is not None:
        fabric.available.insert(0, network)  # one node, every channel within it: no byte crossed the network
        fabric.network, fabric.gdr, fabric.devices = None, None, []
    fabric.warnings = _warnings(seen, fabric)
    return fabric


def run_fabric(fabrics: list[Fabric], nodes: int, rdma: Sequence[str] = (),
               near_nics: Sequence[str] = ()) -> Fabric | None:
    """One run's fabric from its ranks' logs (None where none says anything): the network most ranks name,
    GPUDirect RDMA only where every rank that says used it, NICs and transports of all ranks, every warning
    once, and a warning of its own where a run across nodes moved its data over sockets (naming the node's
    active RDMA ports, ``rdma``, where its record lists them) or used no GPUDirect RDMA though the GPU shares a
    PCIe switch with a NIC (``near_nics``: ``mlx5_0 (PIX)``)."""
    said = [f for f in fabrics if f.network or f.intra_node or f.nccl_version]
    if not said:
        return None
    networks = [f.network for f in said if f.network]
    network = max(dict.fromkeys(networks), key=networks.count) if networks else None
    gdrs = [f.gdr for f in said if f.gdr is not None]
    def first(name: str) -> Any:
        return next((getattr(f, name) for f in said if getattr(f, name)), None)

    merged = Fabric(first("nccl_version"), network, first("plugin"), first("collnet"),
                    all(gdrs) if gdrs else None, sorted({d for f in said for d in f.devices}),
                    list(dict.fromkeys(t for f in said for t in f.intra_node)), nodes,
                    available=list(dict.fromkeys(a for f in said for a in f.available)),
                    channel_lines=sum(f.channel_lines for f in said))
    if nodes == 1 and merged.channel_lines and not any(f.channel_lines and f.network for f in said) and network:
        merged.available.insert(0, network)  # a one-node run's channels all within the node
        merged.network, merged.gdr, merged.devices = None, None, []
    warnings = list(dict.fromkeys(w for f in said for w in f.warnings))
    if nodes > 1 and network == "Socket" and not any("TCP sockets" in w for w in warnings):
        beside = f", although the node has active RDMA ports {', '.join(rdma)}" if rdma else ""
        warnings.insert(0, f"a run across {nodes} nodes moved its data over TCP sockets{beside}: check that NCCL "
                           "sees the nodes' InfiniBand/RoCE devices (and, in a container, /dev/infiniband)")
    if merged.gdr is False and near_nics:
        warnings.append(f"no GPUDirect RDMA although the GPU shares a PCIe switch with {', '.join(near_nics)}: "
                        "data crossed host memory; check nvidia-peermem (or NCCL's DMA-BUF path) on the nodes")
    merged.warnings = warnings
    return merged


def read_nccl_runs(path: Path) -> list[Fabric]:
    """Each run's Fabric in one log file, read line by line (a log of every subsystem may be large; each line read
    up to MAX_LINE characters however long it is); a ValueError of one line where the path is no regular file or
    cannot be read."""
    regular_file(path)
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return parse_nccl_runs(_capped(handle))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror})") from None


def read_nccl_log(path: Path) -> Fabric:
    """The Fabric of one log file: its last run's, said where it holds several."""
    return _last(read_nccl_runs(path))


def _capped(handle: Any, size: int = 1 << 16) -> Iterable[str]:
    """A text file's lines, each cut at MAX_LINE characters, without ever holding a longer line whole."""
    rest = ""
    while chunk := handle.read(size):
        rest += chunk
        lines = rest.split("\n")
        rest = lines.pop()
        yield from (line[:MAX_LINE] for line in lines)
        rest = rest[:MAX_LINE]
    if rest:
        yield rest


def fabric_lines(fabric: Fabric) -> list[str]:
    """The fabric as ``name: value`` lines (the command's text form)."""
    def shown(value: Any) -> str:
        if value is None:
            return "not in the log"
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, list):
            return ", ".join(map(str, value)) or "none seen"
        return str(value)

    facts = fabric.as_dict()
    warnings = facts.pop("warnings")
    facts.pop("channel_lines")
    if fabric.network is not None and not fabric.channel_lines:
        facts["network"] = f"{fabric.network} (named by NCCL; no channel line in the log shows data over it)"
    if fabric.plugin is None and fabric.network in (*INTERNAL_NETWORKS, "RoCE"):
        facts["plugin"] = "none (NCCL's own network)"
    return [f"{name}: {shown(value)}" for name, value in facts.items()] + [f"warning: {w}" for w in warnings]
