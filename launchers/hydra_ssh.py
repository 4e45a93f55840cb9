"""``hvdbench-ssh``: the ssh hydra's mpiexec (MPICH, Intel MPI) starts its proxies with, for hosts that need a
port or a key. Hydra takes one executable for its launcher and no arguments for it (MPICH has no
``-bootstrap-exec-args``), so the arguments travel in HVDBENCH_SSH_ARGS, set on the mpiexec command line."""

from __future__ import annotations

import os
import shlex
import sys

SSH_ARGS = "HVDBENCH_SSH_ARGS"


def main() -> None:
    """exec ssh with HVDBENCH_SSH_ARGS before the arguments hydra gives (host and proxy command)."""
    argv = ["ssh", *shlex.split(os.environ.get(SSH_ARGS, "")), *sys.argv[1:]]
    try:
        os.execvp("ssh", argv)
    except OSError as exc:
        print(f"hvdbench-ssh: cannot run ssh: {exc.strerror}", file=sys.stderr)
        sys.exit(127)
