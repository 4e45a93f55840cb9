"""make test runs the tests two at a time (scripts/test.sh, pytest-xdist's loadgroup): those that start this machine's
shared services (munged, SLURM's daemons, sshd, network namespaces) must all land in one worker, first, and each
file's others together (its module fixtures made once)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

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
