"""ssh through srun, for a launcher that reaches other hosts with ssh (horovodrun: it checks ssh to every remote host,
then starts its services and workers through it) inside a SLURM job, where compute nodes often run no sshd and
never let a job's processes in by ssh but srun reaches every node of the allocation. The stand-in, first on the
launcher's PATH, takes ``ssh [options] HOST COMMAND`` and runs ``COMMAND`` on ``HOST`` as a one-task step
(``srun --overlap``: the job's CPUs are all held by the step the launcher runs in)."""

from __future__ import annotations

import os
from pathlib import Path

FOLDER = ".ssh-through-srun"  # under the run folder
SCRIPT = """#!/bin/bash
# hvdbench: ssh HOST COMMAND as a one-task SLURM step on HOST (launchers/srun_ssh.py); ssh's options may stand
# before and after the host (horovodrun puts -p, -i and -o ConnectTimeout after it)
host=""
while (($#)); do
    case "$1" in
        -[pilFoEJmcbeDLRW]) shift 2 ;;
        -*) shift ;;
        *) if [[ -n "$host" ]]; then break; fi; host=$1; shift ;;
    esac
done
if [[ -z "${host:-}" ]]; then echo "ssh through srun: no host given" >&2; exit 255; fi
exec srun --overlap --nodes=1 --ntasks=1 --nodelist="$host" --kill-on-bad-exit=1 bash -c "$*"
"""


def ssh_through_srun(run_dir: Path, environ: dict[str, str]) -> Path:
    """Write the stand-in under ``run_dir`` and put its folder first on ``environ``'s PATH; its path."""
    folder = run_dir / FOLDER
    folder.mkdir(exist_ok=True)
    path = folder / "ssh"
    path.write_text(SCRIPT, encoding="utf-8")
    path.chmod(0o755)
    environ["PATH"] = f"{folder}{os.pathsep}{environ.get('PATH', os.defpath)}"
    return path
