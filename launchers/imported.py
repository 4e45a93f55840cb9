"""nccl-tests' output taken into a results root as runs of hvdbench's collectives (``hvdbench import nccl-tests``):
each test of a file becomes a run folder whose rank record holds, per size, nccl-tests' own figure (its time, so the
collectives table computes the same algbw and busbw), backend ``nccl-tests``, timed as nccl-tests times (calls back
to back). Its rows then stand in the report's collectives table beside hvdbench's own and are judged by ``accept``
criteria like them: a run a file, so an interval needs the test run several times (imported each). The same output is
never taken twice: the digest of what was read from it (its tests' rows, ranks and figures, not its bytes: a comment
or a blank line added makes no new measurement) is in the record, and a second import of it is refused in one line.
The report's own reading (analysis/collect.py) leaves out any run whose times are another's, however it got in."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Sequence

from hvdbench.core.errors import UsageError
from hvdbench.readers.nccl_tests import BACKEND, PROGRAMS, Test, parse
from hvdbench.core.records import RecordWriter
from hvdbench.core.spec import RUN_FILE, RunSpec, RunStatus

LOG = "rank-0.jsonl"
MAX_FILE = 64 << 20


@dataclass(frozen=True)
class Imported:
    """One test taken in: its run, what was left out of it, and the nodes it ran on (as whoever started it knew
    them, else as its output names them)."""

    spec: RunSpec
    test: Test
    nodes: tuple[str, ...] = ()


def hosts_label(hosts: list[str]) -> str | None:
    """Which nodes a test ran on, as the run's placement (a pair of nodes is told from every other pair: a bad cable
    shows as its own row, never averaged into the others'); a long list by its ends, count and digest."""
    if not hosts:
        return None
    if len(hosts) <= 4:
        return "hosts " + ",".join(hosts)
    digest = hashlib.sha256(",".join(hosts).encode()).hexdigest()[:8]
    return f"{len(hosts)} hosts {hosts[0]}..{hosts[-1]} #{digest}"


def spec_of(test: Test, system: str, repeat: int, hosts: Sequence[str] | None = None) -> RunSpec:
    """The run a test stands for: collectives over its ranks, on its hosts (its placement: ``hosts`` where whoever
    started it knew them, else its output's), started as nccl-tests is (mpirun)."""
    ranks = len(test.ranks) or test.threads * test.gpus
    nodes = list(hosts) if hosts is not None else test.hosts
    return RunSpec(benchmark="collectives", framework="pytorch", args=("--from", BACKEND, str(test.program)),
                   np=ranks, nodes=max(1, len(nodes)), placement=hosts_label(nodes), launcher="mpirun",
                   controller="mpi", system=system, repeat=repeat)


def content_digest(tests: list[Test]) -> str:
    """What an output measured, as a digest: each test's program, ranks and rows (sizes, types, times, figures,
    checks), never its bytes (whitespace, comments, the order of its header lines)."""
    said = [[test.program, test.threads, test.gpus, test.iters, [list(r) for r in test.ranks],
             [[row.bytes, row.count, row.dtype, repr(row.time_s), repr(row.algbw), repr(row.busbw), row.wrong]
              for row in test.rows]] for test in tests]
    return hashlib.sha256(json.dumps(said, sort_keys=True).encode()).hexdigest()


def taken_digests(root: Path) -> set[str]:
    """The digests of what was already taken in under ``root`` (of an output's bytes, as earlier imports kept, and of
    what it measured), whatever took it in (nccl-tests, MLPerf results, published tables): one reader for all."""
    found = set()
    for log in root.glob(f"*/{LOG}"):
        try:
            first = json.loads(log.read_text(encoding="utf-8").splitlines()[0])
        except (OSError, ValueError, IndexError):
            continue
        imported = (first.get("imported") or {}) if isinstance(first, dict) else {}
        found |= {d for d in (imported.get("sha256"), imported.get("content_sha256")) if isinstance(d, str)}
    return found


def free_repeat(root: Path, spec: RunSpec) -> RunSpec:
    """The spec with the first repeat no run under ``root`` holds (each file of one test is another run of it)."""
    while (root / spec.id / RUN_FILE).exists():
        spec = replace(spec, repeat=spec.repeat + 1)
    return spec


