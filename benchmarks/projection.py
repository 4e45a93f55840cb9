"""How far to trust ``hvdbench project``: project 2-node runs from 1-node runs plus an allreduce curve
measured between two hosts, on a link shaped to known rates, and compare with the 2-node runs measured
on that link.

The second host is a network namespace joined by a veth pair (tests/cluster.py, as the tests use); both
ends of the veth are limited by a token bucket (``tc tbf``) to each rate in turn, then unshaped. At each
setting: the allreduce curve between the hosts and the 2-node (1 rank each) training runs of ResNet-20
(1 MB of gradients), an MLP (8 MB) and a GPT-2-shaped LM (6 MB). Once, on one host: the 1-rank and
2-rank runs, the 2-rank --independent twins and the allreduce curve within the host. Every run is
mpirun with Horovod's MPI controller, one thread per rank. Needs root and the test tools; nothing stays
shaped afterwards (checked).

    python benchmarks/projection.py --out docs/results/projection [--settings 100mbit,1gbit,5gbit,none]
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

from cluster import NamespaceHost, link_qdiscs, shaped_link, start_namespace_host  # noqa: E402

from hvdbench.analysis.collect import collect  # noqa: E402
from hvdbench.analysis.projection import project  # noqa: E402
from hvdbench.analysis.scaling import scaling_table  # noqa: E402

SYSTEM = "cpu-2core"
RUN = ["--steps", "20", "--warmup-steps", "3", "--threads", "1"]
WORKLOADS = {  # name: (benchmark, arguments)
    "resnet20": ("cifar10", ["--model", "resnet20", "--batch-size", "32"]),
    "mlp": ("mlp", ["--mlp-input", "1024", "--mlp-widths", "1024,1024", "--batch-size", "64"]),
    "gpt2-tiny": ("lm", ["--layers", "2", "--width", "128", "--heads", "2", "--context", "64", "--vocab", "8192",
                         "--batch-size", "8"]),
}
CURVE = ["--ops", "allreduce", "--backends", "horovod", "--min-bytes", "1K", "--max-bytes", "16M", "--factor", "4",
         "--iters", "8"]


def hvdbench(*argv: str) -> None:
    exe = str(Path(sys.executable).with_name("hvdbench"))
    done = subprocess.run([exe, *argv], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"hvdbench {' '.join(argv[:3])} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")


def one_node(root: Path) -> None:
    """1- and 2-rank runs, the 2-rank twins and the curve, on this host (unaffected by the shaping)."""
    common = ["--launcher", "mpirun", "--system", SYSTEM, "-o", str(root), "--no-report"]
    for benchmark, args in WORKLOADS.values():
        hvdbench("run", benchmark, "--np", "1,2", *common, *args, *RUN)
        hvdbench("run", benchmark, "--np", "2", *common, *args, *RUN, "--independent")
    hvdbench("run", "collectives", "--np", "2", *common, *CURVE)


def two_nodes(root: Path, host: NamespaceHost, scratch: Path) -> None:
    """The curve between the hosts (root/curve) and the 2-node training runs (root/runs)."""
    head = (f"system: {SYSTEM}\nlauncher: mpirun\nhosts: [{host.local_address}, {host.address}]\n"
            f"ssh_port: {host.port}\nssh_identity_file: {host.key}\ntimeout: 900\n"
            f"axes: {{nodes: [2], gpus_per_node: [1], env: {{NCCL_SOCKET_IFNAME: {host.iface}}}}}\n")
    items = {"curve": [("collectives", CURVE)], "runs": [(b, a + RUN) for b, a in WORKLOADS.values()]}
    for part, workloads in items.items():
        listed = "\n".join(f"  - {{benchmark: {b}, args: [{', '.join(repr(x) for x in a)}]}}" for b, a in workloads)
        sweep = scratch / f"{root.name}-{part}.yaml"
        sweep.write_text(f"name: {root.name}-{part}\n{head}workloads:\n{listed}\n")
        hvdbench("sweep", str(sweep), "-o", str(root / part), "--no-report")


def compare(base: Path, setting: str) -> list[dict[str, object]]:
    """Projected (from the 1-node runs + this setting's curve) against measured 2-node step and efficiency."""
    projected = project(collect([base / "one-node", base / setting / "curve"]), nodes=[2], gpus_per_node=1,
                        algorithms=("ring",))
    measured = scaling_table(collect([base / setting / "runs"]))
    one = scaling_table(collect([base / "one-node"]))
    link = projected.links[projected.links["kind"] == "inter"].iloc[0]
    rows = []
    for name, (benchmark, _) in WORKLOADS.items():
        table = projected.table
        p = table[table["workload"].str.startswith(benchmark + " ") & (table["nodes"] == 2)]
        m = measured[(measured["benchmark"] == benchmark) & (measured["nodes"] == 2) & ~measured["independent"]]
        single = one[(one["benchmark"] == benchmark) & (one["np"] == 1) & ~one["independent"]]
        if p.empty or m.empty or single.empty:
            rows.append({"setting": setting, "workload": name, "note": "missing run"})
            continue
        p, m = p.iloc[0], m.iloc[0]
        workload = next(w for w in projected.workloads if w.label == p["workload"])
        rows.append({
            "setting": setting, "workload": name, "gradient_mb": workload.model.grad_bytes / 1e6,
            "link_alpha_us": link["alpha_us"], "link_gbs": link["gbs"], "compute_ms": workload.model.compute_s * 1e3,
            "overlap": p["overlap"], "measured_step_ms": m["median_step_ms"], "projected_step_ms": p["step_ms"],
            "projected_low_ms": p["step_low_ms"], "projected_high_ms": p["step_high_ms"],
            "error_pct": (p["step_ms"] / m["median_step_ms"] - 1) * 100,
            "measured_efficiency": m["throughput"] / (2 * single.iloc[0]["throughput"]),
            "projected_efficiency": p["efficiency"], "note": ""})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="results, table (projection.csv) and summary")
    parser.add_argument("--settings", default="100mbit,1gbit,5gbit,none", help="tc rates, 'none' = unshaped")
    args = parser.parse_args()
    out = args.out.resolve()
    base = out / "results"
    settings = [s.strip() for s in args.settings.split(",")]
    scratch = Path(tempfile.mkdtemp(prefix="hvdbench-projection-"))
    started = time.monotonic()
    host = start_namespace_host(scratch / "netns")
    rows: list[dict[str, object]] = []
    try:
        if not (base / "one-node").exists():
            one_node(base / "one-node")
        print(f"one-node runs: {time.monotonic() - started:.0f} s", flush=True)
        for setting in settings:
            with shaped_link(host, None if setting == "none" else setting):
                shaped = link_qdiscs(host)
                if setting != "none" and len(shaped) != 2:
                    raise SystemExit(f"{setting}: expected a tbf on both ends, found {shaped}")
                if not (base / setting / "runs").exists():
                    two_nodes(base / setting, host, scratch)
            assert not link_qdiscs(host), "shaping left behind"
            rows += compare(base, setting)
            print(f"{setting}: done at {time.monotonic() - started:.0f} s", flush=True)
    finally:
        host.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    table = pd.DataFrame(rows)
    table.to_csv(out / "projection.csv", index=False, float_format="%.4g")
    shown = table.dropna(subset=["error_pct"])
    print(shown.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    worst = shown.loc[shown["error_pct"].abs().idxmax()] if len(shown) else None
    if worst is not None:
        print(f"worst case: {worst['setting']} {worst['workload']}: {worst['error_pct']:+.1f}% "
              f"({len(shown)} comparisons, {sum(shown['error_pct'].abs() <= 10)} within 10%, "
              f"{sum(shown['error_pct'].abs() <= 15)} within 15%)")
    print(f"total {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
