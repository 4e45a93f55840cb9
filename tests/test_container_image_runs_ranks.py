"""A real image from the repository's recipe (container/Containerfile, built by scripts/container-image.sh from
Debian's packages with Charliecloud's unprivileged builder, cached by its inputs) and a two-host sweep whose ranks
run inside it under ch-run: the same report as the same sweep on the host, plus the image's columns, and every rank
seen inside the image (its own Python, Charliecloud's mark)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from hvdbench.core.records import ParseStats, rank_log_name, read_records

from builds import built_beside
from conftest import hvdbench_exe

# the limit is the tests' own: the wait for an image built beside them (scripts/test.sh) is not counted in it
pytestmark = [pytest.mark.slow, pytest.mark.late, pytest.mark.timeout(900, func_only=True)]
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def image() -> str:
    """The image's folder, built (or found in the cache) by scripts/container-image.sh."""
    missing = [tool for tool in ("mmdebstrap", "ch-image", "ch-run") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"the image tests need {', '.join(missing)} (scripts/test-tools.sh installs them as root)")
    said = built_beside("image")  # where make test builds it beside the other tests
    if said is None:
        out = subprocess.run(["bash", str(REPO / "scripts" / "container-image.sh")], capture_output=True, text=True,
                             timeout=840)
        assert out.returncode == 0, out.stderr[-2000:]
        said = out.stdout
    return said.strip().splitlines()[-1]


def _sweep(root: Path, ssh_host: Any, env: dict, extra: list[str]) -> subprocess.CompletedProcess[str]:
    sweep = root.parent / f"{root.name}.yaml"
    sweep.write_text(f"""
name: boxed
system: loopback
launcher: horovodrun
controller: gloo
hosts: [localhost, 127.0.0.1]
ssh_port: {ssh_host.port}
ssh_identity_file: {ssh_host.key}
timeout: 300
workloads:
  - {{benchmark: mlp, args: [--mlp-input, '32', --mlp-widths, '32', --steps, '10', --warmup-steps, '2',
                            --threads, '1']}}
axes:
  nodes: [2]
  gpus_per_node: [1]
""")
    return subprocess.run([hvdbench_exe(), "sweep", str(sweep), "-o", str(root), *extra], capture_output=True,
                          text=True, env=env, timeout=600)


def _env_record(run_dir: Path, rank: int) -> dict:
    return next(r for r in read_records(run_dir / rank_log_name(rank), ParseStats()) if r["kind"] == "env")


def test_a_two_host_sweep_in_the_image_reports_as_on_the_host_plus_the_image(image: str, ssh_host: Any,
                                                                            tmp_path: Path, hvd_env: dict) -> None:
    env = {**hvd_env, "USER": os.environ.get("USER") or "root"}
    host = _sweep(tmp_path / "host", ssh_host, env, [])
    assert host.returncode == 0, host.stdout[-3000:] + host.stderr[-3000:]
    boxed = _sweep(tmp_path / "boxed", ssh_host, env, ["--container-image", image, "--container-runtime",
                                                       "charliecloud"])
    assert boxed.returncode == 0, boxed.stdout[-3000:] + boxed.stderr[-3000:]
    assert "sweep: 2 ok" in host.stdout and "sweep: 2 ok" in boxed.stdout  # the 2-node run and its 1-GPU baseline

    tables = {side: {name: pd.read_csv(tmp_path / side / "report" / f"{name}.csv") for name in ("scaling", "runs")}
              for side in ("host", "boxed")}
    same = ["framework", "benchmark", "model", "launcher", "controller", "nodes", "np"]
    assert list(tables["host"]["scaling"].columns) == list(tables["boxed"]["scaling"].columns)
    assert tables["host"]["scaling"][same].equals(tables["boxed"]["scaling"][same])
    assert tables["boxed"]["scaling"]["speedup"].notna().all()
    runs = tables["boxed"]["runs"]
    assert set(runs["container_image"]) == {image} and set(runs["container_runtime"]) == {"charliecloud"}
    assert tables["host"]["runs"]["container_image"].isna().all()

    two_node = next(d for d in (tmp_path / "boxed").iterdir() if d.name.startswith("mlp-np2"))
    assert f"ch-run --bind={tmp_path / 'boxed'}" in (two_node / "command.sh").read_text()
    for rank in range(2):
        record = _env_record(two_node, rank)
        assert record["container"]["runtime"] == "charliecloud"  # ch-run's mark, seen by the rank itself
        assert record["python"] != sys.version.split()[0]  # Debian's python3 in the image, not this interpreter
        assert record["horovod"]["layout"]["cross_size"] == 2


@pytest.mark.mpi
def test_srun_tasks_on_two_slurm_nodes_run_in_the_image(image: str, gpu_cluster: Any, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from slurm_runs import TINY, cli, envs, settled_ok, sweep_file

    monkeypatch.setenv("USER", os.environ.get("USER") or "root")  # ch-run needs it; a login shell sets it
    sweep = sweep_file(tmp_path, "boxed-slurm", f"launcher: srun\nworkloads: [{{benchmark: mlp, args: {TINY}}}]\n"
                                                "axes: {nodes: [2], gpus_per_node: [1]}\nslurm: {time: 10}\n"
                                                f"container: {{image: {image}, runtime: charliecloud}}")
    root = tmp_path / "boxed-slurm"
    dry = cli("submit", str(sweep), "-o", str(root), "--dry-run")
    assert dry.returncode == 0 and f"ch-run --bind={root.resolve()}" in dry.stdout, dry.stdout + dry.stderr
    out = cli("submit", str(sweep), "-o", str(root))
    assert out.returncode == 0, out.stderr
    settled_ok(root, 1, gpu_cluster)
    ranks = envs(next(root.glob("mlp-*")))
    assert {e["host"] for e in ranks} == {"node1", "node2"}
    assert all(e["container"]["runtime"] == "charliecloud" and e["python"] != sys.version.split()[0] for e in ranks)
    assert all(e["horovod"]["layout"]["cross_size"] == 2 for e in ranks)