def write_run(root: Path, spec: RunSpec, test: Test, digest: str, name: str, content: str = "",
              hosts: Sequence[str] | None = None) -> None:
    """The run folder, written aside and moved in whole: run.json, rank 0's record (env, a comm record per size,
    its summary; ``hosts``: the nodes its step ran on, else those its output names), the other ranks' summaries
    (nccl-tests' figure is theirs too: averaged over them), status ok."""
    folder = root / f".importing-{spec.id}"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    spec.write(folder)
    host = test.hosts[0] if test.hosts else None
    writer = RecordWriter(folder / LOG, rank=0, local_rank=0, size=spec.np)
    writer.write("env", benchmark="collectives", framework="pytorch", model="collectives", unit="GB/s",
                 run_id=spec.id, host=host, flags={"timing": "batch", "iters": test.iters},
                 device={"nccl": test.nccl}, gpu={"name": test.ranks[0][3]} if test.ranks else None,
                 imported={"from": BACKEND, "program": test.program, "version": test.version, "sha256": digest,
                           "content_sha256": content, "file": name[:200],
                           "hosts": list(hosts) if hosts is not None else test.hosts,
                           "ranks": len(test.ranks),
                           "avg_busbw": test.avg_busbw, "left": test.left[:20]})
    for row in test.rows:
        writer.write("comm", op=test.op, backend=BACKEND, dtype=row.dtype, bytes=row.bytes, elements=row.count,
                     times=[row.time_s], timing="batch", calls=test.iters or 1,
                     correct=None if row.wrong is None else row.wrong == 0)
    writer.write("summary", unit="GB/s")
    writer.close()
    for rank in range(1, spec.np):
        other = RecordWriter(folder / f"rank-{rank}.jsonl", rank=rank, local_rank=0, size=spec.np)
        other.write("summary", unit="GB/s")
        other.close()
    RunStatus("ok", 0, 0.0, f"imported from nccl-tests' {test.program} output").write(folder)
    folder.rename(root / spec.id)


def import_files(paths: Iterable[Path], root: Path, system: str,
                 hosts: Sequence[str] | None = None) -> list[Imported]:
    """Every test of every file as a run under ``root``; a UsageError in one line for a file that is no nccl-tests
    output, one already imported, a test of an operation hvdbench does not tabulate, or (``hosts``: the nodes the
    step that wrote it ran on) an output that names other nodes than its step's."""
    done: list[Imported] = []
    seen = taken_digests(root) if root.exists() else set()
    for path in paths:
        if not path.is_file():
            raise UsageError(f"{path}: not a regular file")
        if path.stat().st_size > MAX_FILE:
            raise UsageError(f"{path}: {path.stat().st_size:,} bytes, more than nccl-tests writes "
                             f"({MAX_FILE:,} at most)")
        data = path.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        if digest in seen:
            raise UsageError(f"{path}: already imported into {root} (the same bytes): nothing counted twice")
        hint = next((p for p in PROGRAMS if p in path.name), None)
        try:
            tests = parse(data.decode("utf-8", "replace"), hint)
        except UsageError as exc:
            raise UsageError(f"{path}: {exc}") from None
        content = content_digest(tests)
        if content in seen:
            raise UsageError(f"{path}: already imported into {root}: the same tests, ranks and figures as an output "
                             "taken before (only its text differs): one measurement, counted once")
        for test in tests:
            if hosts is not None and test.hosts and sorted(test.hosts) != sorted(hosts):
                raise UsageError(f"{path}: its ranks name nodes {', '.join(test.hosts[:4])}, its step ran on "
                                 f"{', '.join(list(hosts)[:4])}: not this step's output")
            if test.op is None:
                raise UsageError(f"{path}: {test.program or 'a test that names no program'} is not one hvdbench "
                                 f"tabulates ({', '.join(PROGRAMS)}); name the file after its program where the "
                                 "output does not say it")
            spec = free_repeat(root, spec_of(test, system, 0, hosts))
            write_run(root, spec, test, digest, path.name, content, hosts)
            done.append(Imported(spec, test, tuple(hosts) if hosts is not None else tuple(test.hosts)))
        seen |= {digest, content}
    return done
