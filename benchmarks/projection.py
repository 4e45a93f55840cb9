"""How far to trust ``hvdbench project``: project 2-, 3- and 4-node runs from one-host runs plus an allreduce
curve measured between two hosts the way training exchanges (collectives --pattern training), on links
shaped to known rates, and compare with the runs measured on those links.

Hosts: this one and up to three network namespaces, each on its own veth (tests/cluster.py, as the tests
use; this namespace forwards between them), every veth limited at both ends by a token bucket (``tc tbf``)
to each rate in turn, then unshaped. Workloads: ResNet-20 (1 MB of gradients in 59 tensors), an MLP (8 MB
in 6) and a GPT-2-shaped LM (6 MB in 28). Every run: mpirun with Horovod's MPI controller, one rank per host,
one thread per rank, each rank held to a fixed share of a CPU (--cpus-per-rank, a cgroup quota) so that a
"host" is the same small node however many others share these cores.

What the projection is fitted from, and what it is checked against, are measured interleaved (A/B/A):
  A  on this host alone: each workload's 1-rank run and its --independent twins at 2, 3 and 4 ranks (the
     compute of a step at that many ranks on these 2 cores: the correction for sharing them);
  B  per rate: the training-pattern curves between 2 hosts (one per workload), then the training runs
     on 2, 3 and 4 hosts.
A, the first half of the rates' B, A, the second half, A. Each A round is one more repeat of the same
runs (its own run ids: they differ in the repeat number), so every projection takes its compute from all
of them, its interval over the repeats, and the drift (the repeats' spread) is reported beside its error. The
overlap is fitted once, from the 2-host runs at one rate (--fit-setting), and used at every rate and
host count; those fitting runs are marked and left out of the held-out figures. Needs root and the test
tools; nothing stays shaped afterwards (checked).

    python benchmarks/projection.py --out docs/results/projection [--settings 100mbit,1gbit,5gbit,none]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from cluster import NamespaceHost, link_qdiscs, namespace_hosts, rank_cpu_limits, shaped_links  # noqa: E402

from hvdbench.analysis.collect import Collection, collect  # noqa: E402
from hvdbench.analysis.projection.project import project  # noqa: E402
from hvdbench.analysis.tables.scaling import scaling_table  # noqa: E402
from hvdbench.launchers.schedulers import run_dirs  # noqa: E402
from hvdbench.core.spec import RUN_FILE, RunSpec  # noqa: E402

SYSTEM = "cpu-2core"
RUN = ["--steps", "12", "--warmup-steps", "3", "--threads", "1"]
WORKLOADS = {  # name: (benchmark, arguments)
    "resnet20": ("cifar10", ["--model", "resnet20", "--batch-size", "32"]),
    "mlp": ("mlp", ["--mlp-input", "1024", "--mlp-widths", "1024,1024", "--batch-size", "64"]),
    "gpt2-tiny": ("lm", ["--layers", "2", "--width", "128", "--heads", "2", "--context", "64", "--vocab", "8192",
                         "--batch-size", "8"]),
}
# In mpirun's environment, so every run has them (mpirun hands them to every rank) and none counts as a knob:
# - more ranks than cores (3 and 4 "hosts" on 2 cores): waiting ranks yield the core instead of spinning on it,
#   as Open MPI does by itself where it sees a node oversubscribed (here each rank is alone on its "host");
# - MPI_Allreduce as a ring at every rank count (Open MPI's tuned algorithm 4), the algorithm the model and NCCL
#   use: left to choose, Open MPI reduces 3 ranks by another algorithm that moves each buffer twice as often.
MPI_ENV = {"OMPI_MCA_mpi_yield_when_idle": "1", "OMPI_MCA_coll_tuned_use_dynamic_rules": "1",
           "OMPI_MCA_coll_tuned_allreduce_algorithm": "4"}
CURVE = ["--pattern", "training", "--min-bytes", "4K", "--max-bytes", "16M", "--factor", "4", "--iters", "8",
         "--warmup-iters", "2"]


def hvdbench(*argv: str) -> None:
    exe = str(Path(sys.executable).with_name("hvdbench"))
    env = {**os.environ, **MPI_ENV}
    done = subprocess.run([exe, *argv], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"hvdbench {' '.join(argv[:3])} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")


def compute_round(root: Path, ranks: list[int], round_: int) -> None:
    """A: each workload's 1-rank run (root/np1) and its --independent twins (root/npN), on this host, as repeat
    ``round_`` (the earlier repeats are there already: resumed, not run again)."""
    common = ["--launcher", "mpirun", "--system", SYSTEM, "--no-report", "--repeats", str(round_ + 1)]
    for benchmark, args in WORKLOADS.values():
        hvdbench("run", benchmark, "--np", "1", *common, "-o", str(root / "np1"), *args, *RUN)
        for n in ranks:
            hvdbench("run", benchmark, "--np", str(n), *common, "-o", str(root / f"np{n}"), *args, *RUN,
                     "--independent")


def sweep(path: Path, out: Path, hosts: list[NamespaceHost], nodes: int,
          workloads: list[tuple[str, list[str]]]) -> None:
    """One sweep over this host and the first nodes-1 namespace hosts, one rank each."""
    addresses = [hosts[0].local_address] + [h.address for h in hosts[: nodes - 1]]
    listed = "\n".join(f"  - {{benchmark: {b}, args: [{', '.join(repr(x) for x in a)}]}}" for b, a in workloads)
    path.write_text(f"name: {out.parent.name}-{out.name}\nsystem: {SYSTEM}\nlauncher: mpirun\n"
                    f"hosts: [{', '.join(addresses)}]\nssh_port: {hosts[0].port}\nssh_identity_file: {hosts[0].key}\n"
                    f"timeout: 900\nbaseline: false\naxes: {{nodes: [{nodes}], gpus_per_node: [1]}}\n"
                    f"workloads:\n{listed}\n")
    hvdbench("sweep", str(path), "-o", str(out), "--no-report")


def like_runs(compute: Path) -> dict[str, Path]:
    """Each workload's 1-rank run of the first A round (repeat 0): the run its training-pattern curve copies."""
    specs = {folder: RunSpec.read(folder / RUN_FILE) for folder in run_dirs(compute / "np1")}
    return {name: folder for name, (benchmark, _) in WORKLOADS.items() for folder, spec in specs.items()
            if spec.benchmark == benchmark and spec.repeat == 0}


