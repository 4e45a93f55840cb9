"""Where a rank can be reached by the other ranks of its job: loopback when they all share its host, else the
address of the interface the job's traffic is told to use (GLOO_SOCKET_IFNAME, HOROVOD_GLOO_IFACE,
NCCL_SOCKET_IFNAME), else its host name's address. torch.distributed's rendezvous and TensorFlow's worker
cluster both take it from here. Framework-free."""

from __future__ import annotations

import fcntl
import socket
import struct
from typing import Mapping, Sequence

from .errors import UsageError

_SIOCGIFADDR = 0x8915  # Linux ioctl: an interface's IPv4 address
IFACE_VARIABLES = ("GLOO_SOCKET_IFNAME", "HOROVOD_GLOO_IFACE", "NCCL_SOCKET_IFNAME")


def interface_address(name: str) -> str | None:
    """The IPv4 address of a network interface, or None where it has none (or does not exist)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            packed = fcntl.ioctl(sock.fileno(), _SIOCGIFADDR, struct.pack("256s", name[:15].encode()))
        except OSError:
            return None
    return socket.inet_ntoa(packed[20:24])


def named_interface(environ: Mapping[str, str], variables: Sequence[str]) -> str | None:
    """The first interface these variables name to use (the first of a list; NCCL's "^name" excludes and names
    none, its "=name" is an exact name)."""
    for variable in variables:
        iface = environ.get(variable, "").split(",")[0].lstrip("=")
        if iface and not iface.startswith("^"):
            return iface
    return None


def reachable_address(one_host: bool, environ: Mapping[str, str], remedy: str) -> str:
    """This host's address as the job's other ranks reach it; a UsageError ending in ``remedy`` where the ranks
    span hosts and the only address found is loopback."""
    if one_host:
        return "127.0.0.1"
    iface = named_interface(environ, IFACE_VARIABLES)
    address = interface_address(iface) if iface else None
    if address:
        return address
    try:
        address = socket.gethostbyname(socket.gethostname())
    except OSError:
        address = "127.0.0.1"
    if address.startswith("127."):
        raise UsageError(f"the ranks span hosts, but this host's name resolves to loopback and no "
                         f"{'/'.join(IFACE_VARIABLES)} names an interface: {remedy}")
    return address


def free_port() -> int:
    """A TCP port free on this host now (the kernel's choice; taken by its user moments later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])
