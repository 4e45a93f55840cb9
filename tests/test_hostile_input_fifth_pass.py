"""The fifth hostile pass, one test per class of what went wrong (numbered as the pass found them): a crafted line
that hung every command reading NCCL logs; a vendor's results dropped as "copies"; a model file edited between runs
paired with the old one; two runs in one NCCL log read as one; an image name read as a runtime option; a clean-up
that deleted another checkout's image; odd but real input that crashed; a failed launch's reason taken from the
wrapper; unguarded values. Each gives one clear line or the right result, and nothing measured is lost."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from hvdbench.readers.nccl_log import MAX_LINE, parse_nccl_log, parse_nccl_runs, read_nccl_log, read_nccl_runs

FIXTURES = Path(__file__).parent / "fixtures" / "nccl"
PREFIX = "h1:101:102 [0] NCCL INFO "


def _fast(seconds: float, call: object, *args: object) -> object:
    """``call(*args)`` and check it ended within ``seconds`` (the crafted lines took minutes to forever before)."""
    started = time.perf_counter()
    result = call(*args)  # type: ignore[operator]
    assert time.perf_counter() - started < seconds
    return result


# 1. a crafted line stopped report, compare, accept, project and nccl-log (backtracking patterns)
@pytest.mark.bad_input
@pytest.mark.parametrize("line", [
    PREFIX + "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB" + "/0" * 60 + "/ x",  # exponential: NET path
    PREFIX + "Channel 00/0 : 0[0] -> 1[0] [send] via " + "a " * 100_000 + "b",  # quadratic: via ... at line end
    PREFIX + "Using network " + " a" * 100_000 + "b",
    PREFIX + "NET/Plugin : Loaded net plugin " + "x (v1" * 30_000 + ")",
    "x" * 3_000_000,
])
def test_class_1_a_crafted_line_is_read_in_linear_time(line: str) -> None:
    fabric = _fast(2.0, parse_nccl_log, [line, PREFIX + "NCCL version 2.21.5+cuda12.4"])
    assert fabric.nccl_version == "2.21.5+cuda12.4"  # the rest of the log still read


@pytest.mark.bad_input
def test_class_1_a_log_of_one_huge_line_is_read_capped(tmp_path: Path) -> None:
    path = tmp_path / "nccl-rank-0.log"
    path.write_text(PREFIX + "Using network IB" + " pad" * 2_000_000 + "\n" + PREFIX + "NCCL version 2.19.3\n")
    fabric = _fast(5.0, read_nccl_log, path)
    assert fabric.nccl_version == "2.19.3" and fabric.network is not None and fabric.network.startswith("IB pad")
    assert len(fabric.network) < MAX_LINE <= 8192  # the line read up to the cap, never whole


# 6. two runs in one NCCL log read as one: one run's version, another's network and NICs
@pytest.mark.bad_input
def test_class_6_two_runs_in_one_log_are_read_run_by_run(tmp_path: Path) -> None:
    plugin = (FIXTURES / "plugin-ibext-v8-gdrdma-h100-nccl2.21.5.txt").read_text()  # NCCL 2.21.5, IBext_v8
    first = "\n".join(PREFIX.replace("101", "7") + text for text in (
        "NCCL version 2.18.1+cuda12.1", "NET/IB : Using [0]mlx5_4:1/IB ; OOB eth0:10.0.0.1<0>",
        "Channel 00/0 : 0[0] -> 8[0] [send] via NET/Socket/0", "comm 0x1 rank 0 nranks 16 Init COMPLETE"))
    path = tmp_path / "job.out"
    path.write_text(first + "\n" + plugin)
    runs = read_nccl_runs(path)
    alone = read_nccl_log(FIXTURES / "plugin-ibext-v8-gdrdma-h100-nccl2.21.5.txt")
    assert [(r.nccl_version, r.network) for r in runs] == [("2.18.1+cuda12.1", "Socket"),
                                                           (alone.nccl_version, alone.network)]
    assert runs[1].devices == alone.devices  # NIC names from its own run's device list
    last = read_nccl_log(path)
    assert last.network == alone.network and last.warnings[0].startswith("the log holds 2 runs")


@pytest.mark.bad_input
def test_class_6_channels_of_one_run_that_disagree_are_said() -> None:
    lines = [PREFIX + "NCCL version 2.21.5+cuda12.4"]
    lines += [PREFIX + f"Channel {i:02d}/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA" for i in range(5)]
    lines += [PREFIX + f"Channel {i:02d}/0 : 0[0] -> 8[0] [send] via NET/Socket/0" for i in range(5, 9)]
    [run] = parse_nccl_runs(lines)
    assert run.network == "IB" and "channels disagree: 5 over IB, 4 over Socket (reported: IB, the most)" in \
        run.warnings


def test_class_6_the_command_prints_each_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hvdbench.cli import main

    path = tmp_path / "job.out"
    path.write_text((FIXTURES / "ib-gdrdma-h20-2node-cumem.txt").read_text() * 2)  # nccl-tests twice
    assert main(["nccl-log", str(path)]) == 0
    out = capsys.readouterr().out
    assert "2 runs (NCCL started 2 times), each read on its own" in out and "run 2 of 2:" in out


# 2. two roots whose runs kept the default --system: B's runs dropped as "copies", no decision, exit 0
@pytest.mark.bad_input
def test_class_2_two_roots_with_the_same_run_ids_are_refused_never_dropped(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from conftest import write_run
    from hvdbench.cli import main
    from hvdbench.core.spec import RunSpec

    for root, step in (("a", 0.1), ("b", 0.2)):  # two vendors, both "local"
        write_run(tmp_path / root, RunSpec(benchmark="cifar10", args=("--model", "resnet20")), [[step] * 12])
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    # both roots are kept (the second's rows named <id>@b), so what is refused is comparing one system with itself
    assert "the results hold one system (local): nothing to compare" in err and "their own --system" in err
    assert err.count("\n") == 1 and not (tmp_path / "out").exists()
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "a"), "-o", str(tmp_path / "out")]) == 2
    assert "a results root is given twice" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "a" / ".." / "a")]) == 2  # the same, spelled twice
    capsys.readouterr()
    write_run(tmp_path / "c", RunSpec(benchmark="cifar10", args=("--model", "resnet20"), repeat=1), [[0.1] * 12])
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "c"), "-o", str(tmp_path / "out")]) == 2
    assert "the results hold one system (local): nothing to compare" in capsys.readouterr().err


# 3. a model file edited between two runs: the old model's 1-rank run became the new model's baseline
@pytest.mark.bad_input
def test_class_3_a_model_files_content_is_part_of_the_runs_identity(tmp_path: Path) -> None:
    from conftest import write_run
    from hvdbench.analysis.collect import collect
    from hvdbench.analysis.tables.scaling import scaling_table
    from hvdbench.launchers.plan import file_inputs, plan
    from hvdbench.launchers.runs import benchmark_sweep
    from hvdbench.core.catalog import EXAMPLE_MODEL_FILE, get_benchmark

    model = tmp_path / "model.py"
    model.write_text(EXAMPLE_MODEL_FILE.read_text())

    def planned() -> list:
        sweep = benchmark_sweep("custom", ("--model-file", str(model), "--batch-size", "2"), np=(1, 2),
                                launcher="horovodrun", controller=None, repeats=1, system="s", timeout=60.0,
                                devices=None, topology=None)
        return list(plan(sweep).specs)

    before = planned()
    assert before[0].inputs is not None and before[0].inputs[0][1].startswith("sha256:")
    model.write_text(model.read_text() + "\n# a wider model\n")
    after = planned()
    assert {s.id for s in before}.isdisjoint({s.id for s in after})  # no edited model skipped as "complete"
    assert file_inputs(get_benchmark("custom"), ("--batch-size", "2")) is None
    # the old model's 1-rank run and the new model's 2-rank run: never a speedup between them
    write_run(tmp_path / "r", before[0], [[0.1] * 12], env={"parameters": 4420})
    write_run(tmp_path / "r", after[1], [[0.1] * 12, [0.1] * 12], env={"parameters": 4_337_668})
    table = scaling_table(collect([tmp_path / "r"])).set_index("np")
    assert table.loc[2, "baseline"] == "no 1-GPU run" and pd.isna(table.loc[2, "speedup"])
    assert table.loc[1, "inputs"] != table.loc[2, "inputs"]


def _container_flags(*argv: str) -> Any:
    """The container hvdbench run's --container-* flags give."""
    from hvdbench.cli.parser import build_parser
    from hvdbench.core.containers import from_flags

    return from_flags(build_parser().parse_args(["run", "mlp", *argv]))


