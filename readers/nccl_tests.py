"""nccl-tests' own output (``all_reduce_perf``, ``all_gather_perf``, ``broadcast_perf``, ``alltoall_perf``), read so
that its curves stand beside hvdbench's collectives: per test the program, the ranks with their hosts and devices,
the iterations, and per size the out-of-place time, algbw, busbw and wrong elements, as nccl-tests prints them
(src/util.cu: the ``# nThread`` line, ``# Using devices``, the table, ``# Avg bus bandwidth``). Its time is the
average over ranks of each rank's mean over ``iters`` calls back to back (nccl-tests' default ``-a``); the in-place
half of a row is not read. Framework-free, linear in the file, lines capped."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from hvdbench.core.errors import UsageError

BACKEND = "nccl-tests"  # the backend its imported runs' records name
PROGRAMS = {"all_reduce_perf": "allreduce", "all_gather_perf": "allgather", "broadcast_perf": "broadcast",
            "alltoall_perf": "alltoall"}  # nccl-tests' programs whose operation hvdbench tabulates
DTYPES = {"float": "fp32", "half": "fp16", "bfloat16": "bf16"}
MAX_LINE = 4096  # a longer line is cut: nothing of nccl-tests' is that long
MAX_BYTES = 1 << 40
_START = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_CONFIG = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)"
                     r".*?warmup iters:\s*\d+\s+iters:\s*(\d+)")
_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+).*?nccl-library=(\d+)")
_DEVICE = re.compile(r"^#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[[^\]]*\]\s*(.*)$")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
_HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,252}$")


@dataclass(frozen=True)
class Row:
    """One size's out-of-place figures."""

    bytes: int
    count: int
    dtype: str
    time_s: float
    algbw: float
    busbw: float
    wrong: int | None  # None: nccl-tests did not check (-c 0: "N/A")


@dataclass
class Test:
    """One test of a file: its program (None where the output does not name it), ranks, rows, what was left."""

    program: str | None = None
    threads: int = 1
    gpus: int = 1
    iters: int | None = None
    version: str | None = None
    nccl: str | None = None
    ranks: list[tuple[int, str, int, str]] = field(default_factory=list)  # rank, host, device, device name
    rows: list[Row] = field(default_factory=list)
    avg_busbw: float | None = None
    per_iteration: bool = False
    left: list[str] = field(default_factory=list)  # rows not read, and why

    @property
    def op(self) -> str | None:
        """hvdbench's name of the test's operation, None where it tabulates none."""
        return PROGRAMS.get(self.program or "")

    @property
    def hosts(self) -> list[str]:
        """The hosts of its ranks, in rank order, once each."""
        return list(dict.fromkeys(host for _, host, _, _ in sorted(self.ranks)))


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


_WHOLE = re.compile(r"[0-9]+")  # ASCII digits only: "²".isdigit() is true, and int("²") fails
MOST_GBS = 100_000.0  # a bandwidth above 100 TB/s is no link's: a damaged time


def _agrees(size: int, time_us: float, algbw: float) -> bool:
    """Whether a row's time and the algbw it printed say the same (to the print's rounding: 2 decimals, and 2%)."""
    derived = size / (time_us * 1e-6) / 1e9
    return abs(derived - algbw) <= 0.011 + 0.02 * max(derived, algbw)


def _row(fields: list[str], test: Test) -> Row | str:
    """A table line as a Row, or why it is not one."""
    if len(fields) < 9 or not (_WHOLE.fullmatch(fields[0]) and _WHOLE.fullmatch(fields[1])):
        return "not a row of the table"
    size, count, dtype = int(fields[0]), int(fields[1]), fields[2]
    if dtype not in DTYPES:
        return f"type {dtype[:20]!r} (hvdbench tabulates {', '.join(DTYPES)})"
    if not 0 < size <= MAX_BYTES:
        return f"a size of {size} bytes"
    time_us, algbw, busbw = (_number(f) for f in fields[5:8])
    if time_us is None or algbw is None or busbw is None or time_us <= 0:
        return "a time or bandwidth that is not a positive number"
    if not _agrees(size, time_us, algbw) or size / (time_us * 1e-6) / 1e9 > MOST_GBS:
        return (f"its time {time_us:g} us gives {size / (time_us * 1e-6) / 1e9:,.3g} GB/s where it printed algbw "
                f"{algbw:g}: a damaged row")
    wrong = None if fields[8] == "N/A" else _number(fields[8])
    return Row(size, count, DTYPES[dtype], time_us * 1e-6, algbw, busbw, None if wrong is None else int(wrong))


