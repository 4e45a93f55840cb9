"""A real SLURM cluster of several "nodes" with GPUs as SLURM hands them out, started without systemd.

Each node is a network namespace with its own address on a bridge, its own host name (UTS namespace)
and its own ``/tmp`` (mount namespace), running its own slurmd; slurmctld runs here. Every node
declares GPUs through ``gres.conf`` backed by character devices made under the cluster's folder, so
SLURM itself sets ``CUDA_VISIBLE_DEVICES`` and ``SLURM_STEP_GPUS``/``SLURM_JOB_GPUS`` for each task as
on a GPU cluster; the ranks compute on CPU and record what they were given. Names resolve inside the
nodes through ``/etc/netns/<namespace>/hosts``, mounted over ``/etc/hosts`` in each node's mount namespace.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from cluster import POLICY, SlurmCluster, _wait, find, free_port, missing_slurm_tools, run_steps, start_procs

NODE_IFACE = "hvdb0"  # the same interface name inside every node, as on a uniform cluster


def missing_gpu_cluster_tools() -> list[str]:
    """What a several-node test cluster needs and this machine lacks."""
    return missing_slurm_tools() + [t for t in ("ip", "unshare", "nsenter", "mount") if not find(t)]


@dataclass
class GpuCluster(SlurmCluster):
    """The nodes' names, their addresses, the namespaces and the links made for them."""

    nodes: tuple[str, ...] = ()
    addresses: tuple[str, ...] = ()
    gpus_per_node: int = 0
    namespaces: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    etc_dirs: tuple[Path, ...] = field(default_factory=tuple)

    def log_tail(self, lines: int = 20) -> str:
        out = [super().log_tail(lines)]
        for node in self.nodes:
            path = self.root / f"slurmd-{node}.log"
            if path.exists():
                out += [f"--- slurmd {node}"] + path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(out)

    def in_node(self, node: str, argv: list[str]) -> list[str]:
        """argv run inside a node's network namespace (its address, its view of host names)."""
        return ["ip", "netns", "exec", self.namespaces[self.nodes.index(node)], *argv]

    def kill_node(self, node: str) -> None:
        """The node dies: every process in its network namespace (slurmd, job steps, ranks) is killed at once."""
        netns = self.namespaces[self.nodes.index(node)]
        pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass

    def start_node(self, node: str) -> None:
        """Start the node's slurmd again (after kill_node); SLURM returns it to service when it registers."""
        index = self.nodes.index(node)
        # the killed steps' PMIx folders and sockets stay behind, and SLURM's PMIx plugin cannot make them again when
        # the requeued job's step (same ids) starts there: the node comes back clean, as a rebooted one would
        for folder in (self.root / "spool" / node, self.root / f"tmp-{node}"):
            for path in folder.iterdir():
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        self.procs.append(_slurmd(self.root, self.conf, self.namespaces[index], node, self.etc_dirs[index]))

    def not_responding(self, node: str) -> bool:
        """Whether SLURM has found the node not responding or marked it down (sinfo's ``*`` suffix, or ``down``)."""
        out = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"], env={**os.environ, **self.env},
                             capture_output=True, text=True)
        states = out.stdout.split()
        return out.returncode == 0 and any(s.endswith("*") or s.startswith("down") for s in states)

    def idle(self) -> bool:
        """Whether every node is up and idle (no job, answering)."""
        out = subprocess.run(["sinfo", "-h", "-N", "-p", "gpu", "-o", "%T"], env={**os.environ, **self.env},
                             capture_output=True, text=True)
        states = out.stdout.split()
        return out.returncode == 0 and len(states) == len(self.nodes) and all(s == "idle" for s in states)

    def await_nodes(self, timeout: float = 180.0) -> None:
        """Every node back: a killed node's slurmd started again, then all idle."""
        for node, netns in zip(self.nodes, self.namespaces):
            if not subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout.split():
                self.start_node(node)
        _wait(self.idle, "the SLURM nodes to be idle again", timeout)

    def stop(self) -> None:
        """Stop the daemons, then remove the namespaces, links, bridge and host files made for them."""
        super().stop()
        _remove(self.namespaces, self.links, self.etc_dirs)


def _remove(namespaces: tuple[str, ...], links: tuple[str, ...], etc_dirs: tuple[Path, ...]) -> None:
    for netns in namespaces:
        subprocess.run(["ip", "netns", "del", netns], capture_output=True)
    for link in links:
        subprocess.run(["ip", "link", "del", link], capture_output=True)
    for folder in etc_dirs:
        shutil.rmtree(folder, ignore_errors=True)


def _gpu_devices(root: Path, node: str, count: int) -> Path:
    """Character devices standing for a node's GPUs (``nvidia0``... so SLURM numbers them as the driver
    does); they behave as /dev/null and nothing opens them."""
    folder = root / "dev" / node
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        path = folder / f"nvidia{index}"
        if not path.exists():
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return folder


