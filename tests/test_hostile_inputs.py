"""Hostile and broken inputs, grouped as they were found: each is one line naming the problem (or a marked
report cell), exit status 2 for a refused input, nothing written outside the output directory, nothing
measured lost. Runs the command line in this process (fast), except where a real process must start."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import write_run
from hvdbench.analysis.collect import collect
from hvdbench.analysis.report.build import build_report
from hvdbench.cli import main
from hvdbench.core.records import RecordWriter, rank_log_name
from hvdbench.core.spec import RunSpec

pytestmark = pytest.mark.bad_input  # counted in the run's summary (conftest.py)


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


def _refused(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, *,
             status: int = 2, keep: tuple[Path, ...] = ()) -> str:
    """Run hvdbench here (cwd tmp_path); one stderr line holding ``text``; no file made outside ``keep``."""
    before = _files(tmp_path)
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code = main(argv)
    finally:
        os.chdir(cwd)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == status and len(err) == 1 and text in err[0], (code, err)
    made = {p for p in _files(tmp_path) - before if not any(p.is_relative_to(k) for k in keep)}
    assert not made, made
    return err[0]


def _sweep(tmp_path: Path, body: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(body if "workloads" in body else "workloads: [cifar10]\naxes: {np: [1]}\n" + body)
    return path


# --- 1. injection: nothing from a sweep file or the command line reaches a shell, an #SBATCH line or ssh
INJECTIONS = [
    ("name: \"x\\ntouch pwned\"\nworkloads: [cifar10]\naxes: {np: [1]}\n", "name:"),
    ("slurm: {partition: \"gpu\\n#SBATCH --wrap=touch\"}\n", "slurm.partition: "),
    ("slurm: {account: \"a\\ntouch pwned\"}\n", "slurm.account: "),
    ("slurm: {qos: \"q\\ntouch pwned\"}\n", "slurm.qos: "),
    ("slurm: {constraint: \"a100\\ntouch pwned\"}\n", "slurm.constraint: "),
    ("slurm: {directives: [\"--reservation=r\\ntouch pwned\"]}\n", "slurm.directives[0]: "),
    ("slurm: {directives: [\"--comment=$(touch pwned)\"]}\n", "is not an sbatch option"),
    ("slurm: {partition: \"gpu;touch pwned\"}\n", "is not a SLURM partition name"),
    ("hosts: [\"node1; touch pwned\"]\n", "is not a host name"),
    ("hosts: [\"-oProxyCommand=touch\"]\n", "is not a host name"),
    ("ssh_identity_file: \"/k ey; touch pwned\"\n", "is not a plain path"),
    ("system: \"a\\nb\"\n", "system: "),
    ("axes: {np: [1], env: {NCCL_DEBUG: \"INFO\\ntouch pwned\"}}\n", "control character"),
]


@pytest.mark.parametrize("body, text", INJECTIONS)
def test_injection_is_refused_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str,
                                                  text: str) -> None:
    body = body.replace("axes: {np: [1], env", "axes: {np: [1], env") if "axes:" in body else body
    path = _sweep(tmp_path, body if "workloads" in body or "axes:" not in body else "workloads: [cifar10]\n" + body)
    _refused(["sweep", str(path), "--dry-run"], tmp_path, capsys, text)
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("argv, text", [
    (["run", "cifar10", "--system", "a\nb", "--dry-run"], "control character"),
    (["screen", "--cpu-slots", "1", "--hosts", "a;b", "--dry-run"], "is not a host name"),
    (["screen", "--cpu-slots", "1", "--partition", "gpu b", "--submit", "--dry-run"], "is not a SLURM partition"),
])
def test_injection_from_the_command_line_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    argv: list[str], text: str) -> None:
    _refused(argv, tmp_path, capsys, text)


def test_labels_are_inert_in_markdown_and_html(tmp_path: Path) -> None:
    hostile = '<img src=x onerror=alert(1)> | <script>alert("x")</script> $x$'
    for np_ in (1, 2):
        write_run(tmp_path, RunSpec(benchmark="cifar10", np=np_, system=hostile), [[0.1] * 25] * np_)
    _, paths = build_report([tmp_path], tmp_path / "out")
    for page in (paths["markdown"].read_text(), paths["html"].read_text()):
        assert "<img src=x" not in page and '<script>alert("x")' not in page
    assert "&lt;img src=x onerror=alert(1)&gt; \\| &lt;script&gt;" in paths["markdown"].read_text()


# --- 3. silent wrong numbers
def test_the_same_root_twice_counts_each_run_once(tmp_path: Path) -> None:
    write_run(tmp_path / "r", RunSpec(benchmark="cifar10", np=1), [[0.1] * 25])
    collection = collect([tmp_path / "r", tmp_path / "r", tmp_path / "r" / ".." / "r", tmp_path])
    assert len(collection.runs) == 1


def test_a_rank_log_copied_from_another_run_makes_the_run_inconsistent(tmp_path: Path) -> None:
    two = write_run(tmp_path, RunSpec(benchmark="cifar10", np=2), [[0.1] * 25] * 2)
    four = write_run(tmp_path / "other", RunSpec(benchmark="cifar10", np=4), [[0.1] * 25] * 4)
    (two / "rank-1.jsonl").write_bytes((four / "rank-3.jsonl").read_bytes())
    runs = collect([tmp_path]).runs.set_index("run_id")
    assert runs.loc[two.name, "status"] == "inconsistent"
    assert "rank-1.jsonl holds records of rank 3 of 4" in runs.loc[two.name, "reason"]


def test_a_log_written_by_another_run_with_the_same_shape_is_told_apart(tmp_path: Path) -> None:
    run = write_run(tmp_path, RunSpec(benchmark="cifar10", np=1), [[0.1] * 25])
    with RecordWriter(run / rank_log_name(0), rank=0, local_rank=0, size=1) as writer:
        writer.write("env", run_id="cifar10-np1-r0-0000000000", benchmark="cifar10")
    assert collect([tmp_path]).runs.iloc[0]["status"] == "inconsistent"


@pytest.mark.parametrize("line, problem", [
    ('"step":7,"warmup":false,"duration":Infinity,"samples":32,"loss":1', "finite positive duration"),
    ('"step":7,"warmup":false,"duration":0.1,"samples":32,"loss":"abc"', "numeric samples and loss"),
    ('"benchmark":"cifar10","device":"cuda"', "env record: device should be dict"),
    ('"benchmark":"cifar10","flags":["--x"]', "env record: flags should be dict"),
    ('"power_w":"hot"', "telemetry record: power_w should be float"),
])
def test_bad_records_are_counted_and_shown_never_fatal(tmp_path: Path, line: str, problem: str) -> None:
    run = write_run(tmp_path, RunSpec(benchmark="cifar10", np=1), [[0.1] * 25])
    kind = "step" if '"step"' in line else "env" if "benchmark" in line else "telemetry"
    with open(run / "rank-0.jsonl", "a") as handle:
        handle.write(f'{{"hvdbench":1,"kind":"{kind}","rank":0,"local_rank":0,"size":1,{line}}}\n')
    collection = collect([tmp_path])
    (issue,) = collection.file_issues
    assert issue.malformed == 1 and any(problem in e for e in issue.examples), issue.examples
    text, _ = build_report([tmp_path], tmp_path / "out")
    assert "1 malformed log line(s) in 1 file(s)" in text
    assert collection.runs.iloc[0]["status"] == "ok"


@pytest.mark.parametrize("spec, text", [
    ({"benchmark": "cifar10", "args": "abc"}, "RunSpec.args must be a list"),
    ({"benchmark": "cifar10", "np": "2"}, "RunSpec.np must be int"),
    ({"benchmark": "cifar10", "devices": "0,1"}, "RunSpec.devices must be a list"),
    ({"benchmark": "cifar10", "system": 7}, "RunSpec.system must be str"),
    ([1, 2], "its spec is a list"),
])
def test_a_bad_run_json_is_named_on_the_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: Any,
                                                 text: str) -> None:
    write_run(tmp_path, RunSpec(benchmark="cifar10", np=1), [[0.1] * 25])
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "run.json").write_text(json.dumps({"schema": 1, "spec": spec}))
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "1 run director(y/ies) left out, unreadable" in out and text in out


# --- 4. numbers that are not finite or not well formed
@pytest.mark.parametrize("argv, text", [
    (["run", "cifar10", "--timeout", "nan"], "--timeout: expected a positive, finite number of seconds, got 'nan'"),
    (["run", "cifar10", "--timeout", "inf"], "--timeout: expected a positive, finite number of seconds, got 'inf'"),
    (["run", "cifar10", "--timeout", "-5"], "--timeout: expected a positive, finite number of seconds, got '-5'"),
    (["sweep", "--timeout", "0"], "--timeout: expected a positive, finite number of seconds, got '0'"),
    (["run", "cifar10", "--telemetry-interval", "inf"], "not a finite number"),
    (["run", "cifar10", "--lr", "nan"], "not a finite number"),
    (["run", "speech", "--utt-seconds", "fixed:inf"], "expected normal:MEAN:STD:MIN:MAX"),
    (["run", "cifar10", "--np", "1,,2"], "expected comma-separated rank counts"),
    (["run", "collectives", "--max-bytes", "inf"], "expected a size such as"),
    (["run", "p2p", "--bytes", "nan"], "expected a size such as"),
    (["report", ".", "--price", "x=nan"], "expected SYSTEM=USD_PER_GPU_HOUR"),
    (["report", ".", "--price", "x=inf"], "expected SYSTEM=USD_PER_GPU_HOUR"),
])
def test_numbers_must_be_finite_and_well_formed(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                argv: list[str], text: str) -> None:
    _refused([*argv, "--dry-run"] if argv[0] == "run" else argv, tmp_path, capsys, text)


@pytest.mark.parametrize("body, text", [
    ("timeout: .nan\n", "expected a positive, finite number of seconds"),
    ("timeout: .inf\n", "expected a positive, finite number of seconds"),
    ("axes: {np: [1], env: {HOROVOD_FUSION_THRESHOLD: abc}}\n", "takes a non-negative whole number"),
    ("axes: {np: [1], env: {HOROVOD_CYCLE_TIME: .nan}}\n", "takes a non-negative number"),
    ("axes: {np: [1], env: {HOROVOD_HIERARCHICAL_ALLREDUCE: '2'}}\n", "takes 0 or 1"),
    ("axes: {np: [1], env: {HOROVOD_HIERARCHICAL_ALLREDUCE: yes}}\n", "expected a non-empty string, got True"),
    ("axes: {np: [1], env: {horovod_fusion_threshold: 1}}\n", "not upper case; did you mean HOROVOD_FUSION_THRESHOLD"),
    ("axes: {np: [1], env: {OMPI_MCA_BTL_TCP_IF_INCLUDE: eth0}}\n", "did you mean OMPI_MCA_btl_tcp_if_include"),
    ("repeats: 2\nrepeats: 3\n", "duplicate key 'repeats'"),
    ("slurm: {directives: [--nodes=4]}\n", "--nodes is set by hvdbench"),
    ("slurm: {directives: [--time=10]}\n", "--time is set by hvdbench"),
    ("slurm: {directives: [-N, '2']}\n", "'2' is not an sbatch option"),
])
def test_sweep_values_must_be_finite_typed_and_said_once(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         body: str, text: str) -> None:
    body = body if not body.startswith("axes") else "workloads: [cifar10]\n" + body
    _refused(["sweep", str(_sweep(tmp_path, body)), "--dry-run"], tmp_path, capsys, text)


def test_open_mpi_parameters_keep_their_lower_case_names(tmp_path: Path) -> None:
    from hvdbench.launchers.sweep import load_sweep

    sweep = load_sweep(_sweep(tmp_path, "workloads: [cifar10]\n"
                                        "axes: {np: [1], env: {OMPI_MCA_mpi_yield_when_idle: ['1']}}\n"))
    assert "OMPI_MCA_mpi_yield_when_idle" in str(sweep)


# --- 5. what used to be a traceback
def test_output_under_a_file_or_in_proc_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("x")
    _refused(["run", "mlp", "--np", "1", "-o", str(tmp_path / "file" / "out"), "--no-report"], tmp_path, capsys,
             "cannot use the results directory")
    _refused(["run", "mlp", "--np", "1", "-o", "/proc/hvdbench", "--no-report"], tmp_path, capsys,
             "cannot use the results directory")
    write_run(tmp_path / "r", RunSpec(benchmark="cifar10", np=1), [[0.1] * 25])
    _refused(["report", str(tmp_path / "r"), "-o", str(tmp_path / "file" / "rep")], tmp_path, capsys,
             "cannot create the report directory", keep=(tmp_path / "r",))


@pytest.mark.parametrize("content, text", [
    (b"workloads: [cifar10]\naxes: {np: [1]}\n\xff\xfe", "not UTF-8 text"),
    (b"workloads: [cifar10]\x00\n", "holds NUL bytes"),
    ("\ufeffworkloads: [cifar10]\n".encode("utf-16"), "holds NUL bytes"),
    (b"a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n",
     "aliases (*a) are not allowed"),
    (b"# big\n" + b"x" * (1 << 20) + b"\n", "larger than 1024 KiB"),
])
def test_unreadable_and_unbounded_sweep_files_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           content: bytes, text: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes(content)
    start = time.monotonic()
    _refused(["sweep", str(path), "--dry-run"], tmp_path, capsys, text)
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("topo, text", [
    ({"labels": ["GPU0", "GPU1"], "matrix": [["X", "NVX"], ["NVX", "X"]], "gpus": [{"index": 0}, {"index": 1}]},
     "unknown link code 'NVX'"),
    ({"labels": ["GPU0", "GPU1"], "matrix": [["X"], ["NV1", "X"]], "gpus": [{"index": 0}, {"index": 1}]},
     "the matrix is not 2 x 2"),
    ({"labels": ["GPU0"]}, "not hvdbench's topology JSON (KeyError"),
    ({"labels": ["GPU0", "GPU1"], "matrix": [["X", "SYS"], ["SYS", "X"]], "gpus": [{"index": 0}]},
     "its gpus and nics do not match its labels"),
])
def test_bad_topology_json_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], topo: dict,
                                       text: str) -> None:
    (tmp_path / "t.json").write_text(json.dumps(topo))
    _refused(["topo", "--file", str(tmp_path / "t.json")], tmp_path, capsys, text)


@pytest.mark.parametrize("content, text", [
    ("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X\tPIX\t0-x\nGPU1\tPIX\t X\t0-3\n".encode(), "is not a CPU list"),
    ("\tGPU0\tGPU1\nGPU0\t X\tPIX\nGPU1\tPIX\t X\n".encode("utf-16"), "saved as UTF-16"),
    (b"\tGPU0\n" + b"GPU0\t X\n" * 200_000, "larger than 1024 KiB"),
])
def test_bad_topology_text_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes,
                                       text: str) -> None:
    (tmp_path / "t.txt").write_bytes(content)
    _refused(["topo", "--file", str(tmp_path / "t.txt")], tmp_path, capsys, text)


def test_a_label_with_dollars_draws(tmp_path: Path) -> None:
    for np_ in (1, 2):
        write_run(tmp_path, RunSpec(benchmark="cifar10", np=np_, system="cost $5/h $\\frac$"), [[0.1] * 25] * np_)
    _, paths = build_report([tmp_path], tmp_path / "out")
    assert "cost $5/h" in paths["html"].read_text()


# --- 6. unbounded work from small inputs
@pytest.mark.parametrize("body, text", [
    ("repeats: 100000000\n", "more than max_runs (10,000)"),
    ("axes: {np: [1, 2], env: {" + ", ".join(f"UCX_K{i}: [a, b, c, d, e, f, g, h]" for i in range(12)) + "}}\n",
     "more than max_runs"),
])
def test_a_plan_too_large_is_refused_before_it_is_made(tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str,
                                                       text: str) -> None:
    body = body if not body.startswith("axes") else "workloads: [cifar10]\n" + body
    start = time.monotonic()
    line = _refused(["sweep", str(_sweep(tmp_path, body)), "--dry-run"], tmp_path, capsys, text)
    assert "raise max_runs" in line and time.monotonic() - start < 5


def test_placements_on_a_32_gpu_domain_are_planned_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    labels = [f"GPU{i}" for i in range(32)]
    matrix = [["X" if a == b else "NV18" if a // 8 == b // 8 else "SYS" for b in range(32)] for a in range(32)]
    (tmp_path / "t.json").write_text(json.dumps({"labels": labels, "matrix": matrix,
                                                 "gpus": [{"index": i} for i in range(32)]}))
    start = time.monotonic()
    assert main(["topo", "--file", str(tmp_path / "t.json")]) == 0
    assert time.monotonic() - start < 10 and "NV18:0,1,2,3,4,5,6,7" in capsys.readouterr().out


def test_a_long_list_in_a_message_is_shortened(tmp_path: Path) -> None:
    RunSpec(benchmark="cifar10", np=100_000).write(tmp_path / "big")
    reason = collect([tmp_path]).runs.iloc[0]["reason"]
    assert reason.startswith("incomplete: no summary from rank(s) [0, 1, 2") and len(reason) < 200


# --- 7 and 8: the common collectives run, and messages that were unclear
def test_a_collectives_run_of_one_op_reports(tmp_path: Path) -> None:
    spec = RunSpec(benchmark="collectives", np=2, launcher="mpirun", controller="mpi")
    run = tmp_path / spec.id
    spec.write(run)
    for rank in range(2):
        with RecordWriter(run / rank_log_name(rank), rank=rank, local_rank=rank, size=2) as writer:
            writer.write("env", benchmark="collectives", unit="GB/s")
            for nbytes in (1024, 4096):
                writer.write("comm", op="allreduce", backend="horovod", dtype="fp32", bytes=nbytes, times=[1e-4] * 5)
            writer.write("summary", unit="GB/s", cases=2)
    _, paths = build_report([tmp_path], tmp_path / "out")
    assert "Collective bus bandwidth" in paths["html"].read_text()


def test_a_finished_run_with_a_garbage_status_reads_as_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path, RunSpec(benchmark="cifar10", np=1), [[0.1] * 25])
    (run / "status.json").write_text("[1, 2]")
    text, _ = build_report([tmp_path], tmp_path / "out")
    assert "1 malformed log line(s) in 1 file(s)" in text  # the unreadable status.json, named in report.md
    assert collect([tmp_path]).runs.iloc[0]["status"] == "ok"
    assert main(["status", str(tmp_path)]) == 0
    assert "complete by its rank logs" in capsys.readouterr().out


def test_warmup_beyond_every_run_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_run(tmp_path / "r", RunSpec(benchmark="cifar10", np=1), [[0.1] * 25])
    _refused(["report", str(tmp_path / "r"), "--warmup", "500"], tmp_path, capsys,
             "--warmup 500 leaves no steps: the longest run has 27")


def test_a_failing_squeue_is_one_line() -> None:
    from hvdbench.launchers.slurm_queue import squeue_states
    from hvdbench.core.errors import LaunchError


    class Failed:
        returncode, stdout = 1, ""
        stderr = "slurm_load_jobs error: Unable to contact slurm controller\nsecond line\nthird line\n"

    with pytest.raises(LaunchError) as err:
        squeue_states(["12"], run=lambda *a, **k: Failed())
    assert "\n" not in str(err.value) and "Unable to contact slurm controller" in str(err.value)


def test_an_unexpected_error_is_one_line_and_a_traceback_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    import hvdbench.cli.status as status

    def broken(*_: Any, **__: Any) -> int:
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(status, "cmd_status", broken)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert main(["status", str(tmp_path)]) == 3
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("hvdbench: internal error: ZeroDivisionError: planted (traceback in ")
    assert "ZeroDivisionError" in Path(line.split("traceback in ")[1].split(";")[0]).read_text()
    monkeypatch.setenv("HVDBENCH_DEBUG", "1")
    assert main(["status", str(tmp_path)]) == 3
    assert "Traceback (most recent call last)" in capsys.readouterr().err
