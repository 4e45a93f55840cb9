"""Every way to exchange gradients (core/exchanges.py: horovod, ddp, fsdp and ps on PyTorch, horovod and mirrored
on TensorFlow) trains alike: on two CPU ranks each ends with equal parameters on both ranks, and all end with the
same parameters as each other (each averages the same gradients into the same SGD step), which no exchange that
dropped or double-counted a gradient could; every descriptor has its implementation. Combinations that cannot run
are one line before a rank starts; a sweep over exchanges plans one 1-rank baseline and one independent twin for all
of them; the rendezvous address is chosen as documented; FSDP shards the blocks a model is built from."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from torch import nn

from conftest import REPO, write_run
from hvdbench.analysis.collect import collect
from hvdbench.analysis.tables.system import params_alerts
from hvdbench.launchers.plan import plan
from hvdbench.launchers.sweep import load_sweep
from hvdbench.core.catalog import get_benchmark
from hvdbench.core.errors import UsageError
from hvdbench.core.exchanges import DEFAULT, EXCHANGES, offered
from hvdbench.core.records import read_records
from hvdbench.core.spec import RunSpec
from hvdbench.suite.exchange import IMPLEMENTATIONS, rendezvous_address, shard_units

MLP = ["--batch-size", "4", "--mlp-input", "32", "--mlp-widths", "64,64", "--warmup-steps", "1", "--steps", "3"]


def _train(log_dir: Path, env: dict, *extra: str, mpi: bool = False, torchrun: bool = False,
           script: str = "mlp.py") -> list[dict]:
    """Two ranks of the MLP under horovodrun (or torchrun: no Horovod); each rank's env and summary records."""
    launch = ([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", "--no-python"]
              if torchrun else ["horovodrun", "-np", "2", "-H", "localhost:2", "--mpi" if mpi else "--gloo"])
    proc = subprocess.run([*launch, sys.executable, str(REPO / "suite" / script), *MLP, *extra,
                           "--log-dir", str(log_dir)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = []
    for rank in (0, 1):
        records = read_records(log_dir / f"rank-{rank}.jsonl")
        out.append({"env": next(r for r in records if r["kind"] == "env"), "summary": records[-1]})
    return out


def test_every_exchange_descriptor_has_its_implementation_and_every_implementation_a_descriptor() -> None:
    """A new exchange is its descriptor (core/exchanges.py) and its implementation on each framework it names."""
    from hvdbench.suite.tfharness import STRATEGIES

    assert sorted(IMPLEMENTATIONS) == sorted(offered("pytorch"))
    assert sorted(STRATEGIES) == sorted(offered("tensorflow"))
    assert sorted(offered("pytorch") + offered("tensorflow")) == sorted([n for n, k in EXCHANGES.items()
                                                                         for _ in k.frameworks])


def test_the_docs_table_has_one_row_per_exchange() -> None:
    table = (REPO / "docs" / "benchmarks.md").read_text().split("| `--exchange` |", 1)[1].split("\n\n", 1)[0]
    assert [row.split("`")[1] for row in table.splitlines()[2:]] == list(EXCHANGES)


@pytest.mark.slow
def test_every_exchange_ends_with_the_same_parameters_on_every_rank(tmp_path: Path, hvd_env: dict) -> None:
    finals = {}
    for exchange in offered("pytorch"):
        ranks = _train(tmp_path / exchange, hvd_env, "--exchange", exchange)
        sums = [r["summary"]["param_checksum"] for r in ranks]
        assert sums[0] == pytest.approx(sums[1], rel=1e-9), exchange
        facts = ranks[0]["env"]["exchange"]
        assert facts["name"] == exchange and ranks[0]["env"]["flags"]["exchange"] == exchange
        if not EXCHANGES[exchange].needs_horovod:
            assert facts["backend"] == "gloo" and facts["rendezvous"].startswith("127.0.0.1:")
        finals[exchange] = sums[0]
    assert ranks[0]["env"]["exchange"]["ps_device"] == "cpu"  # a CPU run's parameter server is in host memory
    under_torchrun = _train(tmp_path / "torchrun-ddp", hvd_env, "--exchange", "ddp", torchrun=True)
    finals["ddp under torchrun"] = under_torchrun[0]["summary"]["param_checksum"]
    assert under_torchrun[1]["summary"]["param_checksum"] == pytest.approx(finals["ddp under torchrun"], rel=1e-9)
    assert under_torchrun[0]["env"]["horovod"] is None and under_torchrun[0]["env"]["torchrun"]["backend"] == "gloo"
    assert under_torchrun[0]["env"]["exchange"]["rendezvous"].endswith("(torchrun)")
    for exchange, value in finals.items():
        assert value == pytest.approx(finals[DEFAULT], rel=1e-6), exchange
    alone = _train(tmp_path / "independent", hvd_env, "--independent")
    assert alone[0]["env"]["exchange"] == {"name": "none"}
    assert alone[0]["summary"]["param_checksum"] != alone[1]["summary"]["param_checksum"]


@pytest.mark.slow
def test_tensorflows_mirrored_strategy_ends_where_horovod_does(tmp_path: Path, hvd_env: dict) -> None:
    """TensorFlow's MultiWorkerMirroredStrategy, one worker per rank, meeting through the run folder: equal
    parameters on both ranks, and the same as Horovod's exchange reaches from the same start and batches."""
    finals = {}
    for exchange in offered("tensorflow"):
        ranks = _train(tmp_path / exchange, hvd_env, "--exchange", exchange, script="tf_mlp.py")
        sums = [r["summary"]["param_checksum"] for r in ranks]
        assert sums[0] == pytest.approx(sums[1], rel=1e-9), exchange
        finals[exchange] = sums[0]
    facts = ranks[0]["env"]["exchange"]
    assert facts["name"] == "mirrored" and facts["backend"] == "ring" and facts["replicas"] == 2
    assert len(facts["workers"]) == 2 and all(w.startswith("127.0.0.1:") for w in facts["workers"])
    assert finals["mirrored"] == pytest.approx(finals["horovod"], rel=1e-6)


@pytest.mark.slow
@pytest.mark.mpi
def test_ddp_with_fp16_buckets_starts_from_what_mpi_gave_horovod(tmp_path: Path, hvd_env: dict) -> None:
    ranks = _train(tmp_path / "ddp-mpi", hvd_env, "--exchange", "ddp", "--fp16-allreduce", "--bucket-mb", "1",
                   mpi=True)
    assert ranks[0]["env"]["horovod"]["controller"] == "mpi"
    assert ranks[0]["env"]["exchange"]["bucket_mb"] == 1.0 and ranks[0]["env"]["exchange"]["fp16_buckets"] is True
    sums = [r["summary"]["param_checksum"] for r in ranks]
    assert sums[0] == pytest.approx(sums[1], rel=1e-9)


@pytest.mark.bad_input
@pytest.mark.parametrize("benchmark,args,says", [
    ("tf_mlp", ["--exchange", "fsdp"], "--exchange fsdp does not apply to tensorflow workloads; theirs: horovod, "
                                       "mirrored"),
    ("mlp", ["--exchange", "mirrored"], "--exchange mirrored does not apply to pytorch workloads"),
    ("tf_mlp", ["--exchange", "mirrored", "--fp16-allreduce"], "--fp16-allreduce with --exchange mirrored"),
    ("mlp", ["--exchange", "ps", "--fp16-allreduce"], "--fp16-allreduce with --exchange ps: the parameter server sums"),
    ("mlp", ["--exchange", "allgather"], "invalid choice: 'allgather'"),
    ("mlp", ["--exchange", "ddp", "--independent"], "would have nothing to exchange"),
    ("mlp", ["--bucket-mb", "10"], "--bucket-mb applies with --exchange ddp, not horovod"),
    ("mlp", ["--exchange", "fsdp", "--ps-device", "cpu"], "--ps-device applies with --exchange ps, not fsdp"),
    ("mlp", ["--exchange", "ddp", "--bucket-mb", "nan"], "not a finite number"),
])
def test_an_exchange_that_cannot_run_is_one_line_before_any_rank(benchmark: str, args: list[str], says: str) -> None:
    with pytest.raises(UsageError) as caught:
        get_benchmark(benchmark).check(args)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_defaults_of_an_exchange_are_set_and_recorded_with_its_flags() -> None:
    flags = get_benchmark("mlp").check(["--exchange", "ddp"])
    assert flags.bucket_mb == 25.0 and flags.ps_device is None
    assert get_benchmark("mlp").check(["--exchange", "ps"]).ps_device == "gpu"
    assert get_benchmark("mlp").check([]).exchange == "horovod"


def test_a_sweep_over_exchanges_plans_one_baseline_and_one_independent_twin_for_all(tmp_path: Path) -> None:
    path = tmp_path / "exchanges.yaml"
    path.write_text("""
name: exchanges
launcher: horovodrun
workloads:
  - {benchmark: mlp, args: [--steps, '4']}
  - {benchmark: tf_mlp, args: [--steps, '4']}
axes: {np: [2], independent: [false, true], exchange: [horovod, ddp, fsdp, ps], fp16_allreduce: [false, true]}
""")
    planned = plan(load_sweep(path))
    mlp = [s for s in planned.specs if s.benchmark == "mlp"]
    exchanged = [s for s in mlp if s.np == 2 and "--independent" not in s.args]
    assert len(exchanged) == 7  # 4 exchanges x 2 fp16 settings, less ps with fp16
    assert sum(1 for s in mlp if s.np == 2 and "--independent" in s.args) == 2  # one per fp16 setting
    baselines = [s for s in mlp if s.np == 1]
    assert baselines and all("--exchange" not in s.args for s in baselines)
    tf = [s for s in planned.specs if s.benchmark == "tf_mlp"]
    assert tf and all("--exchange" not in s.args for s in tf)
    assert any("exchange ps with fp16_allreduce" in note for note in planned.skipped)
    assert any("on tensorflow workloads: theirs are horovod, mirrored" in note for note in planned.skipped)


def test_the_ranks_meet_where_the_environment_says() -> None:
    assert rendezvous_address(False, {"MASTER_ADDR": "10.0.0.7"}) == "10.0.0.7"
    assert rendezvous_address(True, {}) == "127.0.0.1"
    assert rendezvous_address(False, {"HOROVOD_GLOO_IFACE": "lo"}) == "127.0.0.1"  # the named interface's address
    if not _hostname_resolves_beyond_loopback():
        with pytest.raises(UsageError, match="set MASTER_ADDR"):
            rendezvous_address(False, {"NCCL_SOCKET_IFNAME": "^docker0"})


def _hostname_resolves_beyond_loopback() -> bool:
    import socket

    try:
        return not socket.gethostbyname(socket.gethostname()).startswith("127.")
    except OSError:
        return False


def test_fsdp_shards_each_block_before_the_model() -> None:
    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Linear(4, 8)
            self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(8, 8), nn.ReLU()) for _ in range(3)])
            self.head = nn.Linear(8, 2)

    net = Net()
    # the blocks, last first: not embed or head, nor the layers inside a block
    assert [id(u) for u in shard_units(net)] == [id(b) for b in reversed(net.blocks)]
    layers = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    assert shard_units(layers) == [layers[2], layers[0]]  # a model that is itself a Sequential: its layers


