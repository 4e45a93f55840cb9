"""Real test infrastructure started without systemd: a single-host SLURM cluster (munged, slurmctld,
slurmd) and a second "host" reached through an sshd on a loopback port or in a network namespace, whose link
can be shaped to a known rate (tc tbf)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

SBIN = ("/usr/sbin", "/usr/bin", "/sbin")


def find(name: str) -> str | None:
    """A system tool on PATH or in an sbin directory."""
    found = shutil.which(name)
    if found:
        return found
    for folder in SBIN:
        if os.access(Path(folder) / name, os.X_OK):
            return str(Path(folder) / name)
    return None


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(check, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    raise RuntimeError(f"{what} did not come up within {timeout:g} s")


def missing_slurm_tools() -> list[str]:
    """What a test cluster needs and this machine lacks (root is needed for munge and slurmd)."""
    missing = [t for t in ("munged", "slurmctld", "slurmd", "sbatch", "srun", "squeue", "scancel") if not find(t)]
    if os.geteuid() != 0:
        missing.append("root")
    return missing


# slurm.conf lines every test cluster shares: no cgroups or accounting daemon, jobs kept in squeue for 10 min
POLICY = ("ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
          "SelectTypeParameters=CR_CPU", "MpiDefault=none", "ReturnToService=2",
          "AccountingStorageType=accounting_storage/none", "JobAcctGatherType=jobacct_gather/none", "KillWait=5",
          "MinJobAge=600", "InactiveLimit=0")


def start_procs(conf: Path) -> tuple[dict[str, str], list[subprocess.Popen[bytes]]]:
    """SLURM_CONF for clients, and munged where none answers yet (the first of the cluster's daemons)."""
    munge = start_munge()
    return {**os.environ, "SLURM_CONF": str(conf)}, [] if munge is None else [munge]


@dataclass
class SlurmCluster:
    """One node named after this host with 2 CPUs, one partition; clients find it through SLURM_CONF."""

    root: Path
    conf: Path
    node: str
    procs: list[subprocess.Popen[bytes]]

    @property
    def env(self) -> dict[str, str]:
        """What a client (sbatch, squeue, submitit) needs to reach this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def log_tail(self, lines: int = 20) -> str:
        """The daemons' last log lines, for a failing test's message."""
        out = []
        for name in ("slurmctld.log", "slurmd.log"):
            path = self.root / name
            if path.exists():
                out += [f"--- {name}"] + path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(out)

    def drain(self, timeout: float = 60.0) -> None:
        """Cancel every job and wait until none is left, so no job step outlives its slurmd."""
        env = {**os.environ, **self.env}
        subprocess.run(["scancel", "--full", "--user", str(os.geteuid())], env=env, capture_output=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = subprocess.run(["squeue", "-h", "-t", "all", "-o", "%T"], env=env, capture_output=True, text=True)
            if out.returncode != 0 or not set(out.stdout.split()) & {"PENDING", "RUNNING", "COMPLETING", "CONFIGURING"}:
                return
            time.sleep(1.0)

    def stop(self) -> None:
        """Stop the daemons this cluster started."""
        for proc in reversed(self.procs):
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


def start_munge() -> subprocess.Popen[bytes] | None:
    """munged as user munge, unless one already answers."""
    if subprocess.run("munge -n | unmunge", shell=True, capture_output=True).returncode == 0:
        return None
    for folder in ("/run/munge", "/var/log/munge", "/var/lib/munge"):
        Path(folder).mkdir(parents=True, exist_ok=True)
        shutil.chown(folder, "munge", "munge")
    key = Path("/etc/munge/munge.key")
    if not key.exists():
        subprocess.run([find("mungekey") or "mungekey", "--create"], check=True)
        shutil.chown(key, "munge", "munge")
        key.chmod(0o400)
    proc = subprocess.Popen(["runuser", "-u", "munge", "--", find("munged") or "munged", "--foreground"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait(lambda: subprocess.run("munge -n | unmunge", shell=True, capture_output=True).returncode == 0, "munged")
    return proc


def start_slurm(root: Path) -> SlurmCluster:
    """Write slurm.conf under root and start munged, slurmctld and slurmd in the foreground."""
    node = socket.gethostname().split(".")[0]
    root.mkdir(parents=True, exist_ok=True)
    for sub in ("state", "spool", "tmp"):
        (root / sub).mkdir(exist_ok=True)
    conf = root / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=hvdbench-test",
        f"SlurmctldHost={node}(127.0.0.1)",  # addresses given: the host name need not resolve
        "SlurmUser=root",
        "AuthType=auth/munge",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        # PMIx keeps per-step directories under TmpFS named by job id; ids restart with each test cluster
        f"TmpFS={root / 'tmp'}",
        f"SlurmctldPidFile={root / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'slurmd.pid'}",
        f"SlurmctldPort={free_port()}",
        f"SlurmdPort={free_port()}",
        f"SlurmctldLogFile={root / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'slurmd.log'}",
        *POLICY,
        f"NodeName={node} NodeAddr=127.0.0.1 CPUs={max(2, os.cpu_count() or 2)} State=UNKNOWN",
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
        "",
    ]))
    env, procs = start_procs(conf)
    for daemon in ("slurmctld", "slurmd"):
        args = [find(daemon) or daemon, "-D", "-f", str(conf)]
        if daemon == "slurmctld":
            args.append("-c")  # clean start: no job state from an earlier cluster
        procs.append(subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    cluster = SlurmCluster(root, conf, node, procs)

    def idle() -> bool:
        out = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True)
        return out.returncode == 0 and out.stdout.strip().startswith("idle")

    try:
        _wait(idle, "the SLURM node")
    except RuntimeError as exc:
        cluster.stop()
        raise RuntimeError(f"{exc}\n{cluster.log_tail()}") from None
    return cluster


@dataclass
class SshHost:
    """An sshd on a loopback port that accepts one key: a second host for multi-node runs."""

    port: int
    key: Path
    proc: subprocess.Popen[bytes]

    def stop(self) -> None:
        """Stop the sshd."""
        self.proc.terminate()
        self.proc.wait(timeout=10)


def _sshd_config(root: Path, address: str, port: int) -> tuple[Path, Path]:
    """Host and user keys made under root (root may log in with the user key only) and an sshd_config
    listening on address:port; returns the config and the user key."""
    root.mkdir(parents=True, exist_ok=True)
    host_key, key = root / "host_ed25519", root / "id_ed25519"
    for path in (host_key, key):
        if not path.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    (root / "authorized_keys").write_text((root / "id_ed25519.pub").read_text())
    config = root / "sshd_config"
    config.write_text("\n".join([
        f"Port {port}", f"ListenAddress {address}", f"HostKey {host_key}",
        f"AuthorizedKeysFile {root / 'authorized_keys'}", "PasswordAuthentication no",
        "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password", "StrictModes no",
        "UsePAM no", f"PidFile {root / 'sshd.pid'}", "",
    ]))
    Path("/run/sshd").mkdir(exist_ok=True)
    return config, key


def _start_and_wait(argv: list[str], root: Path, answers: Callable[[], bool], what: str) -> subprocess.Popen[bytes]:
    """Start an sshd (argv ends in its command line) and wait until a login answers."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=open(root / "sshd.log", "wb"))
    try:
        _wait(answers, what, timeout=30)
    except RuntimeError:
        proc.terminate()
        raise
    return proc


def start_sshd(root: Path) -> SshHost:
    """An sshd on a free loopback port."""
    port = free_port()
    config, key = _sshd_config(root, "127.0.0.1", port)

    def answers() -> bool:
        return subprocess.run(["ssh", "-p", str(port), "-i", str(key), "-o", "BatchMode=yes",
                               "-o", "StrictHostKeyChecking=no", "-o", f"UserKnownHostsFile={root / 'known_hosts'}",
                               "127.0.0.1", "true"], capture_output=True).returncode == 0

    proc = _start_and_wait([find("sshd") or "sshd", "-D", "-e", "-f", str(config)], root, answers, "sshd")
    return SshHost(port, key, proc)


@dataclass
class NamespaceHost:
    """A second host with its own name and address: a network namespace joined to this one by a veth
    pair (the same interface name on both sides), running an sshd under its own UTS host name."""

    name: str
    netns: str
    iface: str
    local_address: str
    address: str
    port: int
    key: Path
    proc: subprocess.Popen[bytes]

    def stop(self) -> None:
        """Stop its sshd and remove the namespace (the veth pair goes with it)."""
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        _remove_namespace(self.netns, self.iface)


def _remove_namespace(netns: str, iface: str) -> None:
    """Delete the namespace and this side of its veth pair (either may be gone already)."""
    subprocess.run(["ip", "netns", "del", netns], capture_output=True)
    subprocess.run(["ip", "link", "del", iface], capture_output=True)


def run_steps(steps: list[list[str]], undo: Callable[[], None]) -> None:
    """Run set-up commands in order; at the first that fails, undo what was made and say which failed."""
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            undo()
            raise RuntimeError(f"{' '.join(step)}: {done.stderr.strip()}")


def missing_namespace_tools() -> list[str]:
    """What a namespace host needs and this machine lacks."""
    missing = [t for t in ("ip", "unshare", "sshd", "ssh", "ssh-keygen") if not find(t)]
    return missing + (["root"] if os.geteuid() != 0 else [])


def start_namespace_host(root: Path, name: str = "hvdbench-node2", index: int = 0) -> NamespaceHost:
    """Make the namespace, its link and addresses (10.77.N.1 here, 10.77.N.2 there; N differs per ``index``),
    start sshd there and record its host key as known, so ssh (and mpirun's ssh) reach it without a prompt."""
    tag = f"{os.getpid() % 50 * 4 + 20 + index}"
    netns, iface = f"hvdbench{tag}", f"hvdb{tag}"
    local, remote = f"10.77.{tag}.1", f"10.77.{tag}.2"
    steps = [["ip", "netns", "add", netns], ["ip", "link", "add", iface, "type", "veth", "peer", "name", iface + "p"],
             ["ip", "link", "set", iface + "p", "netns", netns],
             ["ip", "netns", "exec", netns, "ip", "link", "set", iface + "p", "name", iface],
             ["ip", "addr", "add", f"{local}/24", "dev", iface], ["ip", "link", "set", iface, "up"],
             ["ip", "netns", "exec", netns, "ip", "addr", "add", f"{remote}/24", "dev", iface],
             ["ip", "netns", "exec", netns, "ip", "link", "set", iface, "up"],
             ["ip", "netns", "exec", netns, "ip", "link", "set", "lo", "up"]]
    run_steps(steps, lambda: _remove_namespace(netns, iface))
    port = 2222
    config, key = _sshd_config(root, remote, port)
    # a key from an earlier test run at the same address would make ssh refuse the new one
    subprocess.run(["ssh-keygen", "-R", f"[{remote}]:{port}"], capture_output=True)

    def answers() -> bool:
        out = subprocess.run(["ssh", "-p", str(port), "-i", str(key), "-o", "BatchMode=yes",
                              "-o", "StrictHostKeyChecking=accept-new", remote, "hostname"],
                             capture_output=True, text=True)
        return out.returncode == 0 and out.stdout.strip() == name

    try:
        proc = _start_and_wait(["ip", "netns", "exec", netns, "unshare", "--uts", "sh", "-c",
                                f"hostname {name} && exec {find('sshd')} -D -e -f {config}"], root, answers,
                               "sshd in the namespace")
    except RuntimeError:
        _remove_namespace(netns, iface)
        raise
    return NamespaceHost(name, netns, iface, local, remote, port, key, proc)


RATE_UNITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


def rate_bits(rate: str) -> float:
    """``100mbit``, ``1gbit``, ``5gbit`` in bits per second."""
    for unit, scale in RATE_UNITS.items():
        if rate.endswith(unit):
            return float(rate[: -len(unit)]) * scale
    raise ValueError(f"{rate}: a rate as tc writes it (100mbit, 1gbit)")


def link_qdiscs(host: NamespaceHost) -> list[str]:
    """The tbf qdiscs on either end of the host's veth (none once shaping is removed)."""
    lines = []
    for prefix in ([], ["ip", "netns", "exec", host.netns]):
        out = subprocess.run([*prefix, "tc", "qdisc", "show", "dev", host.iface], capture_output=True, text=True)
        lines += [line for line in out.stdout.splitlines() if " tbf " in line]
    return lines


def unshape(host: NamespaceHost) -> None:
    """Remove any root qdisc from both ends (back to the default)."""
    for prefix in ([], ["ip", "netns", "exec", host.netns]):
        subprocess.run([*prefix, "tc", "qdisc", "del", "dev", host.iface, "root"], capture_output=True)


@contextmanager
def shaped_link(host: NamespaceHost, rate: str | None) -> Iterator[None]:
    """Both directions of the host's veth limited to ``rate`` by a token bucket (tbf; the bucket holds 1 ms
    of the rate, at least 32 KiB, so small messages do not pass at line rate); removed on the way out,
    also after an error. ``None``: unshaped."""
    if rate is None:
        yield
        return
    burst = max(32 * 1024, int(rate_bits(rate) / 8 * 1e-3))
    qdisc = ["root", "tbf", "rate", rate, "burst", str(burst), "latency", "100ms"]
    run_steps([["tc", "qdisc", "replace", "dev", host.iface, *qdisc],
               ["ip", "netns", "exec", host.netns, "tc", "qdisc", "replace", "dev", host.iface, *qdisc]],
              lambda: unshape(host))
    try:
        yield
    finally:
        unshape(host)


@contextmanager
def namespace_hosts(root: Path, count: int) -> Iterator[list[NamespaceHost]]:
    """``count`` namespace hosts (hvdbench-node2, -node3, ...), each on its own veth to this one, which
    forwards between them (a star: this namespace is the switch and the first host; traffic between two
    namespace hosts crosses both of their links, as it crosses both nodes' NICs); stopped and forwarding
    restored on the way out."""
    forward = Path("/proc/sys/net/ipv4/ip_forward")
    before = forward.read_text().strip()
    hosts: list[NamespaceHost] = []
    try:
        forward.write_text("1")
        for index in range(count):
            folder = root / f"node{index + 2}"
            if hosts:  # one user key and host key for all, as a cluster's shared home has
                folder.mkdir(parents=True, exist_ok=True)
                for name in ("id_ed25519", "id_ed25519.pub", "host_ed25519", "host_ed25519.pub"):
                    shutil.copy2(hosts[0].key.parent / name, folder / name)
            host = start_namespace_host(folder, f"hvdbench-node{index + 2}", index)
            hosts.append(host)
            run_steps([["ip", "netns", "exec", host.netns, "ip", "route", "add", "default", "via", host.local_address]],
                      lambda: None)
        yield hosts
    finally:
        for host in hosts:
            host.stop()
        forward.write_text(before)


@contextmanager
def shaped_links(hosts: list[NamespaceHost], rate: str | None) -> Iterator[None]:
    """Every host's link shaped to ``rate`` (as shaped_link), all removed on the way out."""
    with ExitStack() as stack:
        for host in hosts:
            stack.enter_context(shaped_link(host, rate))
        yield


CPU_CGROUP = Path("/sys/fs/cgroup/cpu")  # cgroup v1's cpu controller
RANK_VARS = (b"OMPI_COMM_WORLD_RANK=", b"HOROVOD_RANK=", b"PMI_RANK=")  # Open MPI, horovodrun (Gloo), MPICH


def _rank_of(pid: str, tag: bytes | None = None) -> int | None:
    """The MPI rank a process was started as (from its environment), None for any other process and, where ``tag``
    is given, for one whose environment does not hold that entry."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    if tag is not None and tag not in environ:
        return None
    for item in environ:
        for name in RANK_VARS:
            if item.startswith(name) and item[len(name):].isdigit():
                return int(item[len(name):])
    return None


def _place_ranks(root: Path, ranks: int, stop: threading.Event, every: float, tag: bytes | None) -> None:
    """Move every new process started as an MPI rank into its rank's cgroup (threads and children follow),
    looking every ``every`` seconds."""
    # A process not (yet) a rank is looked at again each time: until it execs, its environment is its
    # launcher's, without the rank.
    placed: set[str] = set()
    while not stop.wait(every):
        pids = {p.name for p in Path("/proc").iterdir() if p.name.isdigit()}
        placed &= pids
        for pid in pids - placed:
            rank = _rank_of(pid, tag)
            if rank is not None and rank < ranks:
                try:
                    (root / f"rank{rank}" / "cgroup.procs").write_text(pid)
                except OSError:
                    continue  # gone already
                placed.add(pid)


@contextmanager
def rank_cpu_limits(cpus: float, ranks: int, period_us: int = 10_000, every: float = 0.25,
                    tag: str | None = None) -> Iterator[Path]:
    """Every MPI rank started meanwhile, on this host or a namespace host (they share /proc), held to ``cpus``
    of a CPU in a cgroup of its own (by the rank its launcher gave it), so that what a rank computes in a step
    does not depend on how many other ranks share this machine's cores or are waiting on the network: each
    rank is a host of ``cpus`` CPUs. A rank is placed within ``every`` seconds of its start (each look reads
    every process's environment, ~1 ms for 65 processes; a rank imports its framework for longer than that
    before its first step). ``tag`` (NAME=VALUE) takes only ranks with that entry in their environment (another
    test's ranks on this machine are left alone). Needs root and cgroup v1's cpu controller; removed on the way
    out."""
    if not (CPU_CGROUP / "cgroup.procs").exists():
        raise RuntimeError(f"no cgroup v1 cpu controller at {CPU_CGROUP}")
    if cpus * period_us < 1000:
        raise ValueError(f"{cpus} CPU per {period_us} us is a quota under the kernel's 1000 us: take a longer period")
    root = CPU_CGROUP / f"hvdbench-ranks-{os.getpid()}"
    slice_file = Path("/proc/sys/kernel/sched_cfs_bandwidth_slice_us")
    slice_before = slice_file.read_text().strip()
    stop = threading.Event()
    placer = threading.Thread(target=_place_ranks, args=(root, ranks, stop, every, tag.encode() if tag else None),
                              daemon=True)
    try:
        slice_file.write_text(str(max(period_us // 10, 100)))  # quota handed out in pieces well below it
        for rank in range(ranks):
            group = root / f"rank{rank}"
            group.mkdir(parents=True)
            (group / "cpu.cfs_period_us").write_text(str(period_us))
            (group / "cpu.cfs_quota_us").write_text(str(int(cpus * period_us)))
        placer.start()
        yield root
    finally:
        stop.set()
        if placer.is_alive():
            placer.join()
        for group in sorted(root.glob("rank*")):
            for pid in (group / "cgroup.procs").read_text().split():
                try:
                    (CPU_CGROUP / "cgroup.procs").write_text(pid)
                except OSError:
                    pass
            group.rmdir()
        if root.exists():
            root.rmdir()
        slice_file.write_text(slice_before)
