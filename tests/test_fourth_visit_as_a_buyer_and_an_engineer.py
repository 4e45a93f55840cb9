"""The fourth visit's findings, each where the user looks: accept's advice and the page's "runs to decide" on the
interval's own scale, time to train in the executive summary ("best" is fastest to the target; epochs that multiply
out), a dry run that refuses what the submit would (every run that cannot fit named at once), status a script can
poll, and words that fit CPU runs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from conftest import hvdbench_exe

FOUR_NODES = "".join(f"gpu0{i}|gpu:h100:8(S:0-1)|gpu*|112\n" for i in range(1, 5))


def _cluster(tmp_path: Path) -> dict[str, str]:
    """PATH with a stand-in sinfo answering a 4-node H100 partition."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "sinfo").write_text("#!/bin/sh\ncat <<'EOF'\n" + FOUR_NODES + "EOF\n")
    (bin_dir / "sinfo").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


@pytest.mark.parametrize("container", ["", "container: {image: 'nvcr.io#nvidia/pytorch:24.05-py3', runtime: pyxis}\n"],
                         ids=["one job a run", "pyxis: one job a shape"])
def test_the_dry_run_refuses_what_the_submit_would_naming_every_run(tmp_path: Path, container: str) -> None:
    sweep = tmp_path / "s.yaml"
    sweep.write_text("name: big\nlauncher: srun\nworkloads: [{benchmark: cifar10, args: [--model, resnet20]}]\n"
                     "axes: {nodes: [1, 4, 8, 16], gpus_per_node: [8]}\nslurm: {partition: gpu, time: 30}\n"
                     + container)
    out = subprocess.run([hvdbench_exe(), "submit", str(sweep), "--dry-run", "-o", str(tmp_path / "r")],
                         capture_output=True, text=True, env=_cluster(tmp_path), timeout=120)
    assert out.returncode == 2, out.stderr
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("hvdbench: error: the submit would refuse this plan: 2 runs cannot be submitted: ")
    assert "needs 8 nodes but partition gpu has 4" in line and "needs 16 nodes but partition gpu has 4" in line
    sweep.write_text(sweep.read_text().replace("[1, 4, 8, 16]", "[1, 4]"))
    fits = subprocess.run([hvdbench_exe(), "submit", str(sweep), "--dry-run", "-o", str(tmp_path / "r")],
                          capture_output=True, text=True, env=_cluster(tmp_path), timeout=120)
    assert fits.returncode == 0, fits.stderr


def test_time_to_target_in_the_summary_names_the_fastest_to_the_target() -> None:
    """Two sizes run to a target: the summary's line names the one fastest to the target, not the highest
    throughput's; epochs are the runs' geometric mean (what statistical efficiency's ratio is of)."""
    from hvdbench.analysis.tables.quality import _geomean, quality_summary

    table = pd.DataFrame([
        {"system": "local", "model": "mlp", "np": 1, "global_batch": 32, "seconds": 110.2, "low": 100.0,
         "high": 121.0, "metric": "accuracy", "target": 0.8, "converged": 3, "runs": 3, "on_cpu": True},
        {"system": "local", "model": "mlp", "np": 2, "global_batch": 256, "seconds": 158.9, "low": 150.0,
         "high": 170.0, "metric": "accuracy", "target": 0.8, "converged": 3, "runs": 3, "on_cpu": True}])
    [line] = quality_summary(table)
    assert line.startswith("Time to target: local mlp fastest on 1 CPU rank(s) at global batch 32: 110.2 s "
                           "[100.0–121.0 s] (1.84 min) to accuracy 0.8 (3 of 3 converged); slowest on 2 CPU rank(s)")
    assert "best here means fastest to the target" in line
    assert _geomean(pd.Series([2.0, 8.0])) == pytest.approx(4.0)


def test_runs_to_decide_says_which_dash_is_which() -> None:
    from hvdbench.analysis.findings import Finding

    assert Finding("undecided", "undecided").to_decide() == "over 1,000 a side"
    assert Finding("faster", "faster").to_decide() == "-" and Finding("undecided", "u", runs_to_decide=41) \
        .to_decide() == "~41 a side"


def test_status_can_be_polled_by_a_script(tmp_path: Path) -> None:
    """Pending jobs are not a failure: exit 5 while under way, 1 once any run ended otherwise, 0 when all are ok;
    --json for a script; rows in natural order (np8 before np16)."""
    import json

    from hvdbench.core.spec import RunSpec, RunStatus

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text("#!/bin/sh\necho '11|PENDING|Priority'\n")
    (bin_dir / "squeue").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    root = tmp_path / "r"
    for np_, status in ((16, RunStatus("submitted", None, 0.0, "job 11 submitted", job_id="11", scheduler="slurm")),
                        (8, RunStatus("ok", 0, 3.0)), (1, RunStatus("ok", 0, 3.0))):
        spec = RunSpec(benchmark="mlp", np=np_)
        spec.write(root / spec.id)
        status.write(root / spec.id)

    def status() -> subprocess.CompletedProcess[str]:
        return subprocess.run([hvdbench_exe(), "status", str(root), "--json", "--store", "none"], capture_output=True,
                              text=True, env=env, timeout=120)

    polled = status()
    assert polled.returncode == 5, polled.stderr
    rows = json.loads(polled.stdout)
    assert [r["run"].split("-")[1] for r in rows] == ["np1", "np8", "np16"]
    assert rows[2]["status"] == "pending" and "Priority" in rows[2]["message"]
    failed = RunSpec(benchmark="mlp", np=2)
    failed.write(root / failed.id)
    RunStatus("failed", 1, 1.0, "rank 0 exited 1").write(root / failed.id)
    assert status().returncode == 1


