"""The shipped GPU-node sweep, in two parts that each finish inside a 9-minute command on one H100
(launchers/sweeps/gpu-node-1.yaml, gpu-node-2.yaml), plans, and its runs are the CUDA paths its comment
promises: ResNet-50 at two batches in fp32 and amp, NHWC, torch.compile, host and DataLoader batches,
--breakdown, --profile, ResNet-56, GPT-2, translation and the fused-RNN speech model; over Gloo, so a node
without MPI runs it. Both parts write to one results root, so a part stopped halfway resumes and one report
covers both."""

from __future__ import annotations

from pathlib import Path

from hvdbench.launchers.plan import plan
from hvdbench.launchers.runs import load
from hvdbench.launchers.sweep import load_sweep

SWEEPS = Path(__file__).resolve().parents[1] / "launchers" / "sweeps"
PARTS = (SWEEPS / "gpu-node-1.yaml", SWEEPS / "gpu-node-2.yaml")


def _flag(args: tuple[str, ...], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def test_every_shipped_sweep_plans() -> None:
    """Each as it is meant to run: a file with a scheduler's block as submit plans it (the allocation's nodes are
    the hosts); the cluster examples put every rank in an image, one of each kind of runtime."""
    images = {}
    for path in sorted(SWEEPS.glob("*.yaml")):
        sweep = load_sweep(path)
        scheduled = "\nslurm:" in path.read_text() or "\npbs:" in path.read_text()
        assert plan(sweep, scheduled=scheduled).specs, path.name
        if sweep.container is not None:
            images[sweep.container.runtime] = path.name
    assert images == {"pyxis": "cluster-pyxis.yaml", "apptainer": "cluster-apptainer.yaml"}


def test_the_two_parts_share_one_root_and_no_run() -> None:
    planned = [load(part, None) for part in PARTS]
    assert {root for _, _, root in planned} == {Path("results/gpu-node")}
    ids = [{s.id for s in p.specs} for _, p, _ in planned]
    assert not ids[0] & ids[1]
    for sweep, p, _ in planned:
        assert sweep.timeout <= 300 and len(p.specs) <= 8  # a hung run cannot take the part past its 9 minutes


def test_the_gpu_node_sweep_runs_each_cuda_path_once() -> None:
    specs = [s for part in PARTS for s in plan(load_sweep(part)).specs]
    assert len(specs) == 14 and {s.controller for s in specs} == {"gloo"} and {s.np for s in specs} == {1}
    resnet50 = [s.args for s in specs if s.benchmark == "imagenet"]
    plain = {(_flag(a, "--batch-size"), _flag(a, "--precision")) for a in resnet50
             if not {"--channels-last", "--compile", "--breakdown", "--profile", "--data"} & set(a)}
    assert plain == {("64", "fp32"), ("64", "amp"), ("256", "fp32"), ("256", "amp")}
    variants = [a for a in resnet50 if _flag(a, "--batch-size") == "256" and _flag(a, "--precision") == "amp"]
    assert sum("--channels-last" in a and "--compile" not in a for a in variants) == 1
    assert sum("--compile" in a for a in variants) == 1
    assert sorted(_flag(a, "--data") for a in variants if "--data" in a) == ["host", "loader"]
    assert sum("--breakdown" in a for a in variants) == 1 and sum("--profile" in a for a in variants) == 1
    others = {s.benchmark: s.args for s in specs if s.benchmark != "imagenet"}
    assert set(others) == {"cifar10", "lm", "translation", "speech"}
    assert _flag(others["cifar10"], "--model") == "resnet56" and _flag(others["speech"], "--rnn-impl") == "fused"
    assert all(_flag(a, "--precision") == "amp" for a in others.values())
