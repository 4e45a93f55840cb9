"""A plain published scaling table (CSV) read as points of one workload on one system at several sizes: a vendor's
or a paper's figures where no log exists (TensorFlow's tf_cnn_benchmarks tables, a datasheet). Columns, by name
(aliases in brackets): system [table, platform], model, nodes, gpus_per_node, gpus (optional: nodes x gpus_per_node),
batch_per_gpu [batch], throughput [images_per_sec, samples_per_sec], and optionally interconnect, source,
variable_update (the exchange: replicated(nccl), parameter_server, distributed_replicated ...), precision, and
parameter_servers (how many of the figure's nodes held a parameter server, where its source says: tf_cnn_benchmarks'
EC2 tables ran fewer servers than nodes for some models at 8 nodes; only with a server exchange). A table
column names the system where there is one (its rows are one published table); each bad line is refused in one line
naming it, nothing read."""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from pathlib import Path

from hvdbench.core.errors import UsageError
from hvdbench.core.validate import read_small_text, text_problem

MOST_BYTES = 4 << 20  # a published table is a few hundred lines
MOST_NODES = 65536
MOST_PER_NODE = 1024
MOST_BATCH = 1 << 20
MOST_RATE = 1e12  # samples/s: beyond any machine's
ALIASES = {"system": ("table", "system", "platform"), "throughput": ("throughput", "images_per_sec",
                                                                      "samples_per_sec"),
           "batch_per_gpu": ("batch_per_gpu", "batch")}
REQUIRED = ("system", "model", "nodes", "gpus_per_node", "batch_per_gpu", "throughput")
_WORD = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._+()/:,=#-]{0,199}$")


@dataclass(frozen=True)
class TablePoint:
    """One published figure: a workload on ``nodes`` x ``per_node`` GPUs at ``batch`` a GPU, ``throughput``
    samples/s for the whole job."""

    system: str
    model: str
    nodes: int
    per_node: int
    gpus: int
    batch: int
    throughput: float
    interconnect: str = ""
    source: str = ""
    exchange: str = ""
    precision: str = ""
    servers: int | None = None
    line: int = 0

    @property
    def key(self) -> tuple[str, str, int, str, str, int, int]:
        """What one published figure is: the same key twice in a table is one figure given twice (its parameter
        servers are not part of it: one configuration at one size is published once)."""
        return self.system, self.model, self.batch, self.exchange, self.precision, self.nodes, self.gpus


def _column(header: list[str], name: str) -> str | None:
    return next((alias for alias in ALIASES.get(name, (name,)) if alias in header), None)


def _count(text: str, what: str, most: int, where: str) -> int:
    value = _number(text, what, where)
    if value != int(value) or not 1 <= value <= most:
        raise UsageError(f"{where}: {what} {text[:20]!r} is not a count of 1 to {most:,}")
    return int(value)


def _number(text: str, what: str, where: str) -> float:
    try:
        value = float(text.strip())
    except ValueError:
        raise UsageError(f"{where}: {what} {text[:20]!r} is not a number") from None
    if not math.isfinite(value):
        raise UsageError(f"{where}: {what} {text[:20]!r} is not a finite number")
    return value


def _word(text: str, what: str, where: str, required: bool = True) -> str:
    text = text.strip()
    if not text and not required:
        return ""
    problem = text_problem(text) or (None if _WORD.match(text) else f"{text[:40]!r} is not a plain name")
    if problem:
        raise UsageError(f"{where}: {what}: {problem}")
    return text


def _point(row: dict[str, str], columns: dict[str, str | None], where: str) -> TablePoint:
    def given(name: str) -> str:
        column = columns.get(name)
        return row.get(column) or "" if column else ""

    nodes = _count(given("nodes"), "nodes", MOST_NODES, where)
    per_node = _count(given("gpus_per_node"), "gpus_per_node", MOST_PER_NODE, where)
    gpus = _count(given("gpus"), "gpus", MOST_NODES * MOST_PER_NODE, where) if given("gpus").strip() else \
        nodes * per_node
    if gpus > nodes * per_node or (nodes > 1 and gpus != nodes * per_node):
        raise UsageError(f"{where}: {gpus} GPUs on {nodes} node(s) of {per_node}: more than they hold, or a "
                         "multi-node figure on part of its nodes")
    rate = _number(given("throughput"), "throughput", where)
    if not 0 < rate <= MOST_RATE:
        raise UsageError(f"{where}: throughput {rate:g} is not a rate above 0 and at most {MOST_RATE:g} samples/s")
    exchange = _word(given("variable_update"), "variable_update", where, False)
    return TablePoint(_word(given("system"), "system", where), _word(given("model"), "model", where), nodes, per_node,
                      gpus, _count(given("batch_per_gpu"), "batch_per_gpu", MOST_BATCH, where), rate,
                      _word(given("interconnect"), "interconnect", where, False),
                      _word(given("source"), "source", where, False),
                      exchange, _word(given("precision"), "precision", where, False),
                      _servers(given("parameter_servers"), exchange, nodes, where))


def by_servers(exchange: str) -> bool:
    """Whether a published figure's exchange (tf_cnn_benchmarks' ``variable_update``) ran through parameter servers."""
    return "parameter_server" in exchange or "distributed_replicated" in exchange


def _servers(text: str, exchange: str, nodes: int, where: str) -> int | None:
    """The nodes that held a parameter server, where given: a count of 1 to the figure's nodes, with an exchange
    through servers."""
    if not text.strip():
        return None
    if not by_servers(exchange):
        raise UsageError(f"{where}: parameter_servers given for an exchange without servers "
                         f"(variable_update {exchange or 'not given'})")
    return _count(text, f"parameter_servers (of {nodes} node(s))", nodes, where)


def read_table(path: Path) -> list[TablePoint]:
    """Every figure of a published scaling table; a UsageError in one line for a file that is no table of them (a
    required column missing, a bad value: its line named), or a figure given twice."""
    try:
        text = read_small_text(path, MOST_BYTES, "a published scaling table")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    reader = csv.DictReader(io.StringIO(text))
    header = [name.strip() for name in reader.fieldnames or []]
    reader.fieldnames = header
    columns = {name: _column(header, name) for name in (*REQUIRED, "gpus", "interconnect", "source",
                                                        "variable_update", "precision", "parameter_servers")}
    missing = [name for name in REQUIRED if columns[name] is None]
    if missing:
        raise UsageError(f"{path}: no {' or '.join(ALIASES.get(missing[0], (missing[0],)))} column: a published "
                         f"scaling table names {', '.join(REQUIRED)}")
    points, seen = [], set()
    for number, row in enumerate(reader, start=2):
        if None in row:
            raise UsageError(f"{path}:{number}: more fields than the header names")
        point = _point(row, columns, f"{path}:{number}")
        if point.key in seen:
            raise UsageError(f"{path}:{number}: the same figure ({point.system} {point.model} at {point.gpus} "
                             "GPUs) given twice")
        seen.add(point.key)
        points.append(TablePoint(**{**point.__dict__, "line": number}))
    if not points:
        raise UsageError(f"{path}: a header and no figures")
    return points