def test_a_pbs_job_that_ended_says_pbs_own_reason() -> None:
    import json

    from hvdbench.launchers.pbs_queue import qstat_states

    said = json.dumps({"Jobs": {"12.pbs": {"job_state": "F", "Exit_status": 271,
                                           "comment": "Job run at Tue; job was killed by signal 15"}}})
    answer = qstat_states(["12.pbs"], lambda argv, **_: subprocess.CompletedProcess(argv, 0, said, ""))
    assert answer == {"12.pbs": ("failed", "Exit_status 271; Job run at Tue; job was killed by signal 15")}


def test_a_stalled_baseline_is_called_out_where_its_efficiency_stands(tmp_path: Path) -> None:
    """The demo's impossible first result: a 1-rank run whose steps stalled (CV far above the 2-rank run's) makes
    an efficiency above 100%; the headline and the terminal say the baseline was disturbed and to rerun it, and a
    report of CPU ranks opens with the CPU stand-in banner."""
    import numpy as np

    from conftest import write_run
    from hvdbench.analysis.collect import collect
    from hvdbench.analysis.report.build import build
    from hvdbench.analysis.report.output import terminal_text
    from hvdbench.core.spec import RunSpec

    rng = np.random.default_rng(3)
    stalled = list(rng.uniform(0.09, 0.11, 30))
    stalled[5:9] = [2.0, 1.5, 1.8, 2.2]  # a busy box stalled four of its steps
    cpu = {"cpu_model": "Intel(R) Xeon(R) CPU E5-2690"}
    write_run(tmp_path, RunSpec(benchmark="cifar10", args=("--model", "resnet20"), np=1), [stalled], env=cpu)
    write_run(tmp_path, RunSpec(benchmark="cifar10", args=("--model", "resnet20"), np=2),
              [list(rng.uniform(0.1, 0.11, 30)) for _ in range(2)], env=cpu)
    collection = collect([tmp_path])
    report = build(collection)
    said = terminal_text(report, collection)
    assert "The 1-rank run of resnet20 that these efficiencies rest on was disturbed" in said
    assert "rerun it (--repeats 3 alternates the runs)" in said
    headline = report.headline[0]
    assert "was disturbed" in headline.text
    assert report.intro.startswith("These results are CPU stand-ins: ranks trained on CPUs, not GPUs.")


def test_a_nightly_job_can_fail_when_its_store_is_down_and_checks_are_kept_beside_dashboards_views(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import sqlite3

    import numpy as np

    from conftest import write_run
    from hvdbench.cli import main
    from hvdbench.core.spec import RunSpec

    rng = np.random.default_rng(5)
    for repeat in range(6):
        write_run(tmp_path / "r", RunSpec(benchmark="cifar10", args=("--model", "resnet20"), repeat=repeat),
                  [list(rng.uniform(0.1, 0.11, 30))], env={"time": 1_790_000_000.0 + repeat * 86400})
    down = f"sqlite:///{tmp_path}/no-such-folder/h.sqlite"
    (tmp_path / "no-such-folder").write_text("a file where the store's folder belongs")
    assert main(["history", "import", str(tmp_path / "r"), "--store", str(tmp_path / "h.sqlite")]) == 0
    monkeypatch.setenv("HVDBENCH_STORE_REQUIRED", "1")
    assert main(["import", "table", str(FIXTURES_TABLE), "-o", str(tmp_path / "t"), "--store", down]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "HVDBENCH_STORE_REQUIRED=1: the command fails" in err
    monkeypatch.delenv("HVDBENCH_STORE_REQUIRED")
    store = str(tmp_path / "h.sqlite")
    outcome = {0: "no regression", 4: "not judged"}[main(["history", "check", "--store", store])]
    assert main(["history", "verdicts", "--store", store, "--kind", "check", "--format", "json"]) == 0
    assert f'"{outcome}"' in capsys.readouterr().out
    with sqlite3.connect(tmp_path / "h.sqlite") as db:
        assert db.execute("SELECT runs, ok_runs FROM v_configurations").fetchall() == [(6, 6)]
        assert len(db.execute("SELECT started, throughput FROM v_trend").fetchall()) == 6
        assert db.execute("SELECT outcome FROM v_changes").fetchall() == [(outcome,)]
        assert db.execute("SELECT COUNT(*) FROM v_runs").fetchone() == (6,)


FIXTURES_TABLE = Path(__file__).parent / "fixtures" / "published-table-small.csv"


def test_nccl_log_on_a_file_that_is_no_nccl_log_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    from hvdbench.cli import main

    ibstat = Path(__file__).parent / "fixtures" / "nccl" / "ibstat-roce200-ethernet-and-down.txt"
    assert main(["nccl-log", str(ibstat)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "not an NCCL log" in captured.err


def test_the_dashboards_views_are_the_ones_the_procurement_guide_lists(tmp_path: Path) -> None:
    import re
    import sqlite3

    from hvdbench.analysis.history.store import open_store

    with open_store(str(tmp_path / "h.sqlite")):
        pass
    guide = (Path(__file__).parents[1] / "docs" / "procurement.md").read_text()
    listed = {view: re.findall(r"`(\w+)`", columns)
              for view, columns in re.findall(r"^\| `(v_\w+)` \|[^|]*\| (.*) \|$", guide, flags=re.M)}
    with sqlite3.connect(tmp_path / "h.sqlite") as db:
        views = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'view' ORDER BY name")]
        built = {view: [row[1] for row in db.execute(f"PRAGMA table_info({view})")] for view in views}
    assert built == listed and len(built) == 4
