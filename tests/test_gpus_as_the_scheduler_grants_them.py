"""Which GPU a rank computes on, from what the launcher and SLURM gave it (core/gpu_choice.py); runs that
fail are started again with every attempt kept (--retries); a partition that cannot hold a run is named
before anything is submitted. All without processes: the two-node cluster tests run the same paths for real."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hvdbench.analysis.collect import collect
from hvdbench.analysis.report.views import problems
from hvdbench.launchers.local import LocalExecutor
from hvdbench.launchers.slurm_jobs import job_parameters, partition_problem
from hvdbench.launchers.slurm_options import SlurmOptions
from hvdbench.core.errors import UsageError
from hvdbench.core.gpu_choice import choose_gpu
from hvdbench.core.spec import RunSpec


@pytest.mark.parametrize("env, local_rank, index, physical, how", [
    ({}, 1, 1, 1, "local rank"),  # nothing set: every GPU visible, CUDA order = physical
    ({"CUDA_VISIBLE_DEVICES": "2,6"}, 1, 1, 6, "local rank"),
    ({"CUDA_VISIBLE_DEVICES": "5"}, 3, 0, 5, "the only visible GPU"),  # --gpus-per-task=1: local rank 3 sees one
    # SLURM with cgroups: granted physical 4,5 renumbered 0,1
    ({"CUDA_VISIBLE_DEVICES": "0,1", "SLURM_STEP_GPUS": "4,5"}, 1, 1, 5, "local rank"),
    # a placement of physical ids among what SLURM granted (renumbered, and as the granted ids)
    ({"CUDA_VISIBLE_DEVICES": "0,1,2,3", "SLURM_JOB_GPUS": "4,5,6,7", "HVDBENCH_DEVICES": "4,7"}, 1, 3, 7,
     "placement among the GPUs SLURM granted"),
    ({"CUDA_VISIBLE_DEVICES": "4,5,6,7", "SLURM_STEP_GPUS": "4,5,6,7", "HVDBENCH_DEVICES": "6,4"}, 0, 2, 6,
     "placement among the GPUs SLURM granted"),
    # outside a scheduler the launcher made exactly the placement visible
    ({"CUDA_VISIBLE_DEVICES": "0,4", "HVDBENCH_DEVICES": "0,4"}, 1, 1, 4, "placement among CUDA_VISIBLE_DEVICES"),
])
def test_each_rank_finds_its_gpu_among_what_it_was_given(env: dict[str, str], local_rank: int, index: int,
                                                         physical: int, how: str) -> None:
    choice = choose_gpu(local_rank, env, host="node1")
    assert (choice.cuda_index, choice.physical, choice.how) == (index, physical, how)


@pytest.mark.parametrize("env, local_rank, count, text", [
    ({"SLURM_STEP_GPUS": "0,1", "CUDA_VISIBLE_DEVICES": "0,1", "HVDBENCH_DEVICES": "0,4"}, 0, None,
     "placement GPU(s) 4 not among the GPUs SLURM granted on node1 (0,1)"),
    ({"CUDA_VISIBLE_DEVICES": "0,1"}, 2, None, "local rank 2 has no GPU: 2 visible (CUDA_VISIBLE_DEVICES=0,1)"),
    ({}, 3, 2, "local rank 3 has no GPU: 2 visible (CUDA_VISIBLE_DEVICES=unset)"),
    ({"HVDBENCH_DEVICES": "0,4"}, 2, None, "local rank 2 has no GPU in placement 0,4"),
    ({"CUDA_VISIBLE_DEVICES": "1,2", "HVDBENCH_DEVICES": "3"}, 0, None, "placement GPU 3 is not visible"),
])
def test_a_gpu_that_is_not_there_is_one_line(env: dict[str, str], local_rank: int, count: int | None,
                                             text: str) -> None:
    with pytest.raises(UsageError) as caught:
        choose_gpu(local_rank, env, count, host="node1")
    assert text in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.usefixtures("script_launcher")
def test_a_failed_run_is_retried_and_every_attempt_is_kept(tmp_path: Path) -> None:
    spec = RunSpec(benchmark="cifar10", args=("flaky",), launcher="script", controller="gloo")
    said: list[str] = []
    status = LocalExecutor(tmp_path, retries=2, report=said.append, scheduler_gpus=False).run(spec)
    assert status.status == "ok"
    assert len(said) == 1 and "attempt 1 failed (error: rank 0: connection reset); retrying, 2 retries left" in said[0]
    first = tmp_path / spec.id / "attempt-1"
    assert "connection reset" in (first / "launcher.log").read_text() and (first / "status.json").exists()
    runs = collect([tmp_path]).runs
    assert runs["attempts"].tolist() == [2] and runs["status"].tolist() == ["ok"]
    assert "attempt-1: failed (error: rank 0: connection reset)" in runs["earlier_attempts"].iloc[0]
    sections = {title: rows for title, _, _, rows in problems(collect([tmp_path]))}
    assert sections["Retried runs"][0][:3] == [spec.id, "ok", "2"]
    # without retries the same failure stays a failure, and is not started again
    again = RunSpec(benchmark="cifar10", args=("crash",), launcher="script", controller="gloo")
    said.clear()
    assert LocalExecutor(tmp_path, retries=0, report=said.append).run(again).status == "failed" and not said


def test_a_placement_slurm_did_not_grant_is_refused_before_any_rank_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script_launcher: None) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv("SLURM_JOB_GPUS", "0,1")
    spec = RunSpec(benchmark="cifar10", args=("quiet",), np=2, launcher="script", controller="gloo", devices=(0, 5))
    said: list[str] = []
    status = LocalExecutor(tmp_path, retries=3, report=said.append).run(spec)
    assert status.status == "failed" and not said  # no retry can change what was granted
    assert "placement GPU(s) 5 not among the GPUs SLURM granted" in status.message
    assert not (tmp_path / spec.id / "command.sh").exists()


def _sinfo(stdout: str):  # type: ignore[no-untyped-def]
    return lambda argv, **_: subprocess.CompletedProcess(argv, 0, stdout, "")


def test_a_run_the_partition_cannot_hold_is_named_before_submitting() -> None:
    nodes = _sinfo("node1|gpu:a100:4|gpu*\nnode2|gpu:a100:4|gpu*\nlogin|(null)|cpu\n")
    options = SlurmOptions()
    three = RunSpec(benchmark="cifar10", np=3, nodes=3, launcher="srun", controller="mpi")
    wide = RunSpec(benchmark="cifar10", np=16, nodes=2, launcher="srun", controller="mpi")
    placed = RunSpec(benchmark="cifar10", np=2, launcher="srun", controller="mpi", devices=(0, 6))
    fits = RunSpec(benchmark="cifar10", np=8, nodes=2, launcher="srun", controller="mpi")
    assert partition_problem([fits], options, nodes) is None
    assert f"run {three.id} needs 3 nodes but the default partition has 2" == partition_problem([three], options, nodes)
    assert "needs 8 GPU(s) on each of 2 node(s) but the default partition's nodes declare 4" in \
        partition_problem([wide, fits], options, nodes)
    assert "needs 7 GPU(s)" in partition_problem([placed], options, nodes)
    assert partition_problem([wide], SlurmOptions(gpus=False), nodes) is None  # a CPU sweep asks no GPUs
    assert partition_problem([three], options, _sinfo("")) is None  # sinfo cannot say: sbatch judges


@pytest.mark.bad_input
def test_no_partition_where_the_cluster_has_no_default_is_one_line_before_submitting() -> None:
    """sbatch refuses a job without -p where no partition is the default (no '*' in sinfo): said first, naming the
    partitions; where a default exists, or a partition is given, nothing is said."""
    bare = _sinfo("node1|gpu:h100:8|gpu\nnode2|gpu:h100:8|gpu\nlogin|(null)|debug\n")
    fits = RunSpec(benchmark="cifar10", np=8, launcher="srun", controller="mpi")
    assert partition_problem([fits], SlurmOptions(), bare) == (
        "no slurm.partition given and this cluster has no default partition: give slurm.partition (or --partition) "
        "one of debug, gpu")
    assert partition_problem([fits], SlurmOptions(partition="gpu"), bare) is None


def test_jobs_ask_for_what_covers_their_gpus() -> None:
    spec = RunSpec(benchmark="cifar10", np=4, nodes=2, launcher="srun", controller="mpi")
    assert job_parameters(SlurmOptions(), spec, "s")["gpus_per_node"] == 2
    per_task = job_parameters(SlurmOptions(gpus_per_task=True, gpu_type="h100"), spec, "s", retries=2)
    assert per_task["slurm_additional_parameters"]["gpus_per_task"] == "h100:1" and "gpus_per_node" not in per_task
    assert per_task["slurm_additional_parameters"]["requeue"] is True and per_task["tasks_per_node"] == 2
    placed = job_parameters(SlurmOptions(), RunSpec(benchmark="cifar10", np=2, launcher="srun", controller="mpi",
                                                    devices=(1, 5)), "s")
    assert placed["gpus_per_node"] == 6 and placed["slurm_exclusive"] is True


def test_a_typed_gpu_passes_submitits_own_checks_and_reaches_the_job_script(tmp_path: Path) -> None:
    """slurm: {gpu_type: h100} (the docs' example) once died in submitit ("gpus_per_node expected int"): a typed GPU
    goes as --gres=gpu:h100:N (or --gpus-per-task=h100:1), and submitit's own parameter check and script take it."""
    import submitit
    from submitit.slurm.slurm import _make_sbatch_string

    spec = RunSpec(benchmark="cifar10", np=4, nodes=2, launcher="srun", controller="mpi")
    for options, line in ((SlurmOptions(gpu_type="h100", partition="gpu"), "#SBATCH --gres=gpu:h100:2"),
                          (SlurmOptions(gpu_type="h100", gpus_per_task=True), "#SBATCH --gpus-per-task=h100:1")):
        params = job_parameters(options, spec, "s")
        executor = submitit.AutoExecutor(folder=tmp_path / "jobs", cluster="debug")
        executor.update_parameters(**{k: v for k, v in params.items() if not k.startswith("slurm_")})  # generic keys
        slurm = {k.removeprefix("slurm_"): v for k, v in params.items() if k.startswith("slurm_")}
        generic = {k: v for k, v in params.items() if not k.startswith("slurm_") and k != "name"}
        script = _make_sbatch_string(command="true", folder=str(tmp_path / "jobs"), job_name=params["name"],
                                     time=params["timeout_min"], ntasks_per_node=generic["tasks_per_node"],
                                     nodes=generic["nodes"], gpus_per_node=generic.get("gpus_per_node"),
                                     gpus_per_task=generic.get("gpus_per_task"),
                                     **{k: v for k, v in slurm.items() if k not in ("additional_parameters",)},
                                     additional_parameters=slurm.get("additional_parameters"))
        assert line in script, script


def test_a_rank_reading_files_asks_a_cpu_for_each_loader_worker() -> None:
    from hvdbench.launchers.job_shape import cpus_per_rank

    reading = RunSpec(benchmark="imagenet", np=8, nodes=1, launcher="srun", controller="mpi",
                      args=("--data", "files", "--data-dir", "/d", "--loader-workers", "6"))
    assert cpus_per_rank(reading) == 7 and job_parameters(SlurmOptions(), reading, "s")["cpus_per_task"] == 7
    synthetic = RunSpec(benchmark="imagenet", np=8, nodes=1, launcher="srun", controller="mpi")
    assert cpus_per_rank(synthetic) == 1 and "cpus_per_task" not in job_parameters(SlurmOptions(), synthetic, "s")
    one_task = RunSpec(benchmark="imagenet", np=8, nodes=1, launcher="mpirun", controller="mpi",
                       args=("--data", "loader"))
    assert job_parameters(SlurmOptions(), one_task, "s")["cpus_per_task"] == 8 * 3  # every rank of the node
    assert job_parameters(SlurmOptions(cpus_per_task=4), reading, "s")["cpus_per_task"] == 4  # the file's own


def test_submit_and_screen_take_a_jobs_partition_account_qos_and_time(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The same job options on both commands, replacing the file's; a job's time defaults to the run's timeout
    plus a quarter and 5 minutes (gpu-node-2.yaml: timeout 300 s -> 12 minutes, not 60)."""
    from hvdbench.cli import main
    from hvdbench.launchers.schedulers import job_minutes
    from hvdbench.launchers.sweep import load_sweep

    sweep = tmp_path / "s.yaml"
    sweep.write_text("name: s\nlauncher: srun\nworkloads: [{benchmark: mlp}]\naxes: {np: [1]}\n"
                     "slurm: {partition: gpu, time: 30}\n")
    assert main(["submit", str(sweep), "--dry-run", "-o", str(tmp_path / "r"), "--partition", "debug", "--account",
                 "proj", "--qos", "high", "--time", "17"]) == 0
    out = capsys.readouterr().out
    assert "#SBATCH --time=17\n" in out and "#SBATCH --partition=debug\n" in out and "#SBATCH --account=proj\n" in out \
        and "#SBATCH --qos=high\n" in out and "wckey" not in out
    repo = Path(__file__).resolve().parents[1]
    sweep = load_sweep(repo / "launchers" / "sweeps" / "gpu-node-2.yaml")
    assert sweep.scheduler is not None and sweep.scheduler.options.time_min == job_minutes(300) == 12


def test_a_dry_runs_gpu_hours_bill_an_exclusive_job_every_gpu_of_its_node(tmp_path: Path) -> None:
    """A one-GPU screen run in an exclusive job holds its 8-GPU node whole: the dry run's GPU-hours count 8 a job, as
    the scheduler bills them, and say why; a shared job counts the GPUs it asks (0 up to a placement's id)."""
    from hvdbench.launchers.job_shape import NodeShape, NodeShapes
    from hvdbench.launchers.plan import Plan
    from hvdbench.launchers.runs import node_hours
    from hvdbench.launchers.slurm import SlurmExecutor

    alone = [RunSpec(benchmark="cifar10", np=1, launcher="srun", controller="mpi", devices=(gpu,)) for gpu in (0, 7)]
    planned = Plan(specs=tuple(alone), baselines=frozenset(), skipped=())
    said = {}
    for exclusive in (True, False):
        executor = SlurmExecutor(tmp_path, SlurmOptions(exclusive=exclusive, time_min=60), name="screen")
        executor.__dict__["shape"] = NodeShapes((NodeShape(cpus=128, gpus=8), NodeShape(cpus=16, gpus=None)))
        said[exclusive] = node_hours(planned, executor)
    assert said[True].startswith("; node-hours: at most 2.0, GPU-hours: at most 16.0 (exclusive jobs billed every GPU")
    assert said[False].startswith("; node-hours: at most 2.0, GPU-hours: at most 9.0 (every run's nodes")


def test_a_screen_goes_as_one_job_a_node_whose_runs_follow_each_other_past_a_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A screen's runs pinned to two nodes: two jobs (not a job a run), each the widest run's shape with the runs'
    time limits together, shown so in the dry run; srun's runs (a task a rank) stay a job a run; inside the job a
    failed run is recorded and the next one starts."""
    from hvdbench.launchers import slurm_task
    from hvdbench.launchers.plan import Plan
    from hvdbench.launchers.runs import describe_plan
    from hvdbench.launchers.slurm import SlurmExecutor

    specs = [RunSpec(benchmark="cifar10", np=1, devices=(gpu,), host=host) for host in ("node1", "node2")
             for gpu in range(3)]
    executor = SlurmExecutor(tmp_path, SlurmOptions(exclusive=True, time_min=10), name="screen", per_node=True)
    executor.__dict__["shape"] = None
    groups = executor.grouped(specs)
    assert groups is not None and {h: len(g) for h, g in groups.items()} == {"node1": 3, "node2": 3}
    job = executor.node_job(groups["node1"])
    assert job["timeout_min"] == 30 and job["gpus_per_node"] == 3 and job["slurm_additional_parameters"][
        "nodelist"] == "node1"
    lines = list(describe_plan(Plan(tuple(specs), frozenset(), ()), executor, tmp_path))
    assert sum(": one job, its 3 run(s) one after another (" in line for line in lines) == 2
    srun = [RunSpec(benchmark="cifar10", np=1, launcher="srun", controller="mpi", devices=(0,), host="node1")]
    assert executor.grouped(srun) is None and SlurmExecutor(tmp_path, SlurmOptions(), name="s").grouped(specs) is None
    ran: list[str] = []

    def one(spec_data: dict, run_dir: str, python: str, alone: bool = True) -> int:
        ran.append(run_dir)
        assert alone is False  # a failure must not end the task the other runs follow in
        return 3 if len(ran) == 1 else 0

    monkeypatch.setattr(slurm_task, "run_task", one)
    assert slurm_task.run_tasks([({}, "a"), ({}, "b"), ({}, "c")], "python") == 3 and ran == ["a", "b", "c"]