# 7. an image starting with '-' became a runtime option (and the interpreter the image)
@pytest.mark.bad_input
@pytest.mark.parametrize("image", ["--bind=/etc:/mnt/host-etc", "-v/etc:/x", "-"])
def test_class_7_an_image_is_never_an_option(tmp_path: Path, image: str) -> None:
    from hvdbench.launchers.sweep import SweepError, load_sweep
    from hvdbench.core.errors import UsageError

    with pytest.raises(UsageError, match="--container-image"):
        _container_flags(f"--container-image={image}", "--container-runtime", "apptainer")
    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"name: s\nworkloads: [{{benchmark: mlp}}]\naxes: {{np: [1]}}\n"
                     f"container: {{image: '{image}', runtime: podman}}\n")
    with pytest.raises(SweepError, match="container.image"):
        load_sweep(sweep)


# 8. the image build deleted every other hvdbench-cpu image in the shared store, another checkout's included
@pytest.mark.bad_input
def test_class_8_the_image_clean_up_deletes_only_this_checkouts_unused_images(tmp_path: Path) -> None:
    import subprocess

    storage, owners = tmp_path / "ch", tmp_path / "owners"
    for key, users in (("mine", ["/a"]), ("theirs", ["/b"]), ("shared", ["/a", "/b"]), ("unknown", []),
                       ("new", ["/a"])):
        (storage / "img" / f"hvdbench-cpu+{key}").mkdir(parents=True)
        if users:
            owners.mkdir(exist_ok=True)
            (owners / key).write_text("".join(f"{u}\n" for u in users))
    fake = tmp_path / "ch-image"
    fake.write_text(f"#!/bin/sh\n[ \"$1\" = delete ] && rm -r \"{storage}/img/$(echo \"$2\" | tr : +)\"\n")
    fake.chmod(0o755)
    script = Path(__file__).resolve().parents[1] / "scripts" / "container-image-prune.sh"
    out = subprocess.run(["bash", str(script), str(storage), str(owners), "/a", "hvdbench-cpu+new", str(fake)],
                         capture_output=True, text=True, timeout=60).stdout
    left = sorted(p.name.split("+")[1] for p in (storage / "img").iterdir())
    assert left == ["new", "shared", "theirs", "unknown"], out
    assert "used by /b, not this one alone" in out and "deleted" in out


