"""What `submit --dry-run` and `screen --submit --dry-run` show is what SLURM is asked for, job by job, on the
two-node test cluster: each run's job script as the dry run shows it (its #SBATCH lines: nodes, tasks, GPUs per
node, node list, exclusivity, time, partition, name, CPUs a task) against ``scontrol show job`` of the job submitted
for it. A placement sweep mixes runs needing 2 and 4 GPUs of a node, and a screen pins runs to node1 and node2:
each job is sized and placed for its own run (they were once all given the first run's). The placement runs
complete on the GPUs they name."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO
from slurm_runs import TINY, cli, envs, settled_ok, sweep_file

pytestmark = [pytest.mark.slow, pytest.mark.mpi, pytest.mark.timeout(600)]
TOPOLOGY = REPO / "tests" / "fixtures" / "topology" / "own-4gpu-tabs-nic-legend.txt"  # NV18 0-1, SYS 0-3
TWO_GPUS = ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"  # two GPUs on the test cluster's 2-CPU nodes
            "GPU0\t X \tNV18\t0-1\t0\nGPU1\tNV18\t X \t0-1\t0\n")


def _dry_run(text: str) -> dict[str, dict[str, str]]:
    """run id -> the #SBATCH options of the job script its dry run shows (``--exclusive``: "True")."""
    out: dict[str, dict[str, str]] = {}
    run = None
    for line in text.splitlines():
        head = re.fullmatch(r"([\w.-]+)(?: \(baseline\))?: job script:", line)
        node = re.fullmatch(r"[\w.-]+: one job, its \d+ run\(s\) one after another \(([\w.-]+)[^)]*\), "
                            r"job script:", line)
        if head or node:
            run = (head or node).group(1)  # a node's job: its first run, whose status names the job
            out[run] = {}
            continue
        option = re.fullmatch(r" +#SBATCH --([\w-]+)(?:=(.*))?", line)
        if run is not None and option:
            out[run][option.group(1)] = option.group(2) if option.group(2) is not None else "True"
    return out


def _as_scontrol(options: dict[str, str]) -> dict[str, str]:
    """The ``scontrol show job`` fields the dry run's #SBATCH lines make."""
    nodes, per_node, minutes = int(options["nodes"]), int(options["ntasks-per-node"]), int(options["time"])
    expected = {"JobName": options["job-name"], "NumNodes": str(nodes), "NumTasks": str(nodes * per_node),
                "TimeLimit": f"{minutes // 60:02d}:{minutes % 60:02d}:00",
                "ReqNodeList": options.get("nodelist", "(null)"),
                "OverSubscribe": "NO" if options.get("exclusive") == "True" else "OK",
                "TresPerNode": f"gres:gpu:{options['gpus-per-node']}"}
    if "partition" in options:
        expected["Partition"] = options["partition"]
    if "cpus-per-task" in options:
        expected["CPUs/Task"] = options["cpus-per-task"]
    return expected


def _check_jobs(root: Path, shown: dict[str, dict[str, str]]) -> list[str]:
    """Each submitted run's job, field by field against its dry-run line; the job ids."""
    jobs = []
    for run, params in shown.items():
        job = json.loads((root / run / "status.json").read_text())["job_id"]
        out = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True)
        fields = dict(word.partition("=")[::2] for word in out.stdout.split() if "=" in word)
        fields["NumNodes"] = re.sub(r"^(\d+)-\1$", r"\1", fields.get("NumNodes", ""))  # "1-1" while pending
        expected = _as_scontrol(params)
        assert {k: fields.get(k) for k in expected} == expected, (run, job)
        jobs.append(job)
    return jobs


def test_a_placement_sweep_gets_the_jobs_its_dry_run_shows(gpu_cluster: Any, tmp_path: Path) -> None:
    body = (f"launcher: srun\nbind_cpus: false\ntopology: {TOPOLOGY}\n"
            f"workloads: [{{benchmark: mlp, args: {TINY}}}]\naxes: {{np: [2], placements: [NV18, SYS]}}\n"
            "slurm: {time: 10, partition: gpu}")
    sweep, root = sweep_file(tmp_path, "placed", body), tmp_path / "placed"
    dry = cli("submit", str(sweep), "-o", str(root), "--dry-run")
    shown = _dry_run(dry.stdout)
    assert dry.returncode == 0 and sorted(p["gpus-per-node"] for p in shown.values()) == ["2", "4"], dry.stdout
    assert "wckey" not in dry.stdout
    assert cli("submit", str(sweep), "-o", str(root)).returncode == 0
    _check_jobs(root, shown)
    settled_ok(root, 2, gpu_cluster)  # not refused inside the job
    placed = {tuple(sorted(e["gpu_choice"]["physical"] for e in envs(root / run))) for run in shown}
    assert placed == {(0, 1), (0, 3)}


def test_a_two_host_screen_gets_one_job_on_each_host_as_its_dry_run_shows(gpu_cluster: Any, tmp_path: Path) -> None:
    """Two one-GPU runs a node: one exclusive job a node (not two), its time limit the runs' together, the runs one
    after another in it, every run's status naming its node's job."""
    root, topology = tmp_path / "screen", tmp_path / "topology.txt"
    topology.write_text(TWO_GPUS)
    argv = ["screen", "--benchmark", "mlp", "--topology", str(topology), "--hosts", "node[1-2]", "--no-pairs",
            "--submit", "--partition", "gpu", "--time", "5", "-o", str(root)]
    bench = ["--", "--mlp-input", "32", "--steps", "6"]
    dry = cli(*argv, "--dry-run", *bench)
    shown = _dry_run(dry.stdout)
    assert dry.returncode == 0 and sorted(p["nodelist"] for p in shown.values()) == ["node1", "node2"], dry.stdout
    assert {p["time"] for p in shown.values()} == {"10"} and {p.get("exclusive") for p in shown.values()} == {"True"}
    out = cli(*argv, *bench)
    assert out.returncode == 0, out.stderr
    assert "submitted 4 run(s) as 2 job(s), one a node" in out.stdout
    _check_jobs(root, shown)
    runs = [p for p in root.iterdir() if (p / "status.json").is_file()]
    assert len(runs) == 4 and len({json.loads((p / "status.json").read_text())["job_id"] for p in runs}) == 2
    settled_ok(root, 4, gpu_cluster)  # each node's runs one after another in its one allocation, every one ok
