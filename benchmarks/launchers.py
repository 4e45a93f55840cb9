"""One workload under every way hvdbench starts ranks, on one machine, into one report: horovodrun (Gloo
and MPI controllers), mpirun, srun inside a SLURM allocation (the sbatch template), two "hosts" over
ssh (localhost and 127.0.0.1, hierarchical allreduce off and on), and mpirun across a second host with
its own name and address (a network namespace).

Needs root and the test tools (scripts/test-tools.sh): it starts the same single-host SLURM cluster,
loopback sshd and namespace host as the tests (tests/cluster.py), then stops them. Run it again with
the same --out and only what is missing runs.

    python benchmarks/launchers.py --out docs/results/cpu-2core-launchers [--repeats 2]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from cluster import NamespaceHost, start_namespace_host, start_slurm, start_sshd  # noqa: E402

# One intra-op thread per rank: a rank picks cpu_count / local_size threads by default, and on the loopback
# "two hosts" each rank believes it is alone on its node (local_size 1), so 2 ranks would run 4 threads on
# 2 cores (measured: 30.6 images/s against 346.6 with one thread each).
WORKLOAD = ('[{benchmark: cifar10, args: [--model, resnet20, --batch-size, "32", --steps, "40", --warmup-steps, "5", '
            '--threads, "1"]}]')


def sweeps(repeats: int, ssh_port: int, key: Path, other: NamespaceHost) -> dict[str, str]:
    """The sweep files: local launchers, srun in an allocation, two hosts over ssh, MPI across hosts."""
    common = f"name: launchers\nsystem: cpu-2core\nrepeats: {repeats}\ntimeout: 600\nworkloads: {WORKLOAD}\n"
    return {
        "local.yaml": common + "launcher: [horovodrun, mpirun]\ncontroller: [gloo, mpi]\naxes: {np: [1, 2]}\n",
        "srun.yaml": common + "launcher: srun\naxes: {np: [1, 2]}\nslurm: {gpus: false, time: 60}\n",
        "two-hosts.yaml": common + (f"launcher: horovodrun\ncontroller: gloo\nhosts: [localhost, 127.0.0.1]\n"
                                    f"ssh_port: {ssh_port}\nssh_identity_file: {key}\n"
                                    "axes: {nodes: [2], gpus_per_node: [1], "
                                    "env: {HOROVOD_HIERARCHICAL_ALLREDUCE: ['0', '1']}}\n"),
        "mpi-two-hosts.yaml": common + (f"launcher: mpirun\nhosts: [{other.local_address}, {other.address}]\n"
                                        f"ssh_port: {other.port}\nssh_identity_file: {other.key}\n"
                                        "axes: {nodes: [2], gpus_per_node: [1], "
                                        f"env: {{NCCL_SOCKET_IFNAME: {other.iface}}}}}\n"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="where the sweep files, results and report go")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    hvdbench = str(Path(sys.executable).with_name("hvdbench"))
    out, root = args.out.resolve(), args.out.resolve() / "results"
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="hvdbench-launchers-"))
    ssh, cluster = start_sshd(scratch / "ssh"), start_slurm(scratch / "slurm")
    other = start_namespace_host(scratch / "netns")
    env = {**cluster.env, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin:/usr/sbin:/sbin",
           "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    timings = []
    try:
        files = sweeps(args.repeats, ssh.port, ssh.key, other)
        for name, text in files.items():
            shown = text.replace(str(ssh.key), "KEY").replace(str(other.key), "KEY")
            (out / name).write_text(shown.replace(f"ssh_port: {ssh.port}", "ssh_port: PORT"))
            (scratch / name).write_text(text)
        for name in ("local.yaml", "two-hosts.yaml", "mpi-two-hosts.yaml"):
            start = time.monotonic()
            subprocess.run([hvdbench, "sweep", str(scratch / name), "-o", str(root), "--no-report"], env=env,
                           check=False)
            timings.append(f"{name}: {time.monotonic() - start:.0f} s")
        start = time.monotonic()
        job = subprocess.run(["sbatch", "--parsable", "--nodes=1", "--ntasks=2", f"--output={out}/srun-job.out",
                              f"--export=ALL,HVDBENCH={hvdbench}", str(REPO / "slurm" / "hvdbench.sbatch"),
                              str(scratch / "srun.yaml"), "-o", str(root), "--no-report"],
                             env=env, capture_output=True, text=True, check=True).stdout.strip()
        while subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], env=env, capture_output=True,
                             text=True).stdout.strip() not in ("", "COMPLETED"):
            time.sleep(5)
        timings.append(f"srun.yaml (sbatch job {job}): {time.monotonic() - start:.0f} s")
    finally:
        cluster.drain()
        cluster.stop()
        ssh.stop()
        other.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    subprocess.run([hvdbench, "status", str(root)], env=env, check=False)
    subprocess.run([hvdbench, "report", str(root), "-o", str(out / "report")], env=env, check=False)
    print("\n".join(timings))
    return 0


if __name__ == "__main__":
    sys.exit(main())
