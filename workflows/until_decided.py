"""``hvdbench run|sweep ... --until-decided [--against ROOT] --budget N``: rounds of repeats, every configuration still
undecided once a round, a look after each round from the first (MIN_RUNS runs) by the sequential rule
(analysis/verdicts/sequential.py), each configuration stopping when decided or at its budget.

Decided: against ROOT, its ratio to ROOT's configuration of the same work is faster, slower or equivalent within
±margin; alone, its own throughput is known within ±margin. Where ROOT's runs of that work were made on this machine,
more of them are made alongside (into ROOT, under its own label, a run of each a round, the order turned every
round), as compared things should be measured; ROOT's runs from elsewhere stay as they are, and only this side grows.
Every look is printed and kept, with the rule, in the results root's until-decided.json; the runs are ordinary runs
any report reads."""

from __future__ import annotations

import json
import shlex
import socket
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from hvdbench.analysis.verdicts.sequential import (ALONGSIDE, Design, Look, Side, against_look, counterpart, design,
                                                   own_look)
from hvdbench.core.errors import HvdbenchError, ReportError, UsageError
from hvdbench.core.metrics import MIN_RUNS
from hvdbench.core.spec import RUN_FILE, RunSpec, RunStatus
from hvdbench.core.validate import inert
from hvdbench.launchers.executor import Executor
from hvdbench.launchers.local import SKIPPED
from hvdbench.launchers.sweep import Sweep

RECORD = "until-decided.json"


@dataclass
class Configuration:
    """One configuration run until decided: its first spec and label, its counterpart in the reference (and that
    counterpart's spec where more of it is made here, alongside), the rule it is judged by, each look."""

    spec: RunSpec
    label: str
    theirs: RunSpec | None = None  # the reference's configuration, made alongside
    rule: Design | None = None
    looks: list[Look] = field(default_factory=list)
    note: str = ""  # why it stopped without a look's verdict
    spread: str = ""  # where its early and late runs spread differently, said so (analysis/spread_change.py)

    @property
    def decided(self) -> bool:
        return bool(self.looks) and self.looks[-1].decided

    @property
    def running(self) -> bool:
        return not self.decided and not self.note

    def ids(self, rounds: int) -> list[str]:
        return [replace(self.spec, repeat=r).id for r in range(rounds)]


def _label(spec: RunSpec) -> str:
    where = f" {spec.placement}" if spec.placement else ""
    args = f" {shlex.join(spec.args)}" if spec.args else ""
    return f"{spec.benchmark}{args} at {spec.np} rank(s) via {spec.launcher}{where}"


def configurations(specs: Sequence[RunSpec]) -> list[Configuration]:
    """The plan's configurations (its first round's specs), each labelled; labels made unique by their run's id."""
    firsts = [spec for spec in specs if spec.repeat == 0]
    labels = [_label(spec) for spec in firsts]
    return [Configuration(spec, label if labels.count(label) == 1 else f"{label} ({spec.id})")
            for spec, label in zip(firsts, labels)]