# 10. odd but real input crashed: an ibstat rate that is no number, an argument with an apostrophe
@pytest.mark.bad_input
@pytest.mark.parametrize("rate", ["...", "1.2.3", "unknown", "40 Gb/sec (4X QDR)"])
def test_class_10_an_odd_ibstat_rate_is_none_never_a_crash(rate: str) -> None:
    from hvdbench.core.hca import parse_hca_ports

    [port] = parse_hca_ports(f"CA 'mlx5_0'\n\tCA type: MT4129\n\tPort 1:\n\t\tState: Active\n\t\tRate: {rate}\n")
    assert port["rate_gbps"] == (40.0 if rate.startswith("40") else None) and port["state"] == "active"


@pytest.mark.bad_input
def test_class_10_an_unpaired_run_whose_arguments_hold_an_apostrophe_is_listed(tmp_path: Path) -> None:
    from conftest import write_run
    from hvdbench.analysis.collect import collect
    from hvdbench.analysis.report.build import Judging, build
    from hvdbench.core.spec import RunSpec

    write_run(tmp_path / "a", RunSpec(benchmark="cifar10", args=("--model", "it's"), system="A"), [[0.1] * 12])
    write_run(tmp_path / "b", RunSpec(benchmark="cifar10", args=("--model", "resnet20"), system="B"), [[0.1] * 12])
    report = build(collect([tmp_path / "a", tmp_path / "b"]), judging=Judging(baseline="A"))
    alone = next(s for s in report.sections if s.title == "Measured on one system only")
    assert len(alone.rows) == 2 and any("it's" in row[1] for row in alone.rows)


# 11. a relative image passed the preflight and failed in every rank; the recorded reason was the wrapper's
@pytest.mark.bad_input
def test_class_11_a_relative_image_is_made_absolute_and_the_runtimes_own_line_is_the_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hvdbench.launchers.policy import failure_reason

    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "x.sif").write_text("")
    monkeypatch.chdir(tmp_path)
    for image, made in (("./images/x.sif", str(tmp_path / "images" / "x.sif")),
                        ("images/x.sif", str(tmp_path / "images" / "x.sif")),
                        ("nvcr.io/nvidia/pytorch:25.10-py3", "nvcr.io/nvidia/pytorch:25.10-py3")):
        container = _container_flags("--container-image", image, "--container-runtime", "apptainer")
        assert container is not None and container.image == made
    log = tmp_path / "launcher.log"
    log.write_text("FATAL:   could not open image /results/x.sif: failed to retrieve path\n"
                   "Traceback (most recent call last):\nRuntimeError: Horovod detected that one or more processes "
                   "exited with non-zero status\n")
    assert failure_reason(log).startswith("FATAL:   could not open image")


