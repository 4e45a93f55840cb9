"""hvdbench's collective curves against Intel's MPI Benchmarks on the same two ranks: IMB-MPI1's Allreduce,
Allgather and Bcast and hvdbench's collectives benchmark (raw MPI through mpi4py and Horovod, --timing batch,
nccl-tests' way) run one after the other in alternated rounds (IMB first, then hvdbench; the next round the other
way round), on one host (shared memory) and across two (a second host in a network namespace, TCP). Both under
Intel MPI's hydra from the environment scripts/mpi-env.sh impi makes (.venv-impi: Intel MPI 2021, IMB-MPI1,
Horovod and mpi4py on it).

Per size the ratio hvdbench / IMB of the time per call (hvdbench: the slowest rank's median over batches;
IMB: t_avg, its time per call averaged over ranks) is kept per round; the table gives the median ratio with a
bootstrap 95% interval over rounds, and what one call of each hvdbench path costs before any byte moves.
Byte counts as each tool counts them: IMB's Allgather and Bcast sizes are one rank's message, hvdbench's (as
nccl-tests') the gathered output for allgather: hvdbench's allgather at B bytes is IMB's at B / ranks.

    python benchmarks/vs_imb.py --out docs/results/vs-imb --rounds 5          # needs root for two hosts
    python benchmarks/vs_imb.py --out /tmp/x --rounds 2 --hosts 1 --dry-run   # the commands, nothing run
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from hvdbench.analysis.collect import collect  # noqa: E402
from hvdbench.analysis.tables.comm import comm_table  # noqa: E402
from hvdbench.launchers import builtin  # noqa: E402,F401 - registers the launchers
from hvdbench.launchers.base import LaunchContext, get_launcher  # noqa: E402
from hvdbench.launchers.executor import launch_environment  # noqa: E402
from hvdbench.core.spec import RunSpec  # noqa: E402

IMPI = REPO / ".venv-impi"
IMB_OPS = {"allreduce": "Allreduce", "allgather": "Allgather", "broadcast": "Bcast"}
PATHS = {"mpi": "raw MPI (mpi4py)", "horovod": "Horovod (mpi)"}


def spec_of(args: argparse.Namespace, nodes: int, iface: str | None = None) -> RunSpec:
    """The hvdbench run of a round: 2 ranks on one host, or one on each of two (libfabric's TCP on ``iface``)."""
    return RunSpec(benchmark="collectives", np=2, nodes=nodes, launcher="mpiexec", controller="mpi",
                   env=(("FI_TCP_IFACE", iface),) if iface else (),
                   transport="tcp" if nodes > 1 else None, system=f"vs-imb-{nodes}host",
                   args=("--ops", ",".join(args.ops), "--backends", "mpi,horovod", "--min-bytes", args.min_bytes,
                         "--max-bytes", args.max_bytes, "--factor", "2", "--timing", "batch", "--iters",
                         str(args.iters), "--batches", "5", "--warmup-iters", "5"))


def commands(args: argparse.Namespace, nodes: int, run_dir: Path, host: object | None) -> tuple[list[str], list[str],
                                                                                               dict[str, str]]:
    """hvdbench's and IMB-MPI1's argv under the same hydra and environment."""
    spec = spec_of(args, nodes, getattr(host, "iface", None))
    hosts = ("localhost",) if host is None else (host.local_address, host.address)  # type: ignore[attr-defined]
    ctx = LaunchContext(python=str(IMPI / "bin" / "python"), run_dir=run_dir, hosts=hosts,
                        ssh_port=getattr(host, "port", None), ssh_identity_file=getattr(host, "key", None))
    launcher = get_launcher("mpiexec")
    ours = launcher.command(spec, ctx)
    cut = ours.index(ctx.python)
    low, high = (int(np.log2(size_bytes(v))) for v in (args.min_bytes, args.max_bytes))
    imb = [*ours[:cut], str(IMPI / "bin" / "IMB-MPI1"), *[IMB_OPS[o] for o in args.ops], "-npmin", "2",
           "-msglog", f"{max(0, low - 1)}:{high}", "-iter", "1000", "-time", "10", "-mem", "2"]
    env = launch_environment(launcher, spec, ctx.python)
    env.update(PATH=f"{IMPI / 'bin'}:{env['PATH']}", LD_LIBRARY_PATH=f"{IMPI / 'lib'}:{env.get('LD_LIBRARY_PATH', '')}",
               I_MPI_ROOT=str(IMPI))
    return ours, imb, env


def size_bytes(text: str) -> int:
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


_IMB_HEADER = re.compile(r"# Benchmarking (\w+)")
_IMB_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


def imb_times(text: str) -> dict[tuple[str, int], float]:
    """(IMB benchmark, bytes) -> t_avg in seconds, from IMB-MPI1's output tables."""
    found, current = {}, None
    for line in text.splitlines():
        header = _IMB_HEADER.search(line)
        if header:
            current = header.group(1)
            continue
        row = _IMB_ROW.match(line)
        if current and row:
            found[(current, int(row.group(1)))] = float(row.group(5)) * 1e-6
    return found


def our_times(run_dir: Path) -> pd.DataFrame:
    """hvdbench's table of the run: per op, path and size, its time per call, and each path's own cost."""
    table = comm_table(collect([run_dir]))
    return table[["op", "backend", "bytes", "time_us", "path_cost_us"]]


def one_round(args: argparse.Namespace, nodes: int, host: object | None, scratch: Path, index: int) -> pd.DataFrame:
    """IMB and hvdbench once each (order alternating by round); per op, size and path the ratio to IMB."""
    run_dir = scratch / f"run-{nodes}-{index}"
    ours, imb, env = commands(args, nodes, run_dir, host)
    results: dict[str, object] = {}
    for tool in (("imb", "ours") if index % 2 == 0 else ("ours", "imb")):
        argv = imb if tool == "imb" else ours
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=1800, cwd=scratch)
        if done.returncode != 0:
            raise SystemExit(f"{tool} failed on {nodes} host(s): {(done.stderr or done.stdout)[-1500:]}")
        results[tool] = imb_times(done.stdout) if tool == "imb" else our_times(run_dir)
    reference, table = results["imb"], results["ours"]  # type: ignore[assignment]
    rows = []
    for r in table.itertuples():
        imb_bytes = r.bytes // 2 if r.op == "allgather" else r.bytes
        t_imb = reference.get((IMB_OPS[r.op], imb_bytes))  # type: ignore[union-attr]
        if t_imb:
            rows.append({"hosts": nodes, "round": index, "op": r.op, "path": PATHS[r.backend], "bytes": r.bytes,
                         "imb_us": t_imb * 1e6, "hvdbench_us": r.time_us, "ratio": r.time_us / (t_imb * 1e6),
                         "path_cost_us": r.path_cost_us})
    return pd.DataFrame(rows)


