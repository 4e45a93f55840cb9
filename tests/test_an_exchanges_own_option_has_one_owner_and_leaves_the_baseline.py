"""An exchange's own option is declared once, on its descriptor (core/exchanges.py): the flags, the 1-GPU baseline's
arguments and the pairing key are derived from it, so a new exchange's option leaves the baseline by construction
(its rank would refuse it there), and two exchanges declaring one flag are named, never argparse's bare conflict."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hvdbench.core import exchanges
from hvdbench.core.catalog import get_benchmark
from hvdbench.core.errors import UsageError
from hvdbench.core.exchanges import EXCHANGES, Exchange, Option


@pytest.fixture
def localsgd(monkeypatch: pytest.MonkeyPatch) -> Exchange:
    """A stand-in exchange added by its row alone: local SGD, averaging parameters every --sync-every steps."""
    kind = Exchange("localsgd", "local SGD: each rank steps alone and parameters are averaged every N steps",
                    ("pytorch",), options=(Option("sync_every", 4, "steps between two averagings", kind=int),))
    monkeypatch.setitem(EXCHANGES, "localsgd", kind)
    return kind


def test_a_new_exchanges_option_is_a_flag_and_leaves_the_one_rank_baseline(localsgd: Exchange,
                                                                           tmp_path: Path) -> None:
    from hvdbench.launchers.plan import plan
    from hvdbench.launchers.sweep import load_sweep

    info = get_benchmark("cifar10")
    flags = info.check(["--exchange", "localsgd", "--sync-every", "8"])
    assert flags.sync_every == 8
    with pytest.raises(UsageError, match="--sync-every applies with --exchange localsgd, not horovod"):
        info.check(["--sync-every", "8"])  # what the baseline's rank would say, had the flag stayed
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("name: localsgd\nlauncher: horovodrun\ncontroller: gloo\nworkloads:\n  - benchmark: cifar10\n"
                     "    args: [--exchange, localsgd, --sync-every, '8', --device, cpu]\naxes:\n  np: [2]\n")
    planned = plan(load_sweep(sweep))
    (baseline,) = [spec for spec in planned.specs if spec.id in planned.baselines]
    assert baseline.np == 1 and "--sync-every" not in baseline.args and "localsgd" not in baseline.args
    info.check(list(baseline.args))  # the baseline's rank takes its arguments
    (two,) = [spec for spec in planned.specs if spec.np == 2]
    assert "--sync-every" in two.args


def test_two_exchanges_declaring_one_option_are_named(localsgd: Exchange, monkeypatch: pytest.MonkeyPatch) -> None:
    twin = replace(localsgd, name="diloco")
    monkeypatch.setitem(EXCHANGES, "diloco", twin)
    with pytest.raises(ValueError, match="--sync-every is declared by the exchanges localsgd and diloco"):
        exchanges.own_options()
    with pytest.raises(ValueError, match="--sync-every is declared by the exchanges localsgd and diloco"):
        get_benchmark("cifar10").check([])


def test_an_exchange_option_named_like_a_benchmark_flag_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(EXCHANGES, "greedy", Exchange("greedy", "a stand-in", ("pytorch",),
                                                      options=(Option("steps", 4, "its own steps", kind=int),)))
    with pytest.raises(ValueError, match="exchange greedy's option --steps is already a flag of the benchmark's"):
        get_benchmark("cifar10").check([])


def test_the_registry_as_shipped_gives_every_option_one_owner() -> None:
    owners = exchanges.own_options()
    assert owners == {option.dest: name for name, kind in EXCHANGES.items() for option in kind.options}
    assert exchanges.exchange_flags() == {"--exchange": 1, **{f"--{d.replace('_', '-')}": 1 for d in owners}}
