"""Golden argv of every launcher: one exact row per registered launcher (a new launcher is its module and
its row here), then representative DGX runs with options compared as sets where order is free and the
rank command (interpreter, binder, script, arguments) compared exactly."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hvdbench.launchers.base import LaunchContext, get_launcher, launcher_class, launcher_names
from hvdbench.core.catalog import get_benchmark
from hvdbench.core.errors import UsageError
from hvdbench.core.spec import CONTROLLERS, RunSpec

PY = "/opt/venv/bin/python"
RUN_DIR = Path("/results/dgx/run-1")
IMAGENET = str(get_benchmark("imagenet").path)
KNOBS = (("HOROVOD_CYCLE_TIME", "3.5"), ("HOROVOD_FUSION_THRESHOLD", str(128 * 1024 * 1024)),
         ("HOROVOD_HIERARCHICAL_ALLREDUCE", "1"), ("HOROVOD_TIMELINE", "timeline.json"),
         ("NCCL_ALGO", "Ring"), ("NCCL_SOCKET_IFNAME", "ib0"))


CIFAR = str(get_benchmark("cifar10").path)
TAIL = [PY, CIFAR, "--batch-size", "32", "--log-dir", "/r/run"]
# One row per launcher: a 2-node, 4-rank run with a Horovod knob and a NIC, its controller, the exact argv.
GOLDEN: dict[str, tuple[str, list[str]]] = {
    "horovodrun": ("gloo", ["horovodrun", "-np", "4", "-H", "n1:2,n2:2", "--gloo", "--cycle-time-ms", "2", *TAIL]),
    "mpiexec": ("mpi", ["mpiexec", "-n", "4", "-ppn", "2", "-hosts", "n1,n2", "-genvlist",
                        "HOROVOD_CYCLE_TIME,LD_LIBRARY_PATH,NCCL_SOCKET_IFNAME,PATH,PYTHONPATH", *TAIL]),
    "mpirun": ("mpi", ["mpirun", "-np", "4", "-H", "n1:2,n2:2", "-bind-to", "none", "-map-by", "slot",
                       "-mca", "btl_tcp_if_include", "ib0",
                       "-mca", "oob_tcp_if_include", "ib0", "-x", "HOROVOD_CYCLE_TIME", "-x", "LD_LIBRARY_PATH",
                       "-x", "NCCL_SOCKET_IFNAME", "-x", "PATH", "-x", "PYTHONPATH", *TAIL]),
    "srun": ("mpi", ["srun", "--mpi=pmix", "--nodes=2", "--ntasks=4", "--ntasks-per-node=2", "--kill-on-bad-exit=1",
                     "--cpu-bind=none", "--job-name=hvdbench-cifar10", *TAIL]),
    # one torchrun agent per node through srun, meeting at the first node's c10d rendezvous
    "torchrun": ("c10d", ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--nodelist=n1,n2",
                          "--kill-on-bad-exit=1", "--cpu-bind=none", "--job-name=hvdbench-cifar10", PY, "-m",
                          "torch.distributed.run", "--nproc-per-node=2", "--nnodes=2", "--rdzv-backend=c10d",
                          "--rdzv-endpoint=n1:29400", "--rdzv-id=cifar10-np4-n2-r0-{id}", "--max-restarts=0",
                          "--no-python", *TAIL]),
}


def test_every_registered_launcher_has_a_golden_row_and_declares_its_capabilities() -> None:
    assert sorted(GOLDEN) == launcher_names()
    for name in launcher_names():
        cls = launcher_class(name)
        assert cls.name == name and cls.controllers and set(cls.controllers) <= set(CONTROLLERS)
        assert isinstance(cls.needs_hosts, bool) and isinstance(cls.task_per_rank, bool)


@pytest.mark.parametrize("name", launcher_names())
def test_golden_argv(name: str) -> None:
    controller, expected = GOLDEN[name]
    spec = RunSpec(benchmark="cifar10", args=("--batch-size", "32"), np=4, nodes=2, launcher=name,
                   controller=controller, env=(("HOROVOD_CYCLE_TIME", "2"), ("NCCL_SOCKET_IFNAME", "ib0")))
    ctx = LaunchContext(python=PY, run_dir=Path("/r/run"), hosts=("n1", "n2"))
    assert get_launcher(name).command(spec, ctx) == [a.replace("cifar10-np4-n2-r0-{id}", spec.id) for a in expected]


@pytest.mark.parametrize("name", launcher_names())
def test_each_launcher_refuses_a_controller_it_does_not_start(name: str) -> None:
    cls = launcher_class(name)
    for controller in set(CONTROLLERS) - set(cls.controllers):
        with pytest.raises(UsageError, match=f"launcher {name} (runs Horovod's|starts torch.distributed's) .* not "
                                             f"'{controller}'"):
            get_launcher(name).command(RunSpec(benchmark="cifar10", launcher=name, controller=controller),
                                       LaunchContext(python=PY, run_dir=Path("/r/run")))


def _dgx_spec(launcher: str, controller: str = "mpi", **kw: object) -> RunSpec:
    fields = dict(benchmark="imagenet", args=("--model", "resnet50", "--batch-size", "64"), np=16, nodes=2,
                  launcher=launcher, controller=controller, env=KNOBS, placement="all",
                  devices=tuple(range(8)), cpus=("0-19",) * 4 + ("20-39",) * 4)
    fields.update(kw)
    return RunSpec(**fields)  # type: ignore[arg-type]


def _options(argv: list[str], end: int) -> set[tuple[str, ...]]:
    """Pairs of (flag, value) / (flag,) up to index end: the part whose order is free."""
    out: set[tuple[str, ...]] = set()
    i = 0
    while i < end:
        if i + 1 < end and not argv[i + 1].startswith("-") and argv[i] not in ("--hierarchical-allreduce",):
            out.add((argv[i], argv[i + 1]))
            i += 2
        else:
            out.add((argv[i],))
            i += 1
    return out


RANK = [PY, "-m", "hvdbench.core.bind", ";".join(["0-19"] * 4 + ["20-39"] * 4), "--", IMAGENET,
        "--model", "resnet50", "--batch-size", "64", "--log-dir", str(RUN_DIR)]


def test_horovodrun_turns_knobs_into_its_flags_and_reaches_hosts_over_ssh() -> None:
    ctx = LaunchContext(python=PY, run_dir=RUN_DIR, hosts=("node1", "node2"), ssh_port=2222,
                        ssh_identity_file=Path("/keys/id"))
    argv = get_launcher("horovodrun").command(_dgx_spec("horovodrun", "gloo"), ctx)
    assert argv[0] == "horovodrun" and argv[-len(RANK):] == RANK
    assert _options(argv[1:-len(RANK)], len(argv) - 1 - len(RANK)) == {
        ("-np", "16"), ("-H", "node1:8,node2:8"), ("--gloo",), ("--cycle-time-ms", "3.5"),
        ("--fusion-threshold-mb", "128"), ("--hierarchical-allreduce",),
        ("--timeline-filename", "/results/dgx/run-1/timeline.json"), ("--ssh-port", "2222"),
        ("--ssh-identity-file", "/keys/id")}


def test_horovodrun_leaves_an_odd_fusion_threshold_to_the_environment() -> None:
    spec = RunSpec(benchmark="cifar10", np=2, env=(("HOROVOD_FUSION_THRESHOLD", "1000"),
                                                   ("HOROVOD_HIERARCHICAL_ALLREDUCE", "0")))
    launcher = get_launcher("horovodrun")
    argv = launcher.command(spec, LaunchContext(python=PY, run_dir=RUN_DIR))
    assert "--fusion-threshold-mb" not in argv and "--no-hierarchical-allreduce" in argv
    assert launcher.environment(spec)["HOROVOD_FUSION_THRESHOLD"] == "1000"


def test_mpirun_has_horovods_flags_every_knob_exported_nic_and_ssh() -> None:
    ctx = LaunchContext(python=PY, run_dir=RUN_DIR, hosts=("node1", "node2"), ssh_port=2222,
                        ssh_identity_file=Path("/keys/id"))
    argv = get_launcher("mpirun").command(_dgx_spec("mpirun", transport="ucx"), ctx)
    assert argv[0] == "mpirun" and argv[-len(RANK):] == RANK
    options = argv[1:-len(RANK)]
    pairs, mca, i = set(), set(), 0
    while i < len(options):  # "-mca NAME VALUE" triples, every other option a pair
        if options[i] == "-mca":
            mca.add(tuple(options[i + 1:i + 3]))
            i += 3
        else:
            pairs.add(tuple(options[i:i + 2]))
            i += 2
    assert pairs == {("-np", "16"), ("-H", "node1:8,node2:8"), ("-bind-to", "none"), ("-map-by", "slot"),
                     *{("-x", name) for name in ("CUDA_VISIBLE_DEVICES", "HOROVOD_CYCLE_TIME", "HVDBENCH_DEVICES",
                                                 "HOROVOD_FUSION_THRESHOLD", "HOROVOD_HIERARCHICAL_ALLREDUCE",
                                                 "HOROVOD_TIMELINE", "LD_LIBRARY_PATH", "NCCL_ALGO",
                                                 "NCCL_SOCKET_IFNAME", "PATH", "PYTHONPATH")}}
    assert mca == {("pml", "ucx"), ("osc", "ucx"), ("btl_tcp_if_include", "ib0"),
                   ("oob_tcp_if_include", "ib0"), ("plm_rsh_args", "-p 2222 -i /keys/id")}


def test_mpirun_leaves_nic_patterns_to_nccl() -> None:
    spec = RunSpec(benchmark="cifar10", np=2, launcher="mpirun", controller="mpi",
                   env=(("NCCL_SOCKET_IFNAME", "^docker0,lo"),))
    argv = get_launcher("mpirun").command(spec, LaunchContext(python=PY, run_dir=RUN_DIR))
    assert "btl_tcp_if_include" not in argv and "NCCL_SOCKET_IFNAME" in argv


def test_srun_one_task_per_gpu_with_pmix_or_pmi2() -> None:
    for pmi in ("pmix", "pmi2"):
        argv = get_launcher("srun").command(_dgx_spec("srun"), LaunchContext(python=PY, run_dir=RUN_DIR, pmi=pmi))
        assert argv[0] == "srun" and argv[-len(RANK):] == RANK
        assert set(argv[1:-len(RANK)]) == {f"--mpi={pmi}", "--nodes=2", "--ntasks=16", "--ntasks-per-node=8",
                                           "--kill-on-bad-exit=1", "--cpu-bind=none", "--job-name=hvdbench-imagenet"}
    assert get_launcher("srun").environment(_dgx_spec("srun"))["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    # in a job granted GPUs, SLURM's CUDA_VISIBLE_DEVICES stands and the placement travels by name
    granted = get_launcher("srun").environment(_dgx_spec("srun", transport="tcp"), scheduler_gpus=True)
    assert "CUDA_VISIBLE_DEVICES" not in granted and granted["HVDBENCH_DEVICES"] == "0,1,2,3,4,5,6,7"
    assert granted["OMPI_MCA_pml"] == "ob1" and granted["OMPI_MCA_btl"] == "self,vader,tcp"


@pytest.mark.parametrize("transport, mca", [(None, []),
                                            ("tcp", ["-mca", "pml", "ob1", "-mca", "btl", "self,vader,tcp"]),
                                            ("ucx", ["-mca", "pml", "ucx", "-mca", "osc", "ucx"])])
def test_mpirun_transport_auto_leaves_open_mpi_its_choice(transport: str | None, mca: list[str]) -> None:
    spec = RunSpec(benchmark="cifar10", np=2, launcher="mpirun", controller="mpi", transport=transport)
    argv = get_launcher("mpirun").command(spec, LaunchContext(python=PY, run_dir=RUN_DIR))
    assert argv[:9] == ["mpirun", "-np", "2", "-H", "localhost:2", "-bind-to", "none", "-map-by", "slot"]
    assert argv[9:9 + len(mca)] == mca and argv[9 + len(mca)] == "-x"


def test_mpiexec_speaks_hydra_with_ssh_and_tcp() -> None:
    ctx = LaunchContext(python=PY, run_dir=RUN_DIR, hosts=("node1", "node2", "node3"), ssh_port=2222,
                        ssh_identity_file=Path("/keys/id"))
    launcher = get_launcher("mpiexec")
    argv = launcher.command(_dgx_spec("mpiexec", transport="tcp"), ctx)
    assert argv[:-len(RANK)] == [
        "env", "HVDBENCH_SSH_ARGS=-p 2222 -i /keys/id", "mpiexec", "-n", "16", "-ppn", "8", "-hosts", "node1,node2",
        "-bootstrap", "ssh", "-bootstrap-exec", str(Path(PY).parent / "hvdbench-ssh"), "-genvlist",
        "CUDA_VISIBLE_DEVICES,FI_PROVIDER,HOROVOD_CYCLE_TIME,"
        "HOROVOD_FUSION_THRESHOLD,HOROVOD_HIERARCHICAL_ALLREDUCE,HOROVOD_TIMELINE,HVDBENCH_DEVICES,LD_LIBRARY_PATH,"
        "NCCL_ALGO,NCCL_SOCKET_IFNAME,PATH,PYTHONPATH,UCX_TLS"]
    assert argv[-len(RANK):] == RANK
    assert launcher.environment(_dgx_spec("mpiexec", transport="tcp"))["FI_PROVIDER"] == "tcp"
    with pytest.raises(UsageError, match="launcher mpiexec selects transport auto or tcp only .* not 'ucx'"):
        launcher.command(_dgx_spec("mpiexec", transport="ucx"), ctx)
    with pytest.raises(UsageError, match="needs 2 node.s. but 1 host"):
        launcher.command(_dgx_spec("mpiexec"), LaunchContext(python=PY, run_dir=RUN_DIR))
    in_job = launcher.command(_dgx_spec("mpiexec"), replace(ctx, ssh_port=None, ssh_identity_file=None,
                                                            scheduler="slurm"))
    assert in_job[:9] == ["mpiexec", "-n", "16", "-ppn", "8", "-hosts", "node1,node2", "-bootstrap", "slurm"]


MPICH = "HYDRA build details:\n    Version:                                 4.0.2\n"
INTEL = "Intel(R) MPI Library for Linux* OS, Version 2021.10 Build 20230619\n"
OPEN_MPI = "mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n"


@pytest.mark.parametrize("name, output, problem", [
    ("mpirun", OPEN_MPI, None), ("mpirun", MPICH, "mpirun on PATH is MPICH, not Open MPI: use launcher mpiexec"),
    ("mpirun", INTEL, "is Intel MPI, not Open MPI: use launcher mpiexec"), ("mpiexec", MPICH, None),
    ("mpiexec", INTEL, None),
    ("mpiexec", OPEN_MPI, "is Open MPI, not hydra (MPICH, Intel MPI): use launcher mpirun"),
    ("mpiexec", "something else 1.0", "is not hydra (MPICH, Intel MPI): it says 'something else 1.0'")])
def test_the_version_output_decides_which_mpi_syntax_applies(name: str, output: str, problem: str | None) -> None:
    found = get_launcher(name).flavour_problem(output)
    assert found == problem if problem is None else problem in found


def test_srun_refuses_gloo_and_unknown_pmi() -> None:
    with pytest.raises(UsageError, match="mpi controller only .SLURM starts the ranks through PMI"):
        get_launcher("srun").command(_dgx_spec("srun", "gloo"), LaunchContext(python=PY, run_dir=RUN_DIR))
    with pytest.raises(UsageError,
                       match="'pmi1' is not one of pmix, pmix_v2, pmix_v3, pmix_v4, pmix_v5, pmi2, cray_shasta"):
        get_launcher("srun").command(_dgx_spec("srun"), LaunchContext(python=PY, run_dir=RUN_DIR, pmi="pmi1"))


@pytest.mark.parametrize("pmi", ["pmix_v4", "cray_shasta"])
def test_srun_takes_the_pmi_plugin_names_clusters_show(pmi: str) -> None:
    argv = get_launcher("srun").command(_dgx_spec("srun"), LaunchContext(python=PY, run_dir=RUN_DIR, pmi=pmi))
    assert argv[:2] == ["srun", f"--mpi={pmi}"]


def test_no_binding_without_cpu_lists() -> None:
    spec = RunSpec(benchmark="cifar10", np=2, launcher="srun", controller="mpi")
    argv = get_launcher("srun").command(spec, LaunchContext(python=PY, run_dir=RUN_DIR))
    assert "hvdbench.core.bind" not in argv and argv[-4:-2] == [PY, str(get_benchmark("cifar10").path)]


def test_torchrun_on_one_node_picks_its_own_port_and_keeps_the_binder() -> None:
    spec = RunSpec(benchmark="cifar10", args=("--exchange", "ddp"), np=2, launcher="torchrun", controller="c10d",
                   cpus=("0", "1"))
    argv = get_launcher("torchrun").command(spec, LaunchContext(python=PY, run_dir=Path("/r/run")))
    assert argv == [PY, "-m", "torch.distributed.run", "--nproc-per-node=2", "--standalone", "--nnodes=1",
                    "--max-restarts=0", "--no-python", PY, "-m", "hvdbench.core.bind", "0;1", "--", CIFAR,
                    "--exchange", "ddp", "--log-dir", "/r/run"]


@pytest.mark.parametrize("benchmark, args, says", [
    ("cifar10", (), "--exchange horovod needs Horovod, which torchrun does not start"),
    ("tf_mlp", (), "tf_mlp with launcher torchrun: its ranks meet through Horovod"),
    ("collectives", (), "collectives with launcher torchrun: its ranks meet through Horovod")])
def test_torchrun_refuses_what_needs_horovod_in_one_line(benchmark: str, args: tuple[str, ...], says: str) -> None:
    from hvdbench.launchers.plan import plan
    from hvdbench.launchers.runs import benchmark_sweep
    from hvdbench.launchers.sweep import SweepError

    sweep = benchmark_sweep(benchmark, list(args), np=[2], launcher="torchrun", controller=None, repeats=1,
                            system="s", timeout=60, devices=None, topology=None)
    with pytest.raises(SweepError, match=says):
        plan(sweep)
