"""The command line: every subcommand's parser is declared by its own module beside its body (``declare``); this
module puts them in order under ``hvdbench``."""

from __future__ import annotations

from typing import Any, Callable

from hvdbench.core.environment import hvdbench_version
from hvdbench.core.flags import Parser

from . import data, fabric, history, imports, judging, nccl_log, project, run, screen, status, submit, sweep, topo


# every subcommand's declare, in the order --help lists them: a new command is its module and its place here
COMMANDS: tuple[Callable[[Any], None], ...] = (
    run.declare, judging.declare, judging.declare_accept, project.declare, sweep.declare, submit.declare,
    status.declare, screen.declare, topo.declare, nccl_log.declare, data.declare, fabric.declare, imports.declare,
    history.declare)


def build_parser() -> Parser:
    """The command line of every subcommand."""
    parser = Parser(prog="hvdbench", description="Horovod/MPI distributed training benchmarks and scaling reports.")
    parser.add_argument("--version", action="version", version=f"hvdbench {hvdbench_version()}",
                        help="print hvdbench's version (with its commit where it runs from a git checkout) and exit")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for declare in COMMANDS:
        declare(sub)
    return parser