def interval(ratios: np.ndarray, n: int = 4000) -> tuple[float, float, float]:
    """Median over rounds and its percentile-bootstrap 95% interval (rounds resampled)."""
    rng = np.random.default_rng(0)
    draws = np.median(ratios[rng.integers(0, len(ratios), (n, len(ratios)))], axis=1)
    low, high = np.quantile(draws, [0.025, 0.975])
    return float(np.median(ratios)), float(low), float(high)


def summary(rounds: pd.DataFrame) -> pd.DataFrame:
    """Per host count, op, path and size: IMB's and hvdbench's median time per call and the ratio's interval."""
    rows = []
    for (hosts, op, path, nbytes), group in rounds.groupby(["hosts", "op", "path", "bytes"], sort=True):
        ratio, low, high = interval(group["ratio"].to_numpy())
        rows.append({"hosts": hosts, "op": op, "path": path, "bytes": nbytes, "rounds": len(group),
                     "imb_us": group["imb_us"].median(), "hvdbench_us": group["hvdbench_us"].median(),
                     "ratio": ratio, "ratio_low": low, "ratio_high": high,
                     "path_cost_us": group["path_cost_us"].median()})
    return pd.DataFrame(rows)


def markdown(table: pd.DataFrame, args: argparse.Namespace, seconds: float) -> str:
    lines = ["# hvdbench's collective timing against Intel MPI Benchmarks", "",
             f"`python benchmarks/vs_imb.py --rounds {args.rounds} --hosts {','.join(map(str, args.hosts))}` on the "
             f"2-core build machine, {time.strftime('%Y-%m-%d')}, {seconds / 60:.0f} minutes. Intel MPI 2021 "
             "(`.venv-impi`), 2 ranks; hvdbench `--timing batch` (calls back to back, nccl-tests' way), IMB-MPI1's "
             "t_avg. Ratio = hvdbench's time per call / IMB's: median over rounds [95% bootstrap interval].", ""]
    for (hosts, op, path), group in table.groupby(["hosts", "op", "path"], sort=True):
        cost = group["path_cost_us"].dropna()
        own = f" — a call's own cost {cost.median():.1f} µs" if len(cost) else ""
        lines += [f"## {op}, {path}, {hosts} host(s)" + own,
                  "", "| bytes | IMB µs | hvdbench µs | hvdbench / IMB [95%] |", "|---:|---:|---:|---|"]
        lines += [f"| {r.bytes:,} | {r.imb_us:.1f} | {r.hvdbench_us:.1f} | {r.ratio:.2f} [{r.ratio_low:.2f}–"
                  f"{r.ratio_high:.2f}] |" for r in group.itertuples()]
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--hosts", type=lambda t: [int(x) for x in t.split(",")], default=[1, 2])
    parser.add_argument("--ops", type=lambda t: t.split(","), default=list(IMB_OPS))
    parser.add_argument("--min-bytes", default="1K")
    parser.add_argument("--max-bytes", default="16M")
    parser.add_argument("--iters", type=int, default=50, help="hvdbench's calls per batch (5 batches per size)")
    parser.add_argument("--dry-run", action="store_true", help="print one round's commands and run nothing")
    args = parser.parse_args()
    if not (IMPI / "bin" / "IMB-MPI1").exists():
        raise SystemExit(f"no {IMPI}/bin/IMB-MPI1: scripts/mpi-env.sh impi makes the Intel MPI environment")
    if args.dry_run:
        for nodes in args.hosts:
            ours, imb, _ = commands(args, nodes, Path("RUN"), None if nodes == 1 else _StandIn())
            print(f"{nodes} host(s):\n  hvdbench: {' '.join(ours)}\n  IMB:      {' '.join(imb)}")
        return 0
    started, frames = time.monotonic(), []
    scratch = Path(tempfile.mkdtemp(prefix="hvdbench-vs-imb-"))
    host = None
    try:
        if 2 in args.hosts:
            from cluster import start_namespace_host

            host = start_namespace_host(scratch / "netns")
        for index in range(args.rounds):
            for nodes in args.hosts:
                frames.append(one_round(args, nodes, host if nodes > 1 else None, scratch, index))
                print(f"round {index + 1}, {nodes} host(s): done", flush=True)
    finally:
        if host is not None:
            host.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    rounds = pd.concat(frames, ignore_index=True)
    table = summary(rounds)
    args.out.mkdir(parents=True, exist_ok=True)
    rounds.to_csv(args.out / "rounds.csv", index=False)
    table.to_csv(args.out / "vs-imb.csv", index=False)
    (args.out / "README.md").write_text(markdown(table, args, time.monotonic() - started), encoding="utf-8")
    print(table.to_string(index=False))
    return 0


class _StandIn:
    """A second host's fields for the dry run (no namespace is made)."""

    local_address, address, port, key, iface = "10.77.0.1", "10.77.0.2", 2222, Path("/KEY"), "hvdb0"


if __name__ == "__main__":
    sys.exit(main())