def rate_round(base: Path, setting: str, hosts: list[NamespaceHost], counts: list[int], scratch: Path) -> None:
    """B: the training-pattern curves between 2 hosts, then the runs on each host count, at one rate."""
    likes = like_runs(base / "A")
    curves = [("collectives", [*CURVE, "--like", str(likes[name])]) for name in WORKLOADS]
    if not (base / setting / "curve").exists():
        sweep(scratch / f"{setting}-curve.yaml", base / setting / "curve", hosts, 2, curves)
    for n in counts:
        if not (base / setting / f"runs{n}").exists():
            sweep(scratch / f"{setting}-{n}.yaml", base / setting / f"runs{n}", hosts, n,
                  [(b, a + RUN) for b, a in WORKLOADS.values()])


def _collected(dirs: list[Path]) -> Collection:
    """These result folders read, every run of them: a run left out (a second folder holding the same run id)
    would silently leave a round out of the comparison, so it stops the benchmark."""
    collection = collect(dirs)
    if collection.spec_errors:
        raise SystemExit(f"{len(collection.spec_errors)} run(s) left out: {collection.spec_errors[0]}")
    return collection


@lru_cache(maxsize=None)
def _scaling(*dirs: Path) -> pd.DataFrame:
    """The scaling table of these result folders, collected once however many comparisons read it."""
    return scaling_table(_collected(list(dirs)))


def _rows(table: pd.DataFrame, benchmark: str, column: str, value: int, independent: bool) -> pd.DataFrame:
    return table[(table["benchmark"] == benchmark) & (table[column] == value) & (table["independent"] == independent)]


def drift(compute: Path, n: int) -> dict[str, float]:
    """Per workload, the spread of the twin's throughput at n ranks over the A rounds (max/min - 1, %)."""
    table = _scaling(compute / f"np{n}")
    out = {}
    for name, (benchmark, _) in WORKLOADS.items():
        row = _rows(table, benchmark, "np", n, True)
        if len(row):
            out[name] = (row.iloc[0]["repeat_max"] / row.iloc[0]["repeat_min"] - 1) * 100
    return out


def fitted_overlap(base: Path, fit: str) -> dict[str, tuple[float, np.ndarray, str]]:
    """Each workload's overlap, fitted from its 2-host run at the fit setting (compute from the twin at 2)."""
    dirs = [base / "A" / "np1", base / "A" / "np2", base / fit / "curve", base / fit / "runs2"]
    fitted = project(_collected(dirs), nodes=[2], gpus_per_node=1, algorithms=("ring",)).fitted_overlap()
    return {label: (phi, draws, f"fitted from the 2-host runs at {fit} ({how})")
            for label, (phi, draws, how) in fitted.items()}


