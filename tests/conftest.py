"""Shared test helpers: write real run directories in the project's own record format; the markers.

Markers (setup.cfg): ``slow`` for tests that start processes (Horovod ranks, SLURM, ssh, a browser):
``pytest -m "not slow"`` is the quick loop. ``gpu`` tests need CUDA and skip without it; ``no_gpu``
tests check what a machine without CUDA does and skip on a GPU machine; ``tf`` tests need TensorFlow and
skip where set-up left it out (HVDBENCH_TF_SPEC=none); ``mpi`` tests need MPI (Horovod's MPI controller,
mpi4py, mpirun) and skip where set-up built Horovod with Gloo alone (HVDBENCH_MPI=none).

Each premise is judged once, here. On a CUDA machine the slow tests that are not ``gpu`` skip too: their
ranks train with ``--device auto`` on what a machine without GPUs has, the CPU (two ranks on one GPU would
be refused; what they check on the CPU, peak resident memory or "no peak", does not hold on a GPU); the
``gpu`` tests cover the CUDA paths there (``pytest -m gpu``)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, Sequence

import pytest

from hvdbench.launchers import base
from hvdbench.launchers.base import LaunchContext, Launcher
from hvdbench.launchers.schedulers import run_dirs as run_folders  # noqa: F401 - the run folders under a root, for tests
from hvdbench.core.records import RecordWriter, rank_log_name
from hvdbench.core.spec import RunSpec

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
# Open MPI's OFI transport is offered no fabric provider in every process the tests start. horovodrun --mpi passes
# ``-mca btl ^openib``, which replaces the distribution's ``btl = ^uct,openib,ofi`` and so loads that transport,
# whose providers (psm3, verbs) aborted MPI_Init now and then on a machine without the fabric: Open MPI's own
# exclusions, then every fabric provider Debian's libfabric carries.
os.environ.setdefault("OMPI_MCA_btl_ofi_provider_exclude", "shm,sockets,tcp,udp,rstream,usnic,psm2,psm3,verbs,efa,opx")
# Runs the tests make are recorded in a history store of each test process's own, never the user's.
os.environ.setdefault("HVDBENCH_STORE", str(Path(tempfile.mkdtemp(prefix="hvdbench-store-")) / "history.sqlite"))


def cuda_available() -> bool:
    """Whether this machine has a CUDA device PyTorch can use."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """How many bad inputs and faults the run tried (tests marked ``bad_input``, each case counted), and how
    many were handled as they should be."""
    reports = [r for outcome in ("passed", "failed") for r in terminalreporter.stats.get(outcome, [])
               if getattr(r, "when", "") == "call" and "bad_input" in getattr(r, "keywords", {})]
    if reports:
        handled = sum(r.passed for r in reports)
        terminalreporter.write_line(f"bad inputs and faults tried: {len(reports)}, handled: {handled}")


def mpi_missing() -> str | None:
    """Why MPI tests cannot run here (None where they can): set-up installs mpi4py exactly where it built
    Horovod with MPI."""
    if shutil.which("mpirun") is None:
        return "needs MPI: mpirun is not on PATH"
    if importlib.util.find_spec("mpi4py") is None:
        return "needs MPI: set-up built Horovod with Gloo alone here (HVDBENCH_MPI=none: no mpi4py)"
    return None


def _skip(items: list[pytest.Item], marker: str, reason: str | None) -> None:
    for item in items:
        if reason and item.get_closest_marker(marker):
            item.add_marker(pytest.mark.skip(reason=reason))


# The session fixtures that start this machine's shared services (munged, SLURM's daemons, sshd, network namespaces
# and the known_hosts entries that reach them): every test using one runs in one pytest worker (see _group)
MACHINE_FIXTURES = frozenset({"single_host_cluster", "two_node_cluster", "ssh_host", "namespace_host"})


def _group(item: pytest.Item) -> str:
    """The tests run together, one after the other, in one worker where make test runs two (pytest-xdist's
    loadgroup): those that start the machine's shared services, and each file's others (its module fixtures, made
    once)."""
    return "machine" if MACHINE_FIXTURES & set(getattr(item, "fixturenames", ())) else item.path.stem


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``--dist loadgroup`` (setup.cfg), each group to one worker whole (tests/worker_groups.py)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    import worker_groups

    return worker_groups.GroupScheduling(config, log, worker_groups.groups_file(config))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Each worker is told where to write the groups it collected."""
    if node.config.getvalue("dist") == "loadgroup":
        import worker_groups

        node.workerinput[worker_groups.WORKER_INPUT] = str(worker_groups.groups_file(node.config))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker sends its collection to the scheduler