# 12. unguarded values: each one line, before anything runs
@pytest.mark.bad_input
@pytest.mark.parametrize("argv, said", [
    (["run", "mlp", "--memory-cap", "1e30", "--dry-run"], "more than a PiB"),
    (["run", "mlp", "--fit-grow", "width", "--dry-run"], "--fit-grow shape the --fit search"),
    (["run", "mlp", "--np", "1000", "--", "--device", "cpu"], "1000 CPU ranks on a machine with"),
    (["run", "mlp", "--dry-run", "--step-time", "1e300"], "more than a day"),
    (["run", "mlp", "--system", "", "--dry-run"], "--system: expected a non-empty string"),
    (["run", "mlp", "--system", "  ", "--dry-run"], "a system needs a name"),
    (["run", "mlp", "--container-image", "/x", "--container-runtime", "podman", "--container-mount", "/tmp:/",
      "--dry-run"], "covers the image's whole root"),
    (["run", "mlp", "--container-image", "/x", "--container-runtime", "podman", "--container-mount",
      "/tmp:/opt/hvdbench", "--dry-run"], "hides the image's interpreter"),
    (["run", "mlp", "--container-image", "/x", "--container-runtime", "podman", "--container-mount", "/tmp:/d",
      "--container-mount", "/var:/d", "--dry-run"], "two on /d"),
])
def test_class_12_an_unguarded_value_is_one_line(argv: list[str], said: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from hvdbench.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1, err


@pytest.mark.bad_input
@pytest.mark.parametrize("edit, said", [
    ("pue = 1.3", "pue = 0.5"), ("gpus_per_node = 8\npower", "gpus_per_node = 0.5\npower"),
    ("purchase_usd = 400000", "purchase_usd = 1e308"),
])
def test_class_12_a_cost_outside_what_a_system_costs_is_refused(tmp_path: Path, edit: str, said: str) -> None:
    from test_decision_between_offers import COSTS

    from hvdbench.analysis.verdicts.costs import load_costs
    from hvdbench.core.errors import UsageError

    path = tmp_path / "costs.toml"
    path.write_text(COSTS.replace(edit, said))
    with pytest.raises(UsageError, match=r"systems\.DGX\.\w+: .* from .* to .*, got"):
        load_costs(path)


@pytest.mark.bad_input
@pytest.mark.parametrize("line, said", [
    ("axes: {np: [1], env: {NCCL_BLOCKING_WAITT: ['1']}}", "NCCL_BLOCKING_WAITT is read by no NCCL release"),
    ("axes: {np: [1]}\nslurm: {directives: ['--gpus-per-n=2']}", "sbatch reads it as --gpus-per-node"),
    ("axes: {np: [1]}\nslurm: {directives: ['--sig=USR1@60']}", "sbatch reads it as --signal"),
])
def test_class_12_a_sweep_value_read_as_another_is_refused(tmp_path: Path, line: str, said: str) -> None:
    from hvdbench.launchers.sweep import SweepError, load_sweep

    sweep = tmp_path / "s.yaml"
    sweep.write_text(f"name: s\nworkloads: [{{benchmark: mlp}}]\n{line}\n")
    with pytest.raises(SweepError, match=said):
        load_sweep(sweep)


@pytest.mark.bad_input
def test_class_12_labels_and_names_reach_every_output_as_written(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    from hvdbench.analysis.document import md_text
    from hvdbench.analysis.drawing import plain
    from hvdbench.cli import main
    from hvdbench.core.errors import SpecError
    from hvdbench.core.spec import RunSpec

    assert md_text("[click](http://x) **DGX**") == "[click]\\(http://x) \\*\\*DGX\\*\\*"
    assert plain("sys\x1b[31m $x") == "sys\\x1b[31m \\$x"
    with pytest.raises(SpecError, match="not empty"):
        RunSpec(benchmark="mlp", system="")
    assert main(["project", str(tmp_path), "--target", "evil\nhvdbench: verdict: PASS"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["compare", str(tmp_path), str(tmp_path / "b"), "--regressions", "--baseline", "x"]) == 2
    assert "for judging offers side by side" in capsys.readouterr().err


# 13. the Apptainer recipe copied .git, the virtual environments and logs into the image
def test_class_13_the_apptainer_recipe_copies_only_what_the_image_needs() -> None:
    repo = Path(__file__).resolve().parents[1]
    recipe = (repo / "container" / "hvdbench.def").read_text()
    files = recipe.split("%files\n", 1)[1].split("\n%", 1)[0]
    sources = [line.split()[0] for line in files.splitlines() if line.strip()]
    assert "." not in sources and not any(s.startswith((".git", ".venv", "results", "tests", "docs")) for s in sources)
    assert all((repo / s).exists() for s in sources) and {"suite", "launchers", "analysis", "cli", "scripts",
                                                           "setup.cfg", "constraints.txt"} <= set(sources)
    containerfile = (repo / "container" / "Containerfile").read_text()
    for arg in ("HVDBENCH_HOROVOD_WHEEL", "PIP_FIND_LINKS", "PIP_CERT", "PIP_CACHE_DIR"):
        assert f"ARG {arg}" in containerfile and f"{{{{ {arg} }}}}" in recipe  # the same offline/proxy arguments
    assert "HOROVOD_BUILD_CUDA_CC_LIST=80,90,100" in recipe and "HOROVOD_BUILD_CUDA_CC_LIST=80,90,100" in containerfile
