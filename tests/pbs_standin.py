"""A one-node PBS for the tests: ``qsub`` runs the job script here, detached, as PBS would on its node (PBS_JOBID,
PBS_NODEFILE with the host once per mpiprocs, PBS_ENVIRONMENT, its -o/-e files), and ``qstat -x -f -F json``
answers from the jobs' state files as PBS Pro does (job_state, Exit_status, comment; an unknown id: "Unknown Job
Id" on stderr). ``install(bin_dir, state_dir)`` writes both onto a PATH folder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from hvdbench.core.spec import write_whole

SERVER = "standin"


def install(bin_dir: Path, state_dir: Path) -> None:
    """qsub and qstat in bin_dir, keeping their jobs' states in state_dir."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    state_dir.mkdir(parents=True, exist_ok=True)
    for tool in ("qsub", "qstat"):
        path = bin_dir / tool
        path.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(Path(__file__).parent)!r})\n"
                        f"import pbs_standin\nsys.exit(pbs_standin.{tool}({str(state_dir)!r}, sys.argv[1:]))\n")
        path.chmod(0o755)


def _state(state_dir: Path, job: str, **fields: object) -> None:
    """The job's state file with ``fields`` changed, replaced whole (qstat may read it meanwhile: written in place,
    a qstat between the truncation and the write read an empty file and died)."""
    path = state_dir / f"{job}.json"
    old = json.loads(path.read_text()) if path.exists() else {}
    write_whole(path, json.dumps({**old, **fields}))


def qsub(state_dir: str, args: list[str]) -> int:
    """Submit the script (the last argument): print its job id, run it detached."""
    states, script = Path(state_dir), Path(args[-1])
    text = script.read_text()
    select = re.search(r"^#PBS -l select=(\d+):.*?mpiprocs=(\d+)", text, re.M)
    if not select or select.group(1) != "1":
        print("qsub: the stand-in has one node", file=sys.stderr)
        return 1
    number = len(list(states.glob("*.json"))) + 1
    job = f"{number}.{SERVER}"
    nodefile = states / f"{job}.nodes"
    nodefile.write_text("localhost\n" * int(select.group(2)))
    _state(states, job, job_state="Q", comment="Not Running: queued")
    subprocess.Popen([sys.executable, __file__, state_dir, job, str(script.resolve()), str(nodefile)],
                     start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, cwd=os.getcwd())
    print(job)
    return 0


def qstat(state_dir: str, args: list[str]) -> int:
    """-x -f -F json ID...: the jobs known, as PBS Pro's JSON; each unknown one said on stderr (exit 153)."""
    ids = [a for a in args if not a.startswith("-") and a != "json"]
    jobs, unknown = {}, []
    for job in ids:
        path = Path(state_dir) / f"{job}.json"
        if path.exists():
            jobs[job] = json.loads(path.read_text())
        else:
            unknown.append(job)
    print(json.dumps({"timestamp": 0, "pbs_version": "standin", "pbs_server": SERVER, "Jobs": jobs}))
    for job in unknown:
        print(f"qstat: Unknown Job Id {job}", file=sys.stderr)
    return 153 if unknown else 0


def _run(state_dir: str, job: str, script: str, nodefile: str) -> None:
    """The job: its #PBS -o/-e files, PBS's variables, the script under bash; its end as qstat shows it."""
    text = Path(script).read_text()
    out = re.search(r"^#PBS -o (\S+)", text, re.M)
    err = re.search(r"^#PBS -e (\S+)", text, re.M)
    env = {**os.environ, "PBS_JOBID": job, "PBS_NODEFILE": nodefile, "PBS_ENVIRONMENT": "PBS_BATCH",
           "PBS_O_WORKDIR": os.getcwd(), "PBS_JOBNAME": "standin"}
    _state(Path(state_dir), job, job_state="R", comment="Job run")
    with open(out.group(1) if out else os.devnull, "wb") as stdout, open(err.group(1) if err else os.devnull,
                                                                         "wb") as stderr:
        code = subprocess.run(["bash", script], env=env, stdout=stdout, stderr=stderr).returncode
    _state(Path(state_dir), job, job_state="F", Exit_status=code, comment="Job run and finished")


if __name__ == "__main__":
    _run(*sys.argv[1:5])