def compare(base: Path, setting: str, n: int, overlap: dict[str, Any], fit: str) -> list[dict[str, Any]]:
    """Projected (compute from the twin at n ranks over the A rounds, this rate's curve, the fitted overlap)
    against the n-host runs measured at this rate."""
    dirs = [base / "A" / "np1", base / "A" / f"np{n}", base / setting / "curve"]
    projected = project(_collected(dirs), nodes=[n], gpus_per_node=1, algorithms=("ring",), overlaps=overlap)
    measured = _scaling(base / setting / f"runs{n}")
    single = _scaling(base / "A" / "np1")
    moved = drift(base / "A", n)
    links = projected.links[projected.links["link"] == "measured between nodes"]
    rows = []
    for name, (benchmark, _) in WORKLOADS.items():
        table = projected.table
        p = table[table["workload"].str.startswith(benchmark + " ") & (table["nodes"] == n)]
        m = measured[(measured["benchmark"] == benchmark) & (measured["nodes"] == n) & ~measured["independent"]]
        one = _rows(single, benchmark, "np", 1, False)
        if p.empty or m.empty or one.empty:
            rows.append({"setting": setting, "hosts": n, "workload": name, "note": "missing run"})
            continue
        p, m = p.iloc[0], m.iloc[0]
        workload = next(w for w in projected.workloads if w.label == p["workload"])
        own = links[links["source"].str.contains(f"training pattern of {benchmark} ", regex=False)]
        link = (own if len(own) else links).iloc[0]
        rows.append({
            "setting": setting, "hosts": n, "workload": name, "gradient_mb": workload.model.grad_bytes / 1e6,
            "link_alpha_us": link["alpha_us"], "link_gbs": link["gbs"], "compute_ms": workload.model.compute_s * 1e3,
            "drift_pct": moved.get(name, np.nan), "overlap": p["overlap"], "measured_step_ms": m["median_step_ms"],
            "projected_step_ms": p["step_ms"], "projected_low_ms": p["step_low_ms"],
            "projected_high_ms": p["step_high_ms"], "error_pct": (p["step_ms"] / m["median_step_ms"] - 1) * 100,
            "measured_efficiency": m["throughput"] / (n * one.iloc[0]["throughput"]),
            "projected_efficiency": p["efficiency"], "role": "fit" if (setting, n) == (fit, 2) else "held out"})
    return rows


def summary(table: pd.DataFrame) -> str:
    """The held-out comparisons' error figures."""
    held = table[(table["role"] == "held out")].dropna(subset=["error_pct"])
    if held.empty:
        return "no held-out comparison"
    errors = held["error_pct"].abs()
    worst = held.loc[errors.idxmax()]
    return (f"held out: {len(held)} comparisons, {int((errors <= 10).sum())} within 10%, {int((errors <= 15).sum())} "
            f"within 15%, median |error| {errors.median():.1f}%, worst {worst['setting']} {worst['hosts']} hosts "
            f"{worst['workload']}: {worst['error_pct']:+.1f}%; drift over the A rounds: median "
            f"{table['drift_pct'].abs().median():.1f}%, largest {table['drift_pct'].abs().max():.1f}%")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="results, table (projection.csv) and summary")
    parser.add_argument("--settings", default="100mbit,1gbit,5gbit,none", help="tc rates, 'none' = unshaped")
    parser.add_argument("--hosts", default="2,3,4", help="host counts checked (2 is needed: the curve and the fit)")
    parser.add_argument("--fit-setting", default="1gbit", help="the rate whose 2-host runs the overlap is fitted from")
    parser.add_argument("--cpus-per-rank", type=float, default=0.45,
                        help="each rank held to this much of a CPU (cgroup quota); 0: no limit")
    parser.add_argument("--quota-period-us", type=int, default=2500,
                        help="the quota's period (the quota, CPUs x period, is 1 ms at least)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped: the hosts and shaping are removed"))
    base = args.out.resolve() / "results"
    settings = [s.strip() for s in args.settings.split(",")]
    counts = sorted({2, *(int(n) for n in args.hosts.split(","))})
    if args.fit_setting not in settings:
        raise SystemExit(f"--fit-setting {args.fit_setting} is not among --settings {args.settings}")
    halves = [settings[: (len(settings) + 1) // 2], settings[(len(settings) + 1) // 2:]]
    scratch = Path(tempfile.mkdtemp(prefix="hvdbench-projection-"))
    started = time.monotonic()
    try:
        with ExitStack() as stack:
            hosts = stack.enter_context(namespace_hosts(scratch / "netns", max(counts) - 1))
            if args.cpus_per_rank > 0:
                stack.enter_context(rank_cpu_limits(args.cpus_per_rank, max(counts), args.quota_period_us))
            for k, half in enumerate([*halves, []]):
                compute_round(base / "A", counts, k)
                print(f"A{k}: done at {time.monotonic() - started:.0f} s", flush=True)
                for setting in half:
                    with shaped_links(hosts, None if setting == "none" else setting):
                        shaped = [len(link_qdiscs(h)) for h in hosts]
                        if setting != "none" and shaped != [2] * len(hosts):
                            raise SystemExit(f"{setting}: expected a tbf on both ends of every link, found {shaped}")
                        rate_round(base, setting, hosts, counts, scratch)
                    assert not any(link_qdiscs(h) for h in hosts), "shaping left behind"
                    print(f"{setting}: done at {time.monotonic() - started:.0f} s", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    overlap = fitted_overlap(base, args.fit_setting)
    rows = [row for s in settings for n in counts for row in compare(base, s, n, overlap, args.fit_setting)]
    table = pd.DataFrame(rows)
    table.to_csv(args.out.resolve() / "projection.csv", index=False, float_format="%.4g")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    print(summary(table))
    print(f"total {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