def run_until_decided(sweep: Sweep, specs: Sequence[RunSpec], root: Path, executor: Executor,
                      executor_for: Callable[[Path], Executor]) -> tuple[list[RunStatus], int]:
    """Rounds of repeats until every configuration is decided or has its budget of runs (``executor_for``: the
    executor of the reference's root, for its runs made alongside); every run's status, and how many configurations
    ended undecided or not judged."""
    first = min(max(sweep.repeats, MIN_RUNS), sweep.budget)
    _same_rule(root, sweep)
    design(first, sweep.budget, 0)  # the rule's looks planned before the first run: a budget it cannot take fails here
    against = _reference(sweep.against, root)
    todo = configurations(specs)
    print(f"until decided: a look after each round from {first} to {sweep.budget} runs of each of {len(todo)} "
          f"configuration(s), margin ±{sweep.margin:g}%"
          + (f", against {inert(sweep.against)}" if sweep.against is not None else ", each on its own interval"))
    theirs = executor_for(sweep.against) if sweep.against is not None else None
    statuses: list[RunStatus] = []
    alongside: list[RunStatus] = []
    for round_ in range(sweep.budget):
        pending = [c for c in todo if c.running]
        if not pending:
            break
        for config in pending:
            pair = [(executor, replace(config.spec, repeat=round_), statuses)]
            if config.theirs is not None and theirs is not None:
                pair.append((theirs, replace(config.theirs, repeat=round_), alongside))
            for runner, spec, kept in pair[::-1] if round_ % 2 else pair:  # the order turned every round
                kept += runner.execute([spec])
        if against is not None:
            against = _pair(pending, root, sweep, against, round_ + 1, first)
        if round_ + 1 >= first:
            _look(pending, root, against, sweep, first, round_ + 1)
            _record(root, todo, sweep)  # kept at every look: a stopped command loses none of them
    _spreads(root, todo, sweep.budget)
    _record(root, todo, sweep)
    made = sum(s.message != SKIPPED for s in alongside)
    if alongside:
        print(f"until decided: {made} run(s) of the reference made alongside in {inert(sweep.against)} "
              f"({sum(s.status == 'ok' for s in alongside)} of {len(alongside)} complete)")
    undecided = [c for c in todo if not c.decided]
    print(f"until decided: {len(todo) - len(undecided)} of {len(todo)} configuration(s) decided"
          + (f"; {len(undecided)} undecided at the budget of {sweep.budget} run(s) or not judged (the last look of "
             f"each above; {RECORD} keeps every look)" if undecided else ""))
    return statuses, len(undecided)


