"""Open MPI, MPICH and Intel MPI side by side across two hosts: the same 2-rank, 2-host training run and
allreduce curve (through Horovod and through mpi4py) on each MPI, measured in alternated rounds (Open MPI,
MPICH, Intel MPI, Open MPI, ...) so that drift of the machine falls on all alike.

Open MPI runs from .venv (`launcher: mpirun`), MPICH from .venv-mpich and Intel MPI from .venv-impi
(`scripts/mpi-env.sh mpich|impi`; `launcher: mpiexec`, hydra), each with transport tcp over the link to a second
host with its own name and address (a network namespace joined by a veth pair, tests/cluster.py, as the tests
use). One results root, one report; every rank records the MPI library it loaded. Needs root and the test tools.

    python benchmarks/mpi_implementations.py --out docs/results/mpi-implementations [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from cluster import NamespaceHost, start_namespace_host  # noqa: E402

# name -> (environment's bin/, launcher, system name: runs of one launcher and arguments on two MPIs need two
# systems, or they would be one run)
MPIS = {"Open MPI": (REPO / ".venv" / "bin", "mpirun", "netns-openmpi"),
        "MPICH": (REPO / ".venv-mpich" / "bin", "mpiexec", "netns-mpich"),
        "Intel MPI": (REPO / ".venv-impi" / "bin", "mpiexec", "netns-impi")}
TRAIN = "[--model, resnet20, --batch-size, '32', --steps, '40', --warmup-steps, '5', --threads, '1']"
CURVE = ("[--ops, allreduce, --backends, 'horovod,mpi', --min-bytes, '1K', --max-bytes, 16M, --factor, '4', "
         "--iters, '20', --warmup-iters, '3']")


def sweep_text(host: NamespaceHost, launcher: str, system: str, rounds: int) -> str:
    """One MPI's sweep: the training run and the curve across the two hosts, ``rounds`` repeats."""
    return (f"name: {system}\nsystem: {system}\nlauncher: {launcher}\ntransport: tcp\nbaseline: false\n"
            f"repeats: {rounds}\nhosts: [{host.local_address}, {host.address}]\nssh_port: {host.port}\n"
            f"ssh_identity_file: {host.key}\ntimeout: 600\n"
            f"workloads:\n  - {{benchmark: cifar10, args: {TRAIN}}}\n  - {{benchmark: collectives, args: {CURVE}}}\n"
            f"axes: {{nodes: [2], gpus_per_node: [1], env: {{NCCL_SOCKET_IFNAME: {host.iface}, "
            f"UCX_NET_DEVICES: {host.iface}}}}}\n")


def run_round(host: NamespaceHost, root: Path, scratch: Path, rounds: int) -> dict[str, float]:
    """Each MPI's sweep with one more repeat than before (the earlier repeats are kept and skipped)."""
    seconds = {}
    for name, (bin_dir, launcher, system) in MPIS.items():
        sweep = scratch / f"{system}.yaml"
        sweep.write_text(sweep_text(host, launcher, system, rounds))
        env = {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", "HOME": str(Path.home()),
               "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        started = time.monotonic()
        done = subprocess.run([str(bin_dir / "hvdbench"), "sweep", str(sweep), "-o", str(root), "--no-report"],
                              env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{name} round {rounds}: {done.stdout[-1500:]}{done.stderr[-1500:]}")
        seconds[name] = time.monotonic() - started
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="results root; its report/ holds the tables")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds (each MPI once per round)")
    args = parser.parse_args()
    missing = [str(b / "hvdbench") for b, _, _ in MPIS.values() if not (b / "hvdbench").exists()]
    if missing:
        raise SystemExit(f"missing {', '.join(missing)}: make setup, then scripts/mpi-env.sh mpich and impi")
    root = args.out.resolve()
    scratch = Path(tempfile.mkdtemp(prefix="hvdbench-mpis-"))
    host = start_namespace_host(scratch / "netns")
    try:
        for rounds in range(1, args.rounds + 1):
            seconds = run_round(host, root, scratch, rounds)
            print(f"round {rounds}: " + ", ".join(f"{k} {v:.0f} s" for k, v in seconds.items()), flush=True)
    finally:
        host.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    subprocess.run([str(REPO / ".venv" / "bin" / "hvdbench"), "report", str(root)], check=True,
                   capture_output=True)
    runs = pd.read_csv(root / "report" / "runs.csv")
    print(runs.groupby(["system", "benchmark", "mpi"]).size().to_string())
    scaling = pd.read_csv(root / "report" / "scaling.csv")
    print(scaling.to_string(index=False, max_colwidth=30))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
