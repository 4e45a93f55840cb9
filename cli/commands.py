"""Every ``hvdbench`` subcommand and the module whose body runs it (one module a command, as the parser declares
them in cli/parser.py): the registry ``cli/__init__.py`` dispatches through, and nothing else."""

from __future__ import annotations

import argparse
from typing import Callable

from . import data, fabric, history, imports, judging, nccl_log, project, run, screen, status, submit, sweep, topo

Command = Callable[[argparse.Namespace], int]
WithBenchmarkArgs = Callable[[argparse.Namespace, list[str]], int]

# the commands whose unknown arguments go on to the benchmark (hvdbench run cifar10 --model resnet20 ...)
TAKE_BENCHMARK_ARGS: dict[str, WithBenchmarkArgs] = {"run": run.cmd_run, "screen": screen.cmd_screen}
COMMANDS: dict[str, Command] = {
    "accept": judging.cmd_accept, "data": data.cmd_data, "fabric": fabric.cmd_fabric, "history": history.cmd_history,
    "import": imports.cmd_import, "nccl-log": nccl_log.cmd_nccl_log, "project": project.cmd_project,
    "status": status.cmd_status, "submit": submit.cmd_submit, "sweep": sweep.cmd_sweep, "topo": topo.cmd_topo,
    "report": judging.cmd_report, "compare": judging.cmd_compare,
}
