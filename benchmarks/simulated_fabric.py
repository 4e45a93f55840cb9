"""How the SimGrid second opinion scales and what it sees: a ring allreduce across 64 to 1,024 nodes on a
non-blocking tree (the calibration: it must be the alpha-beta formula within 1%) and on a tapered one with the job's
nodes packed and scattered, each simulation timed.

    python benchmarks/simulated_fabric.py                                # 64-1,024 nodes, 16 a leaf, 4:1
    python benchmarks/simulated_fabric.py --nodes 256 --taper 2 --bytes 1.34e9

Prints per node count and fabric: the simulated step against the formula's, and seconds of simulation.
"""

from __future__ import annotations

import argparse

from hvdbench.analysis.projection.simulated import SimulationUnavailable, Tree, available, simulate_ring


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="64,256,1024", help="node counts, comma-separated")
    parser.add_argument("--per-leaf", type=int, default=16, help="nodes a leaf switch")
    parser.add_argument("--taper", type=float, default=4.0, help="the uplinks' oversubscription")
    parser.add_argument("--bytes", type=float, default=102e6, help="bytes all-reduced (default: ResNet-50's fp32)")
    parser.add_argument("--gbs", type=float, default=400.0, help="a node's injection bandwidth, GB/s")
    parser.add_argument("--latency-us", type=float, default=5.0, help="a ring step's latency, µs")
    args = parser.parse_args()
    if not available():
        print("SimGrid's Python module is not installed (pip install simgrid, or Debian's python3-simgrid)")
        return 0
    print(f"{'nodes':>6}  {'fabric':<66}  {'simulated':>10}  {'formula':>9}  {'ratio':>6}  {'seconds':>7}")
    for nodes in (int(n) for n in args.nodes.split(",")):
        for tree in (Tree(args.per_leaf, 1.0, "scattered"), Tree(args.per_leaf, args.taper, "packed"),
                     Tree(args.per_leaf, args.taper, "scattered")):
            try:
                s = simulate_ring(nodes, args.bytes, args.gbs, args.latency_us * 1e-6, tree)
            except SimulationUnavailable as exc:
                print(f"{nodes:>6}  {tree.describe():<66}  {exc}")
                continue
            print(f"{nodes:>6}  {tree.describe():<66}  {s.step_s * 1e6:>8.2f}us  {s.formula_step_s * 1e6:>7.2f}us  "
                  f"{s.ratio:>6.3f}  {s.wall_s:>7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
