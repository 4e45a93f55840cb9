"""What `submit --dry-run` and `screen --submit --dry-run` show is what SLURM is asked for, job by job, on the
two-node test cluster: each run's dry-run line (nodes, tasks, GPUs per node, node list, exclusivity, time,
partition, name) against ``scontrol show job`` of the job submitted for it. A placement sweep mixes runs
needing 2 and 4 GPUs of a node, and a screen pins runs to node1 and node2: each job is sized and placed
for its own run (they were once all given the first run's). The placement runs complete on the GPUs
they name."""

from __future__ import annotations

import ast
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
_FIELD = re.compile(r"(\w+)=(\[[^\]]*\]|\{[^}]*\}|\S+)")


def _dry_run(text: str) -> dict[str, dict[str, Any]]:
    """run id -> the job parameters its dry-run line shows."""
    out = {}
    for line in text.splitlines():
        run, sep, rest = line.partition(": ")
        if sep and re.fullmatch(r"[\w.-]+", run) and "nodes=" in rest:
            out[run] = {k: (ast.literal_eval(v) if v[0] in "[{" else v) for k, v in _FIELD.findall(rest)}
    return out


def _as_scontrol(params: dict[str, Any]) -> dict[str, str]:
    """The ``scontrol show job`` fields the dry run's parameters make."""
    nodes, per_node, minutes = int(params["nodes"]), int(params["tasks_per_node"]), int(params["timeout_min"])
    expected = {"JobName": params["name"], "NumNodes": str(nodes), "NumTasks": str(nodes * per_node),
                "TimeLimit": f"{minutes // 60:02d}:{minutes % 60:02d}:00",
                "ReqNodeList": params.get("slurm_additional_parameters", {}).get("nodelist", "(null)"),
                "OverSubscribe": "NO" if params.get("slurm_exclusive") == "True" else "OK",
                "TresPerNode": f"gres:gpu:{params['gpus_per_node']}"}
    if "slurm_partition" in params:
        expected["Partition"] = params["slurm_partition"]
    if "cpus_per_task" in params:
        expected["CPUs/Task"] = params["cpus_per_task"]
    return expected


def _check_jobs(root: Path, shown: dict[str, dict[str, Any]]) -> list[str]:
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
    assert dry.returncode == 0 and sorted(p["gpus_per_node"] for p in shown.values()) == ["2", "4"], dry.stdout
    assert cli("submit", str(sweep), "-o", str(root)).returncode == 0
    _check_jobs(root, shown)
    settled_ok(root, 2, gpu_cluster)  # not refused inside the job
    placed = {tuple(sorted(e["gpu_choice"]["physical"] for e in envs(root / run))) for run in shown}
    assert placed == {(0, 1), (0, 3)}


def test_a_two_host_screen_gets_a_job_on_each_host_as_its_dry_run_shows(gpu_cluster: Any, tmp_path: Path) -> None:
    root = tmp_path / "screen"
    argv = ["screen", "--benchmark", "mlp", "--topology", str(TOPOLOGY), "--hosts", "node[1-2]", "--no-pairs",
            "--submit", "--partition", "gpu", "-o", str(root)]
    bench = ["--", "--mlp-input", "32", "--steps", "6"]
    dry = cli(*argv, "--dry-run", *bench)
    shown = _dry_run(dry.stdout)
    nodelists = sorted(p["slurm_additional_parameters"]["nodelist"] for p in shown.values())
    assert dry.returncode == 0 and nodelists == ["node1"] * 4 + ["node2"] * 4, dry.stdout
    out = cli(*argv, *bench)
    assert out.returncode == 0, out.stderr
    jobs = _check_jobs(root, shown)
    subprocess.run(["scancel", *jobs], capture_output=True)  # what was asked is checked; the screen itself is not
    gpu_cluster.await_nodes()