def _slurmd(root: Path, conf: Path, netns: str, node: str, etc: Path) -> subprocess.Popen[bytes]:
    """A node's slurmd in its namespaces: its network, its host name, its /tmp and /etc/hosts."""
    # nsenter, not ip netns exec: that one remounts /sys, and slurmd needs /sys/fs/cgroup
    inside = (f"mount --bind {root / f'tmp-{node}'} {root / 'tmp'} && mount --bind {etc / 'hosts'} /etc/hosts && "
              f"hostname {node} && exec {find('slurmd') or 'slurmd'} -D -N {node} -f {conf}")
    return subprocess.Popen(["nsenter", f"--net=/run/netns/{netns}", "unshare", "--uts", "--mount", "sh", "-c", inside],
                            env={**os.environ, "SLURM_CONF": str(conf)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def start_gpu_cluster(root: Path, nodes: int = 2, gpus_per_node: int = 4) -> GpuCluster:
    """Bridge, namespaces, slurm.conf with gres, munged, slurmctld here and one slurmd per node."""
    tag = f"{os.getpid() % 200 + 20}"
    bridge, names = f"hvdbr{tag}", tuple(f"node{i + 1}" for i in range(nodes))
    namespaces = tuple(f"hvdbench{tag}{n}" for n in names)
    links = (bridge, *(f"hvd{tag}{n}" for n in names))
    subnet = f"10.78.{tag}"
    here, addresses = f"{subnet}.1", tuple(f"{subnet}.{i + 2}" for i in range(nodes))
    etc_dirs = tuple(Path("/etc/netns") / ns for ns in namespaces)
    if not Path("/etc/netns").exists():  # made here: removed with the rest
        etc_dirs += (Path("/etc/netns"),)
    steps = [["ip", "link", "add", bridge, "type", "bridge"], ["ip", "addr", "add", f"{here}/24", "dev", bridge],
             ["ip", "link", "set", bridge, "up"]]
    for netns, link, address in zip(namespaces, links[1:], addresses):
        steps += [["ip", "netns", "add", netns],
                  ["ip", "link", "add", link, "type", "veth", "peer", "name", link + "p"],
                  ["ip", "link", "set", link, "master", bridge], ["ip", "link", "set", link, "up"],
                  ["ip", "link", "set", link + "p", "netns", netns],
                  ["ip", "netns", "exec", netns, "ip", "link", "set", link + "p", "name", NODE_IFACE],
                  ["ip", "netns", "exec", netns, "ip", "addr", "add", f"{address}/24", "dev", NODE_IFACE],
                  ["ip", "netns", "exec", netns, "ip", "link", "set", NODE_IFACE, "up"],
                  ["ip", "netns", "exec", netns, "ip", "link", "set", "lo", "up"]]
    run_steps(steps, lambda: _remove(namespaces, links, etc_dirs))
    controller = socket.gethostname().split(".")[0]
    hosts = "".join(f"{a} {n}\n" for a, n in ((here, controller), *zip(addresses, names)))
    for folder in etc_dirs[:nodes]:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "hosts").write_text(f"127.0.0.1 localhost\n{hosts}")

    root.mkdir(parents=True, exist_ok=True)
    for sub in ("state", "tmp", *(f"tmp-{n}" for n in names), *(f"spool/{n}" for n in names)):
        (root / sub).mkdir(parents=True, exist_ok=True)
    cpus = max(2, os.cpu_count() or 2)
    # typed, as most GPU clusters declare them: a job may ask gpu:N or gpu:h100:N (slurm.gpu_type)
    gres = [f"NodeName={n} Name=gpu Type=h100 File={_gpu_devices(root, n, gpus_per_node)}/nvidia[0-{gpus_per_node - 1}]"
            for n in names]
    (root / "gres.conf").write_text("\n".join(gres) + "\n")
    conf = root / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=hvdbench-gpus",
        f"SlurmctldHost={controller}({here})",
        "SlurmUser=root",
        "AuthType=auth/munge",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}/%n",
        f"TmpFS={root / 'tmp'}",  # each node mounts its own tmp-<node> here
        f"SlurmctldPidFile={root / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'slurmd-%n.pid'}",
        f"SlurmctldPort={free_port()}",
        f"SlurmdPort={free_port()}",
        f"SlurmctldLogFile={root / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'slurmd-%n.log'}",
        *POLICY,
        "GresTypes=gpu",
        "JobRequeue=1",
        "AuthInfo=cred_expire=10",  # a requeued job may start again after 10 s (default 120)
        # a job of the urgent partition preempts the gpu partition's jobs, which SLURM requeues
        "PreemptType=preempt/partition_prio", "PreemptMode=REQUEUE",
        "SlurmdTimeout=15",  # a node that stops answering is down (and its jobs requeued) within about 20 s
        *(f"NodeName={n} NodeAddr={a} CPUs={cpus} Gres=gpu:h100:{gpus_per_node} State=UNKNOWN"
          for n, a in zip(names, addresses)),
        "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=1",
        "PartitionName=urgent Nodes=ALL MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF",
        "",
    ]))
    env, procs = start_procs(conf)
    slurmctld = find("slurmctld") or "slurmctld"
    procs.append(subprocess.Popen([slurmctld, "-D", "-c", "-f", str(conf)], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    procs += [_slurmd(root, conf, netns, node, etc) for netns, node, etc in zip(namespaces, names, etc_dirs[:nodes])]
    cluster = GpuCluster(root, conf, names[0], procs, names, addresses, gpus_per_node, namespaces, links, etc_dirs)

    try:
        _wait(cluster.idle, "the SLURM nodes")
    except RuntimeError as exc:
        tail = cluster.log_tail()
        cluster.stop()
        raise RuntimeError(f"{exc}\n{tail}") from None
    return cluster