def pytest_collection_finish(session: pytest.Session) -> None:
    """A worker writes each test's group (node id -> group) where the scheduler reads it."""
    workerinput = getattr(session.config, "workerinput", None)
    if workerinput is None:
        return
    import worker_groups

    path = workerinput.get(worker_groups.WORKER_INPUT)
    if path:
        worker_groups.write(Path(path), {item.nodeid: _group(item) for item in session.items})


def pytest_unconfigure(config: pytest.Config) -> None:
    """The controller removes the groups file it made (only where it imported worker_groups to make one)."""
    if "worker_groups" in sys.modules and not hasattr(config, "workerinput"):
        sys.modules["worker_groups"].remove(config)


@pytest.hookimpl(tryfirst=True)  # the order set before other plugins read the items
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip each test whose premise does not hold here, saying why: ``gpu`` without CUDA; ``no_gpu`` and the
    other slow tests with it; ``tf`` without TensorFlow; ``mpi`` without MPI. The tests of the machine's shared
    services go first (one worker runs them all while the other runs the rest), the ``late`` ones last, the
    ``other_mpi`` ones (the longest build) at the very end: make test builds what they need while the others run
    (scripts/test.sh)."""
    items.sort(key=lambda item: (item.get_closest_marker("late") is not None,  # stable: the rest keep their order
                                 item.get_closest_marker("other_mpi") is not None,
                                 _group(item) != "machine"))
    if any(item.get_closest_marker("tf") for item in items) and importlib.util.find_spec("tensorflow") is None:
        _skip(items, "tf", "needs TensorFlow (set-up left it out: HVDBENCH_TF_SPEC=none)")
    if any(item.get_closest_marker("mpi") for item in items):
        _skip(items, "mpi", mpi_missing())
    if not any(item.get_closest_marker(m) for item in items for m in ("gpu", "no_gpu", "slow")):
        return
    cuda = cuda_available()
    for item in items:
        if item.get_closest_marker("gpu") and not cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device (runs on GPU machines)"))
        elif item.get_closest_marker("no_gpu") and cuda:
            item.add_marker(pytest.mark.skip(reason="checks the no-GPU path; this machine has CUDA "
                                                    "(its gpu-marked twin runs instead)"))
        elif item.get_closest_marker("slow") and not item.get_closest_marker("gpu") and cuda:
            item.add_marker(pytest.mark.skip(reason="starts ranks with --device auto, which train on the CPU only "
                                                    "where there is no GPU; here they would take this machine's "
                                                    "GPU(s), two ranks two of them: pytest -m gpu covers CUDA"))


def setup_requirements() -> list[str]:
    """Every requirement set-up installs besides the frameworks' own specs: setup.cfg's with the extras set-up
    asks for, and Horovod's build and run requirements (comments and blank lines dropped)."""
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    lines = cfg["options"]["install_requires"].splitlines() + [
        line for extra in ("mpi", "slurm", "gpu", "report", "test", "lint")
        for line in cfg["options.extras_require"][extra].splitlines()]
    lines += (REPO / "scripts" / "horovod-requirements.txt").read_text().splitlines()
    return [kept for line in lines if (kept := line.split("#")[0].strip())]


