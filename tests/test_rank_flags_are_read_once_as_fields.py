"""A run's flags are read by its benchmark's own parser, once, as typed fields: two spellings of the same flags
give the same job, the same axes, the same pairings and the same configuration in the report; arguments no parser
here reads fall back to their words."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from hvdbench.analysis.tables.datapath import _key
from hvdbench.core.axes import read_axes
from hvdbench.core.catalog import get_benchmark
from hvdbench.core.exchanges import EXCHANGES, Exchange, Option
from hvdbench.core.run_flags import flags_key, given_flags, run_flags, spelled
from hvdbench.core.spec import RunSpec
from hvdbench.launchers.job_shape import cpus_per_rank

SPACED = ("--data", "files", "--data-dir", "/d", "--loader-workers", "4", "--exchange", "ddp", "--bucket-mb", "8")
JOINED = ("--data=files", "--data-dir=/d", "--loader-workers=4", "--exchange=ddp", "--bucket-mb=8")


def _spec(args: tuple[str, ...]) -> RunSpec:
    return RunSpec("imagenet", "pytorch", args, np=2, launcher="torchrun")


def test_two_spellings_give_the_same_job_and_fields() -> None:
    spaced, joined = _spec(SPACED), _spec(JOINED)
    assert cpus_per_rank(spaced) == cpus_per_rank(joined) == 5  # the rank and its four workers
    assert dict(spaced.flags) == dict(joined.flags)
    assert spaced.flags["loader_workers"] == 4 and isinstance(spaced.flags["bucket_mb"], float)
    assert spaced.flags["batch_size"] == 32  # the benchmark's default filled in


def test_axes_read_from_arguments_are_typed_however_spelled() -> None:
    spaced = read_axes(None, SPACED, "pytorch", "imagenet")
    joined = read_axes(None, JOINED, "pytorch", "imagenet")
    assert spaced == joined
    assert spaced["loader_workers"] == 4 and spaced["data"] == "files" and spaced["exchange"] == "ddp"
    assert spaced["batch_size"] is None  # not given: the axis's "default", as before


def test_the_report_pairs_runs_however_their_flags_are_spelled() -> None:
    rows = pd.DataFrame({"benchmark": ["imagenet", "imagenet"], "args": [" ".join(SPACED), " ".join(JOINED)]})
    keys = {_key(row, {"--data": 1}) for _, row in rows.iterrows()}
    assert len(keys) == 1 and "data=" not in next(iter(keys))
    assert flags_key("imagenet", SPACED, {"--loader-workers": 1}) != flags_key("imagenet", SPACED)


def test_arguments_no_parser_reads_fall_back_to_their_words() -> None:
    assert run_flags("nccl-tests", ["-b", "8"]) == {}
    assert given_flags("imagenet", ["--data", "bogus"]) is None  # refused by its parser: not guessed
    assert flags_key("nccl-tests", ["-b", "8", "--data", "x"], {"--data": 1}) == "-b 8"
    assert read_axes(None, ["--batch-size=64"], "pytorch", "not-a-benchmark")["batch_size"] == 64


def test_a_whole_number_exchange_option_stays_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exchange's option declared ``kind=int`` reaches the rank as a whole number (8, not 8.0)."""
    every = Exchange("local_sgd", "replicas averaged every few steps", ("pytorch",),
                     options=(Option("sync_every", 8, "steps between two averagings", kind=int),))
    monkeypatch.setitem(EXCHANGES, "local_sgd", every)
    flags, _ = get_benchmark("mlp").parser().parse_known_args(["--exchange", "local_sgd", "--sync-every", "8"])
    assert flags.sync_every == 8 and isinstance(flags.sync_every, int)
    flags, _ = get_benchmark("mlp").parser().parse_known_args(["--exchange", "ddp", "--bucket-mb", "8"])
    assert isinstance(flags.bucket_mb, float)


def test_runs_of_the_same_flags_spelled_two_ways_are_one_configuration(tmp_path: Path) -> None:
    """The run table spells each flag one way, so the report counts two runs of ``--batch-size=32`` and
    ``--batch-size 32`` as two repeats of one configuration, not two configurations of one run each."""
    from conftest import write_run
    from hvdbench.analysis.collect import collect
    from hvdbench.analysis.tables.scaling import scaling_table

    two = (("--model", "resnet20", "--batch-size=32"), ("--model=resnet20", "--batch-s", "32"))
    for repeat, args in enumerate(two):
        write_run(tmp_path, RunSpec("cifar10", "pytorch", args, repeat=repeat), [[0.1] * 20])
    collection = collect([tmp_path])
    assert set(collection.runs["args"]) == {"--model resnet20 --batch-size 32"}
    (row,) = scaling_table(collection).itertuples()
    assert row.repeats == 2
    assert spelled("nccl-tests", ["-b", "8", "--x=1"]) == ("-b", "8", "--x=1")  # no parser here: as written