def _header(line: str, test: Test) -> bool:
    """Read a ``#`` line into ``test``; True where it was one of the header's."""
    if match := _CONFIG.match(line):
        test.threads, test.gpus, test.iters = int(match.group(1)), int(match.group(2)), int(match.group(5))
    elif match := _DEVICE.match(line):
        host = match.group(2)
        test.ranks.append((int(match.group(1)), host if _HOST.match(host) else "(unnamed)", int(match.group(3)),
                           re.sub(r"[^A-Za-z0-9 ._()/-]", "", match.group(4))[:80]))
    elif match := _AVG.match(line):
        test.avg_busbw = _number(match.group(1))
    elif "i_min" in line:
        test.per_iteration = True
    else:
        return False
    return True


def parse(text: str, program: str | None = None) -> list[Test]:
    """Every test in nccl-tests' output; ``program`` names the tests whose output does not (releases before 2.14
    print no "Collective test starting" line: the file's name may say). A UsageError where it holds no test."""
    tests: list[Test] = []
    current: Test | None = None
    version: tuple[str, str] | None = None  # the version line just read: it opens the next test
    for raw in text.splitlines():
        line = raw[:MAX_LINE].strip()
        if match := _VERSION.match(line):
            code = int(match.group(2))
            version = (match.group(1)[:20], f"{code // 10000}.{code // 100 % 100}.{code % 100}")
            continue
        started = _START.match(line)
        if started or (_CONFIG.match(line) and (current is None or current.rows)):
            if current is None or current.rows or started and current.program:
                current = Test(program=program)
                tests.append(current)
            if version:
                current.version, current.nccl = version
                version = None
            if started:
                current.program = re.sub(r"[^a-z_]", "", started.group(1).rsplit("/", 1)[-1])[:40] or program
        if current is None or not line:
            continue
        if line.startswith("#"):
            _header(line, current)
            continue
        got = _row(line.split(), current)
        if isinstance(got, Row):
            current.rows.append(got)
        elif got != "not a row of the table":
            current.left.append(f"{line.split()[0]} bytes: {got}")
    tests = [t for t in tests if t.rows]
    if not tests:
        raise UsageError("no nccl-tests table in it (a '# nThread ...' header and rows of size, count, type, time, "
                         "algbw, busbw)")
    for test in tests:
        said = _sized_problem(test)
        if said:
            raise UsageError(said)
    return tests


MOST_PER_PROCESS = 64  # GPUs one process drives (nThread x nGpus): beyond it, a damaged header, not a machine
MOST_RANKS = 65536  # ranks of one test: more than any machine has


def _sized_problem(test: Test) -> str | None:
    """Why a test's size cannot be taken as it says (each rank becomes a record written, so a damaged header could
    write tens of thousands): more GPUs a process than any drives where no rank line names them, more ranks than
    any machine has."""
    if not test.ranks and test.threads * test.gpus > MOST_PER_PROCESS:
        return (f"nThread {test.threads} nGpus {test.gpus}: {test.threads * test.gpus:,} GPUs in one process and no "
                f"'# Rank' line for any of them (at most {MOST_PER_PROCESS}); the output is damaged")
    if len(test.ranks) > MOST_RANKS:
        return f"{len(test.ranks):,} ranks: more than any machine has (at most {MOST_RANKS:,}); the output is damaged"
    return None
