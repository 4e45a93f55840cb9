"""A training run's shared flags are one frozen dataclass (core/train_flags.py) and each model family's options are
dataclasses of the same fields (core/model_flags.py): every benchmark's parser, the run-length and baseline flag sets,
the axes' flag arities, the flags that name files and what sizes a model come from them, a run's flags read back
typed, a flag declared twice is refused by name, and no product code reads argparse's private tables."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from hvdbench.core.axes import AXES, base_flags
from hvdbench.core.catalog import BENCHMARKS, get_benchmark
from hvdbench.core.exchanges import EXCHANGES
from hvdbench.core.run_flags import RUN_LENGTH, given_flags, measured, spelled, train_flags
from hvdbench.core.spec import RunSpec
from hvdbench.core.train_flags import TrainFlags, arities, benchmark_parser, declared, flag, flags_where
from hvdbench.launchers.job_shape import cpus_per_rank

REPO = Path(__file__).resolve().parents[1]
TRAINING = sorted(name for name, info in BENCHMARKS.items() if info.trains)


@pytest.mark.parametrize("benchmark", TRAINING)
def test_every_shared_flag_of_a_benchmark_is_its_declared_field(benchmark: str) -> None:
    info = BENCHMARKS[benchmark]
    parser = info.parser()
    mine = {name: f for name, f in declared().items() if info.framework in f.frameworks}
    assert mine and all(parser.declared[f.flag].dest == name for name, f in mine.items())
    if "--model-file" in parser.declared:  # custom: its required file given, everything else at its default
        return
    typed = train_flags(benchmark, ())
    assert isinstance(typed, TrainFlags) and typed.model == info.default_model
    defaults = {item.name: item.default for item in dataclasses.fields(TrainFlags)}
    assert {k: v for k, v in dataclasses.asdict(typed).items() if k not in ("model", "loader")} == \
        {k: v for k, v in defaults.items() if k not in ("model", "loader")}


def test_the_run_length_and_baseline_flags_are_what_the_declaration_marks() -> None:
    assert RUN_LENGTH == flags_where("length") == {"--steps": 1, "--target-ci": 1, "--max-steps": 1,
                                                   "--warmup-steps": 1}
    assert flags_where("baseline") == {"--independent": 0} and set(flags_where("baseline")) <= set(base_flags())
    args = ("--model", "resnet20", "--steps", "80", "--warmup-steps=2", "--batch-size", "16")
    assert measured("cifar10", args) == measured("cifar10", ("--batch-size=16",)) == "batch_size=16"


def test_every_axis_flag_is_a_declared_shared_flag_of_its_arity() -> None:
    by_flag = {f.flag: f.arity for f in declared().values()}
    for axis in AXES.values():
        assert all(by_flag[flag] == arity for flag, arity in axis.flags.items()), axis.name
    with pytest.raises(ValueError, match="not a shared flag .*--batch"):
        arities("--batch")


@dataclass(frozen=True)
class Steps:
    steps: int = flag(3, "--steps", "a model option named as a shared flag", parse=int)


@dataclass(frozen=True)
class Width:
    width: int = flag(8, "--width", "a width", parse=int)


@dataclass(frozen=True)
class OtherWidth:
    width: int = flag(16, "--width", "another family's width", parse=int)


def test_a_model_option_that_repeats_a_shared_flag_or_another_declarations_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"model option --steps \(Steps\) is already a shared flag"):
        benchmark_parser("toy", ("m",), "m", "samples", (Steps,))
    with pytest.raises(ValueError, match=r"model option --width \(OtherWidth\) is already Width's"):
        benchmark_parser("toy", ("m",), "m", "samples", (Width, OtherWidth))
    assert benchmark_parser("toy", ("m",), "m", "samples", (Width,)).parse_args(["--width", "4"]).width == 4


def test_every_model_option_comes_from_its_declarations_and_its_path_flags_from_theirs() -> None:
    """A benchmark's parser holds the shared flags, its declarations' fields and the exchanges' options, nothing
    else; the flags it makes absolute are its declarations' path fields; its sizing is its declarations' fields."""
    exchange = {option.flag for kind in EXCHANGES.values() for option in kind.options}
    for info in BENCHMARKS.values():
        if info.own_flags is not None:  # collectives, p2p: one declaration, their parser's every flag
            own = {item.metadata["flag"].flag for item in dataclasses.fields(info.own_flags)}
            assert set(info.parser().declared) - {"-h", "--help"} == own, info.name
            continue
        own = {item.metadata["flag"].flag for cls in info.options for item in dataclasses.fields(cls)}
        shared = {f.flag for f in declared().values() if info.framework in f.frameworks}
        assert set(info.parser().declared) - {"-h", "--help"} == shared | own | exchange, info.name
        assert set(info.paths) == {item.metadata["flag"].flag for cls in (TrainFlags, *info.options)
                                   for item in dataclasses.fields(cls) if item.metadata["flag"].path}
    assert get_benchmark("custom").paths == ("--data-dir", "--model-file")
    assert get_benchmark("collectives").paths == ("--like",)
    flags = get_benchmark("mlp").parser().parse_args([])
    assert get_benchmark("mlp").sizing(flags) == {"model": "mlp", "batch_size": 32, "seed": 1234, "mlp_input": 1024,
                                                  "mlp_widths": [4096, 4096], "mlp_classes": 10}


def test_a_runs_flags_read_typed_however_spelled() -> None:
    args = ["--batch=64", "--mod", "resnet32", "--no-cudnn-autotune", "--data=loader", "--loader-w", "3"]
    assert given_flags("cifar10", args) == {"batch_size": 64, "model": "resnet32", "cudnn_autotune": False,
                                            "data": "loader", "loader_workers": 3}
    assert spelled("cifar10", args) == ("--batch-size", "64", "--model", "resnet32", "--no-cudnn-autotune", "--data",
                                        "loader", "--loader-workers", "3")
    spec = RunSpec(benchmark="cifar10", args=tuple(args), np=2)
    assert spec.train is not None and spec.train.batch_size == 64 and not spec.train.cudnn_autotune
    assert cpus_per_rank(spec) == 4  # the rank and its three loader workers
    assert RunSpec(benchmark="comm", args=("--op", "allreduce"), np=2).train is None  # collectives do not train


def test_no_product_code_reads_argparses_private_tables() -> None:
    private = re.compile(r"\._actions\b|_option_string_actions|_SubParsersAction|_group_actions")
    found = [f"{path.relative_to(REPO)}:{n}" for folder in ("core", "readers", "suite", "launchers", "analysis",
                                                            "workflows", "cli")
             for path in (REPO / folder).rglob("*.py")
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if private.search(line)]
    assert not found, found