def test_a_run_whose_ranks_end_with_different_parameters_is_called_out(tmp_path: Path) -> None:
    steps = [[0.1] * 8, [0.1] * 8]
    kept = write_run(tmp_path, RunSpec(benchmark="mlp", framework="pytorch", args=("--exchange", "ddp"), np=2),
                     steps, final=[{"param_checksum": 1.5}, {"param_checksum": 1.5}])
    split = write_run(tmp_path, RunSpec(benchmark="mlp", framework="pytorch", args=("--exchange", "ps"), np=2),
                      steps, final=[{"param_checksum": 1.5}, {"param_checksum": 1.25}])
    alone = write_run(tmp_path, RunSpec(benchmark="mlp", framework="pytorch", args=("--independent",), np=2),
                      steps, final=[{"param_checksum": 1.5}, {"param_checksum": 1.25}])
    runs = collect([tmp_path]).runs.set_index("run_id")
    assert bool(runs.loc[kept.name, "params_agree"])
    assert not bool(runs.loc[split.name, "params_agree"])
    assert runs.loc[alone.name, "params_agree"] is pd.NA  # independent replicas are meant to differ
    lines = params_alerts(runs.reset_index())
    assert len(lines) == 1 and split.name in lines[0] and "exchange ps" in lines[0]


def test_a_dry_run_says_the_node_hours_its_plan_may_hold(tmp_path: Path) -> None:
    from hvdbench.launchers.runs import describe_plan, local_executor

    sweep = load_sweep(REPO / "launchers" / "sweeps" / "exchanges.yaml")
    planned = plan(sweep)
    lines = list(describe_plan(planned, local_executor(sweep, tmp_path, resume=True), tmp_path))
    hours = len(planned.specs) * sweep.timeout / 3600  # one node each
    gpus = sum(s.np for s in planned.specs) * sweep.timeout / 3600  # a GPU a rank
    assert f"; node-hours: at most {hours:,.1f}, GPU-hours: at most {gpus:,.1f} (every run's nodes for its whole " \
        "15-minute limit" in lines[-1]