def write_run(root: Path, spec: RunSpec, durations: Sequence[Sequence[float]], *, samples: int = 32,
              warmup: int = 2, summary: bool = True, telemetry: dict | Sequence[dict] | None = None,
              gpu: dict | Sequence[dict] | None = None, unit: str = "images", host: str | None = None,
              env: dict | None = None, final: Sequence[dict] | None = None) -> Path:
    """A run directory as the harness writes it: run.json and one log per rank.

    ``durations[r]`` are rank r's timed step durations; ``warmup`` slow steps come first. ``telemetry`` and
    ``gpu`` (the env record's NVML facts) are one dict for every rank or one per rank; ``env`` adds fields to
    every rank's env record; ``final[r]`` adds fields to rank r's summary (its parameter checksum).
    """
    def of(value: dict | Sequence[dict] | None, rank: int) -> dict | None:
        return value if value is None or isinstance(value, dict) else value[rank]

    run_dir = root / spec.id
    spec.write(run_dir)
    for rank, steps in enumerate(durations):
        with RecordWriter(run_dir / rank_log_name(rank), rank=rank, local_rank=rank, size=len(durations)) as w:
            where = {"host": host} if host else {}
            w.write("env", benchmark=spec.benchmark, model="resnet20", unit=unit, gpu=of(gpu, rank),
                    **{**where, **(env or {})})
            w.write("phase", phase="warmup", steps=warmup, **where)
            for i in range(warmup):
                w.write("step", step=i, warmup=True, duration=5.0, samples=samples, loss=2.3, **where)
            w.write("phase", phase="timed", steps=len(steps), **where)
            for _ in range(3 if telemetry else 0):  # the sampler runs while the steps are timed
                w.write("telemetry", **of(telemetry, rank), **where)  # type: ignore[arg-type]
            for i, d in enumerate(steps, warmup):
                w.write("step", step=i, warmup=False, duration=d, samples=samples, loss=2.3, **where)
            if summary:
                w.write("summary", steps=len(steps), samples=samples * len(steps), window_s=sum(steps),
                        median_step_s=sorted(steps)[len(steps) // 2], throughput=samples * len(steps) / sum(steps),
                        **where, **(final[rank] if final else {}))
    return run_dir


class ScriptLauncher(Launcher):
    """Runs a Python snippet chosen by the spec's first argument instead of a benchmark."""

    name = "script"
    SNIPPETS = {
        "hang": "import subprocess, sys, time; "
                "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']);"
                " time.sleep(120)",
        "crash": "import sys; print('[1,1]<stderr>:ValueError: rank 1 exploded', flush=True); sys.exit(3)",
        "quiet": "pass",
        # fails (exit 3) on its first attempt, then writes a complete 1-rank log: what a retry is for
        "flaky": "import os, sys\nif not os.path.isdir('attempt-1'):\n    print('error: rank 0: connection reset', "
                 "flush=True); sys.exit(3)\nfrom hvdbench.core.records import RecordWriter\n"
                 "with RecordWriter('rank-0.jsonl', rank=0, local_rank=0, size=1) as w:\n"
                 "    w.write('step', step=0, warmup=False, duration=1.0, samples=1, loss=1.0)\n"
                 "    w.write('summary', steps=1, samples=1, window_s=1.0, median_step_s=1.0, throughput=1.0)",
    }

    def command(self, spec: RunSpec, ctx: LaunchContext) -> list[str]:
        return [ctx.python, "-c", self.SNIPPETS[spec.args[0]]]


@pytest.fixture(scope="module")
def postgres():  # type: ignore[no-untyped-def]
    """A real PostgreSQL server for this file's tests (tests/postgres_server.py); each test makes its own database."""
    from postgres_server import missing, start_postgres

    why = missing()
    if why:
        pytest.skip(f"a PostgreSQL store {why}")
    server = start_postgres()
    try:
        yield server
    finally:
        try:
            server.stop()
        except subprocess.SubprocessError:
            pass  # a test left it stopped
        shutil.rmtree(server.folder, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A new store: an SQLite file, or a database of its own on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return str(tmp_path / "h.sqlite")
    return str(request.getfixturevalue("postgres").database())


@pytest.fixture
def script_launcher(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The test launcher is registered only while these tests run (the registry is process-wide)."""
    monkeypatch.setitem(base._REGISTRY, ScriptLauncher.name, ScriptLauncher)
    yield


BUSY_NEIGHBOURS = 2  # a 2-core CI machine's cores, each taken by a loop while a ``timing`` test runs


@pytest.fixture(autouse=True)
def busy_neighbours(request: pytest.FixtureRequest) -> Iterator[None]:
    """A ``timing`` test (one whose result depends on how fast its processes run) runs beside BUSY_NEIGHBOURS busy
    loops at the tests' own priority, as on a shared machine: it must pass that way every time."""
    if request.node.get_closest_marker("timing") is None:
        yield
        return
    loops = [subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"], start_new_session=True)
             for _ in range(BUSY_NEIGHBOURS)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


@pytest.fixture
def hvd_env() -> dict[str, str]:
    """Environment for subprocesses: this interpreter's bin first; Open MPI allowed as root."""
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", PYTHONUNBUFFERED="1")
    return env


def hvdbench_exe() -> str:
    """The installed console script."""
    exe = BIN / "hvdbench"
    return str(exe) if exe.exists() else shutil.which("hvdbench") or "hvdbench"


def _serving(cluster: Any) -> Iterator[Any]:
    """A started cluster for the session, drained and stopped after it."""
    try:
        yield cluster
    finally:
        cluster.drain()
        cluster.stop()


def _reached(cluster: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The cluster, with SLURM_CONF pointing at it for this test and the processes it starts: with both
    test clusters running, each test reaches its own, whichever started last."""
    monkeypatch.setenv("SLURM_CONF", str(cluster.conf))
    return cluster


@pytest.fixture
def slurm_cluster(single_host_cluster: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A real single-host SLURM cluster (munged, slurmctld, slurmd), reached through SLURM_CONF."""
    return _reached(single_host_cluster, monkeypatch)


@pytest.fixture
def gpu_cluster(two_node_cluster: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A real two-node SLURM cluster with 4 GPUs per node as SLURM sees them, reached through SLURM_CONF."""
    return _reached(two_node_cluster, monkeypatch)


@pytest.fixture(scope="session")
def single_host_cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The single-host SLURM cluster, started once for the session."""
    from cluster import missing_slurm_tools, start_slurm

    missing = missing_slurm_tools()
    if missing:
        pytest.skip(f"a test SLURM cluster needs {', '.join(missing)} (scripts/test-tools.sh installs them as root)")
    yield from _serving(start_slurm(tmp_path_factory.mktemp("slurm")))


@pytest.fixture(scope="session")
def two_node_cluster(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """The two-node cluster (network, UTS and mount namespaces; gres.conf on device files), started once
    for the session."""
    from gpu_cluster import missing_gpu_cluster_tools, start_gpu_cluster

    missing = missing_gpu_cluster_tools()
    if missing:
        pytest.skip(f"a two-node test cluster needs {', '.join(missing)} (scripts/test-tools.sh installs them as root)")
    try:
        cluster = start_gpu_cluster(tmp_path_factory.mktemp("gpu-cluster"))
    except (RuntimeError, OSError) as exc:  # e.g. a container without CAP_NET_ADMIN or mknod
        pytest.skip(f"cannot start a two-node cluster here: {str(exc).splitlines()[0]}")
    yield from _serving(cluster)


@pytest.fixture(scope="session")
def ssh_host(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """An sshd on a loopback port accepting a key made here: 127.0.0.1 as a second host."""
    from cluster import find, start_sshd

    missing = [tool for tool in ("sshd", "ssh", "ssh-keygen") if not find(tool)]
    if missing:
        pytest.skip(f"multi-node tests need {', '.join(missing)} (scripts/test-tools.sh installs them as root)")
    host = start_sshd(tmp_path_factory.mktemp("ssh"))
    try:
        yield host
    finally:
        host.stop()


@pytest.fixture(scope="session")
def namespace_host(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A second host with its own name and address (network + UTS namespace, sshd inside)."""
    from cluster import missing_namespace_tools, start_namespace_host

    missing = missing_namespace_tools()
    if missing:
        pytest.skip(f"a namespace host needs {', '.join(missing)} (scripts/test-tools.sh installs them as root)")
    try:
        host = start_namespace_host(tmp_path_factory.mktemp("netns"))
    except RuntimeError as exc:  # e.g. a container without CAP_NET_ADMIN
        pytest.skip(f"cannot make a network namespace here: {exc}")
    try:
        yield host
    finally:
        host.stop()

