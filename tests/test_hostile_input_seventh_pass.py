"""The seventh hostile pass, each class fixed at its root: --until-decided run again under another rule is refused (the
looks made spent its error) and --budget is bounded before the first run; a sweep file's budget goes with the command
line's --until-decided; the README's submit --dry-run plans from a laptop with no SLURM at all; numbers without
bounds (--timeout inf, --max-epochs 1e308, --expect-busbw 1e308) are one line; two spellings of the same flags and
values are one configuration; the pyxis dry run shows the step the allocation starts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, hvdbench_exe
from hvdbench.cli import main

pytestmark = pytest.mark.bad_input


def _refused(argv: list[str], said: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1, err


def test_until_decided_again_under_another_rule_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hvdbench.workflows.until_decided import RECORD, _same_rule
    from hvdbench.core.errors import UsageError
    from hvdbench.launchers.sweep import Sweep

    root = tmp_path / "r"
    root.mkdir()
    looks = [{"label": "mlp", "looks": [{"runs": 3, "finding": "undecided"}]}]
    (root / RECORD).write_text(json.dumps({"margin_pct": 2.0, "budget": 3, "against": "", "configurations": looks}))
    same = Sweep(path=Path("s.yaml"), name="s", until_decided=True, budget=3)
    _same_rule(root, same)  # the same rule: a stopped command goes on
    with pytest.raises(UsageError, match=r"looked at under another rule \(budget 3 \(now 10\)\)"):
        _same_rule(root, Sweep(path=Path("s.yaml"), name="s", until_decided=True, budget=10))
    with pytest.raises(UsageError, match="margin 2.0 \\(now 5.0\\)"):
        _same_rule(root, Sweep(path=Path("s.yaml"), name="s", until_decided=True, budget=3, margin=5.0))
    (root / RECORD).write_text("{not json")
    with pytest.raises(UsageError, match="not a record of the looks hvdbench made"):
        _same_rule(root, Sweep(path=Path("s.yaml"), name="s", until_decided=True, budget=3))


@pytest.mark.parametrize("budget, said", [("1000000", "--budget: 1,000,000 runs a configuration: more than a "
                                                       "sequential rule with a look every round is planned for (200 "
                                                       "at most"), ("2", "--budget: 2 runs a configuration is fewer")])
def test_a_budget_is_bounded_before_any_run(tmp_path: Path, budget: str, said: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    _refused(["run", "mlp", "--np", "1", "--until-decided", "--budget", budget, "-o", str(tmp_path / "r"), "--dry-run"],
             said, capsys)
    assert not (tmp_path / "r").exists()


def test_a_sweep_files_budget_goes_with_the_command_lines_until_decided(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    sweep = tmp_path / "s.yaml"
    sweep.write_text("name: s\nbudget: 6\nworkloads: [{benchmark: mlp}]\naxes: {np: [1]}\n")
    assert main(["sweep", str(sweep), "--until-decided", "--dry-run", "-o", str(tmp_path / "r")]) == 0
    assert "until decided or 6 runs" in capsys.readouterr().out
    _refused(["sweep", str(sweep), "--dry-run", "-o", str(tmp_path / "r")],
             "budget: applies with until_decided (a fixed plan runs its repeats)", capsys)
    _refused(["submit", str(sweep), "--dry-run", "-o", str(tmp_path / "r")], "budget: applies with until_decided",
             capsys)


def test_the_readmes_submit_dry_run_plans_from_a_machine_without_slurm(tmp_path: Path) -> None:
    """No srun, sbatch, sinfo or squeue on PATH (a laptop): the job scripts are printed as sbatch would get them."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("sh", "bash", "env", "uname", "nproc"):
        if shutil.which(tool):
            os.symlink(shutil.which(tool), bin_dir / tool)  # type: ignore[arg-type]
    env = {"HOME": str(tmp_path), "PATH": str(bin_dir), "HVDBENCH_STORE": "off"}
    proc = subprocess.run([hvdbench_exe(), "submit", str(REPO / "launchers" / "sweeps" / "gpu-node-2.yaml"),
                           "--output", str(tmp_path / "cluster"), "--dry-run"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "#SBATCH --nodes=1" in proc.stdout and "internal error" not in proc.stderr
    assert "sinfo could not say what the partition's nodes hold" in proc.stdout


@pytest.mark.parametrize("argv, said", [
    (["fabric", "--timeout", "inf"], "--timeout"),
    (["fabric", "--timeout", "1e300"], "--timeout"),
    (["fabric", "--nccl-tests", "x", "--hosts", "a,b", "--expect-busbw", "1e308"], "--expect-busbw"),
    (["run", "fashion_mnist", "--np", "1", "--dry-run", "--", "--target-accuracy", "0.8", "--max-epochs", "1e308"],
     "--max-epochs"),
])
def test_numbers_without_bounds_are_one_line(tmp_path: Path, argv: list[str], said: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    os.chdir(tmp_path)
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and said in err and "internal error" not in err and err.count("\n") == 1, err


SPELLINGS = (["--model", "resnet20", "--batch-size", "16", "--lr", "0.01"],
             ["--batch-size", "16", "--model=resnet20", "--lr", "1e-2"],
             ["--lr=0.010", "--model", "resnet20", "--batch-size=16"],
             ["--model", "resnet20", "--batch-size", "16"])  # 0.01 is cifar10's --lr default, resnet20 its --model


def test_two_spellings_of_the_same_values_are_one_configuration(tmp_path: Path) -> None:
    """--lr 0.01, --lr 1e-2, --lr=0.010 and no --lr (its default), --model=resnet20 first or last: one configuration
    of four repeats in the report, and another system's runs of it, however spelled, paired with them."""
    import numpy as np
    import pandas as pd

    from conftest import write_run
    from hvdbench.core.spec import RunSpec

    rng = np.random.default_rng(3)
    for system, speed in (("dgx-a", 1.0), ("dgx-b", 1.3)):
        for repeat, args in enumerate(SPELLINGS if system == "dgx-a" else SPELLINGS[::-1]):
            spec = RunSpec(benchmark="cifar10", args=tuple(args), np=1, repeat=repeat, system=system)
            write_run(tmp_path / system, spec, [list(rng.uniform(0.1, 0.11, 30) / speed)])
    assert main(["compare", str(tmp_path / "dgx-a"), str(tmp_path / "dgx-b"), "-o", str(tmp_path / "out"),
                 "--store", "off"]) == 0
    table = pd.read_csv(tmp_path / "out" / "scaling.csv")
    assert sorted(table["repeats"]) == [4, 4]  # one configuration a system, four spellings its repeats
    compared = pd.read_csv(tmp_path / "out" / "compare.csv")
    assert len(compared) == 2 and compared.loc[compared["system"] == "dgx-b", "relative"].iloc[0] == \
        pytest.approx(1.3, rel=0.05)
    assert "measured on one system only" not in (tmp_path / "out" / "report.md").read_text().lower()


def test_the_pyxis_dry_run_shows_the_step_the_allocation_starts(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    sweep = REPO / "tests" / "fixtures" / "pyxis-submit" / "sweep.yaml"
    assert main(["submit", str(sweep), "--dry-run", "-o", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "'--container-image=nvcr.io#nvidia/pytorch:24.05-py3'" in out
    assert out.count("the allocation's step runs") == 3
    assert "srun --mpi=pmix --nodes=2 --ntasks=16 --ntasks-per-node=8" in out



def test_an_nccl_ib_hca_exclusion_that_leaves_only_down_ports_is_flagged() -> None:
    """``^`` excludes what follows: flagged where no active port is left (every port gone, or only down ones left);
    an exclusion that leaves an active port, and an exclusion of the down port itself, say nothing."""
    from hvdbench.core.hca import named_down, parse_hca_ports

    ports = parse_hca_ports((Path(__file__).parent / "fixtures" / "nccl" / "ibstat-roce200-ethernet-and-down.txt")
                            .read_text())  # mlx5_0, mlx5_1 active; mlx5_10 down
    assert named_down("^=mlx5_0,mlx5_1", ports) == [
        "NCCL_IB_HCA ^=mlx5_0,mlx5_1 leaves only ports that are not active (mlx5_10 port 1 down)"]
    assert named_down("^mlx5", ports) == ["NCCL_IB_HCA ^mlx5 leaves no HCA port of this node"]
    assert named_down("^mlx5_0,mlx5_1", ports) == ["NCCL_IB_HCA ^mlx5_0,mlx5_1 leaves no HCA port of this node"]
    assert named_down("^mlx5_10", ports) == [] and named_down("^=mlx5_0", ports) == []


def test_corrupt_files_are_said_for_a_pipeline_alone_and_on_the_terminal() -> None:
    """A --data-only run that met corrupt files leads its data path row with the damage and stands in the banner; the
    terminal's closing notes say it for either kind of run, with the first file named, escaped like every note."""
    import pandas as pd

    from hvdbench.analysis.report.output import _damaged
    from hvdbench.analysis.tables.datapath import damage_banner, datapath_table

    base = {"system": "s", "framework": "pytorch", "benchmark": "imagenet", "model": "resnet50", "inputs": "",
            "nodes": 1, "np": 2, "repeats": 3, "unit": "images"}
    table = pd.DataFrame([{**base, "args": "--model resnet50 --data files --data-dir /d --data-only", "data": "files",
                           "runs": "p1,p2,p3", "throughput": 400.0}])
    runs = pd.DataFrame([{"run_id": f"p{i}", "status": "ok", "data_only": True, "loader_workers": 2,
                          "data_layout": None, "data_loader": None, "data_corrupt": 4, "data_read": 996,
                          "data_named": "/d/train/n1/\x1b[2J3.JPEG: corrupt"} for i in (1, 2, 3)])
    [row] = datapath_table(table, runs, {}).itertuples()
    assert row.verdict.startswith("damaged: 12 of 3,000 samples read were corrupt or vanished") and row.damaged == 12
    assert "not judged: the pipeline alone gives 200.0/s a rank" in row.verdict
    assert damage_banner(datapath_table(table, runs, {}))[0].startswith("s imagenet resnet50 at 2 rank(s) met 12")
    said = _damaged(runs)
    assert said is not None and said.startswith("12 corrupt or vanished sample(s) met reading files in 3 run(s) "
                                                "(first: /d/train/n1/")
    from hvdbench.core.validate import inert

    assert "\x1b" not in inert(said)  # terminal_text passes every note through inert()
    assert _damaged(runs.assign(data_corrupt=0)) is None and _damaged(runs.drop(columns="data_corrupt")) is None


def test_a_socket_run_says_no_gpudirect_and_nccls_own_no_device_line() -> None:
    """Over TCP no GPUDirect RDMA is possible: gdr is False, never unknown; where NCCL said "NET/IB : No device found"
    the warning quotes that, never "though an RDMA device is there"."""
    from hvdbench.readers.nccl_log import parse_nccl_log

    fabric = parse_nccl_log([
        "node1:4242:4242 [0] NCCL INFO NET/IB : No device found.",
        "node1:4242:4242 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.1.1<0>",
        "node1:4242:4242 [0] NCCL INFO Using network Socket",
        "NCCL version 2.21.5+cuda12.4",
        "node1:4242:4290 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0"])
    assert fabric.network == "Socket" and fabric.gdr is False
    [warning] = fabric.warnings
    assert 'NCCL found no InfiniBand/RoCE device it could use (NCCL\'s own line: "NET/IB : No device found")' in warning
    assert "RDMA device is there" not in warning


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
