"""make test runs the tests two at a time (scripts/test.sh; the scheduler: tests/worker_groups.py): those that start
this machine's shared services (munged, SLURM's daemons, sshd, network namespaces) must all land in one worker,
first, and each file's others together (its module fixtures made once)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import MACHINE_FIXTURES, REPO, _group


def test_every_session_fixture_is_one_of_the_machines_services() -> None:
    """A session fixture starts something for the whole run; one missing from MACHINE_FIXTURES would be started a
    second time in the other worker, beside the first (forced: each is named there)."""
    source = (REPO / "tests" / "conftest.py").read_text()
    session = set(re.findall(r'@pytest\.fixture\(scope="session"\)\ndef (\w+)', source))
    assert session and session == MACHINE_FIXTURES


def test_a_test_using_the_machine_goes_to_its_group_and_the_others_by_file() -> None:
    def item(*fixtures: str) -> SimpleNamespace:
        return SimpleNamespace(fixturenames=["tmp_path", *fixtures], path=Path("tests/test_some_file.py"))

    assert {_group(item(name)) for name in MACHINE_FIXTURES} == {"machine"}
    assert _group(item("hvd_env")) == _group(item()) == "test_some_file"


RECORDER = '''import os
def pytest_runtest_logstart(nodeid, location):
    if "PYTEST_XDIST_WORKER" in os.environ:  # not the controller, which is told of each start too
        with open(os.environ["WHERE_RAN"], "a") as out:
            out.write(os.environ["PYTEST_XDIST_WORKER"] + " " + nodeid + "\\n")
'''


@pytest.mark.slow  # starts pytest with two workers; nothing is run (--setup-plan)
def test_two_workers_run_the_machines_tests_in_one_and_each_files_others_in_one(tmp_path: Path) -> None:
    """The scheduling itself, as make test runs it: pytest-xdist's own loadgroup silently stopped grouping under
    pytest 9.2 (both workers then started a SLURM cluster of their own, side by side)."""
    (tmp_path / "where_ran_recorder.py").write_text(RECORDER)
    where = tmp_path / "where.txt"
    files = ["test_two_hosts_over_ssh.py", "test_two_node_slurm_with_gpus.py", "test_container_image_runs_ranks.py",
             "test_cuda_paths_where_cuda_exists.py", "test_tests_sharing_the_machine_run_in_one_worker.py"]
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}  # under make test
    env.update(WHERE_RAN=str(where), PYTHONPATH=str(tmp_path))  # this is a worker: its name would pass to both
    out = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--setup-plan", "-p", "where_ran_recorder",
                          "-p", "no:cacheprovider", "-q", *(f"tests/{name}" for name in files)],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    ran = [line.split(" ", 1) for line in where.read_text().splitlines()]
    workers: dict[str, set[str]] = {}
    for worker, nodeid in ran:
        path, name = nodeid.split("::", 1)
        machine = path in ("tests/test_two_hosts_over_ssh.py", "tests/test_two_node_slurm_with_gpus.py") or \
            name.startswith(("test_a_two_host_sweep_in_the_image", "test_srun_tasks_on_two_slurm_nodes"))
        workers.setdefault("machine" if machine else path, set()).add(worker)
    assert len(ran) >= 15 and {"machine", "tests/test_cuda_paths_where_cuda_exists.py"} <= set(workers), ran
    assert all(len(used) == 1 for used in workers.values()), workers
    assert len({w for used in workers.values() for w in used}) == 2  # and both workers had work