def _same_rule(root: Path, sweep: Sweep) -> None:
    """Refuse to go on under another rule where the results root's looks were made under one (a larger budget,
    another margin or reference): the looks already made spent the first rule's error, and starting the rule again on
    the same runs would raise the error rate past what it promises; going on under the same rule (a stopped command
    resumed) looks at the same runs as it did."""
    path = root / RECORD
    if not path.exists():
        return
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        earlier = (data["budget"], float(data["margin_pct"]), str(data["against"]))
        looked = any(c.get("looks") for c in data["configurations"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise UsageError(f"{path}: not a record of the looks hvdbench made (damaged or not its own): the runs under "
                         f"{root} cannot be judged until decided again without it; give a new results root") from None
    now = (sweep.budget, float(sweep.margin), str(sweep.against or ""))
    if looked and earlier != now:
        said = ", ".join(f"{name} {a} (now {b})" for name, a, b in zip(("budget", "margin", "against"), earlier, now)
                         if a != b)
        raise UsageError(f"{root}: its runs were looked at under another rule ({inert(said)}): those looks spent that "
                         "rule's error, and a new rule on the same runs would raise the error rate past its promise; "
                         "go on with the same budget, margin and reference, or give a new results root")


def _reference(against: Path | None, root: Path) -> Side | None:
    """ROOT's runs read (their resamples seeded apart from this side's); refused where it is the results root itself
    or holds no complete training run."""
    if against is None:
        return None
    if against.resolve() == root.resolve():
        raise UsageError(f"--against {against}: the results root itself; give another system's results")
    try:
        side = Side.read(against, "reference ")
    except ReportError as exc:
        raise UsageError(f"--against {against}: {exc}") from None
    if side.table.empty:
        raise UsageError(f"--against {against}: no complete training run to judge against")
    return side


def _pair(pending: list[Configuration], root: Path, sweep: Sweep, against: Side, rounds: int, first: int) -> Side:
    """After a round: each configuration without a counterpart yet paired with the reference's run of the same work
    (its rule chosen: alongside where those runs were made here, else against their fixed number); the reference read
    again where runs are made into it."""
    assert sweep.against is not None
    fresh = [c for c in pending if c.rule is None and not c.note]
    if fresh:
        mine = _read(root, "")
        for config in fresh:
            row = mine.row(config.ids(rounds)) if mine is not None else None
            theirs = counterpart(against, row) if row is not None else None
            if row is not None and theirs is None:
                config.note = f"{config.label}: no run of the same work in {sweep.against}: not judged"
                print(f"until decided: {inert(config.note)}")
            elif theirs is not None:
                config.theirs = _spec(sweep.against, theirs) if against.made_on(theirs, socket.gethostname()) else None
                config.rule = design(first, sweep.budget, ALONGSIDE if config.theirs else int(theirs["repeats"]))
                said = "runs of it made alongside" if config.theirs else f"its {int(theirs['repeats'])} run(s) fixed"
                print(f"until decided: {inert(config.label)}: judged against {inert(sweep.against)} "
                      f"({inert(theirs['system'])}: {said})")
    if any(c.theirs is not None for c in pending):
        return _read(sweep.against, "reference ") or against
    return against


def _spec(root: Path, row: pd.Series) -> RunSpec | None:
    """The run description of a reference configuration's first run (None where it cannot be read)."""
    for run_id in str(row["runs"]).split(","):
        for path in root.rglob(f"{run_id}/{RUN_FILE}"):
            try:
                return RunSpec.read(path)
            except HvdbenchError:
                continue
    return None


def _read(root: Path, salt: str) -> Side | None:
    try:
        return Side.read(root, salt)
    except ReportError:
        return None  # no complete run yet: the next round looks again


def _look(pending: list[Configuration], root: Path, against: Side | None, sweep: Sweep, first: int,
          rounds: int) -> None:
    """One look at every configuration still running: its finding printed and kept."""
    mine = _read(root, "")
    if mine is None:
        return
    margin = sweep.margin / 100.0
    for config in (c for c in pending if c.running):
        row = mine.row(config.ids(rounds))
        if row is None:
            continue
        theirs = counterpart(against, row) if against is not None else None
        if against is not None and theirs is None:
            continue  # said when it was paired
        config.rule = config.rule or design(first, sweep.budget, 0)
        look = (own_look(config.label, mine, row, config.rule, margin) if theirs is None or against is None else
                against_look(config.label, mine, row, against, theirs, config.rule, margin, MIN_RUNS,
                             (str(row["system"]), str(theirs["system"]))))
        config.looks.append(look)
        print(f"until decided, round {rounds}: {inert(look.line)}")
        if look.finding == "not judged" and theirs is not None and int(theirs["repeats"]) < MIN_RUNS \
                and config.theirs is None:
            config.note = f"{sweep.against} holds {int(theirs['repeats'])} run(s) of it: too few to judge against"


def _spreads(root: Path, todo: list[Configuration], budget: int) -> None:
    """Each configuration whose early runs spread differently from its late ones, said and kept: the verdict pools a
    loaded hour with a quiet one."""
    from hvdbench.analysis.spread_change import spread_change

    mine = _read(root, "")
    if mine is None:
        return
    started = mine.runs.set_index("run_id")["started"]
    for config in todo:
        present = [run_id for run_id in config.ids(budget) if run_id in mine.points]
        changed = spread_change([mine.points[run_id] for run_id in present])
        if changed is not None:
            config.spread = changed.line() + _late_alone(root, changed, started.get(present[changed.early]))
            print(f"until decided: {inert(config.label)}: {config.spread}")


def _late_alone(root: Path, changed: Any, late_start: Any) -> str:
    """Where the early runs were the noisier: the command that judges the late ones alone (their start, the window)."""
    if changed.early_factor <= changed.late_factor or late_start is None or pd.isna(late_start):
        return ""
    since = pd.Timestamp(float(late_start), unit="s").strftime("%Y-%m-%dT%H:%M:%S")
    return f"; to judge the last {changed.late} alone: hvdbench report {shlex.quote(str(root))} --runs-since {since}"


def _record(root: Path, todo: list[Configuration], sweep: Sweep) -> None:
    """Every look of every configuration, with its rule, in the results root (replaced whole)."""
    data = {"margin_pct": sweep.margin, "budget": sweep.budget, "against": str(sweep.against or ""),
            "configurations": [{"label": c.label, "rule": c.rule.describe() if c.rule else "", "note": c.note,
                                "spread": c.spread,
                                "alongside": c.theirs is not None,
                                "finding": c.looks[-1].finding if c.looks else "not judged",
                                "looks": [{"runs": k.runs, "value": k.value, "low": k.low, "high": k.high,
                                           "finding": k.finding, "line": k.line} for k in c.looks]} for c in todo]}
    try:
        root.mkdir(parents=True, exist_ok=True)
        staged = root / f".{RECORD}.tmp"
        staged.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        staged.replace(root / RECORD)
    except OSError as exc:
        print(f"hvdbench: cannot keep the looks in {root / RECORD}: {exc.strerror}")
