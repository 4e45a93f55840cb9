"""SLURM host-list expressions expand in Python, as ``scontrol show hostnames`` would, wherever a host list
is accepted (``--hosts``, an allocation's SLURM_JOB_NODELIST); a malformed or enormous one is one line."""

from __future__ import annotations

import pytest

from hvdbench.core.hostlist import hosts_of
from hvdbench.core.hostlist import expand_hostlist
from hvdbench.core.errors import UsageError

pytestmark = pytest.mark.bad_input


@pytest.mark.parametrize("text, hosts", [
    ("node[01-04,07]", ("node01", "node02", "node03", "node04", "node07")),
    ("gpu[1-2]-ib[0-1]", ("gpu1-ib0", "gpu1-ib1", "gpu2-ib0", "gpu2-ib1")),
    ("a,b[1-2],c", ("a", "b1", "b2", "c")),
    ("n[8-11]", ("n8", "n9", "n10", "n11")),  # no padding: widths grow
    ("n[098-101]", ("n098", "n099", "n100", "n101")),
    ("n[1-2],n[2-3]", ("n1", "n2", "n3")),  # named twice: once
    ("solo", ("solo",)), ("n[5]", ("n5",)),
])
def test_host_lists_expand_as_scontrol_would(text: str, hosts: tuple[str, ...]) -> None:
    assert expand_hostlist(text) == hosts


def test_sixteen_nodes_without_a_slurm_client() -> None:
    assert hosts_of("node[01-16]") == tuple(f"node{i:02d}" for i in range(1, 17))


@pytest.mark.parametrize("text, problem", [
    ("node[01-04", "a bracket is not closed"), ("node]1[", "brackets do not nest"),
    ("node[a-b]", "is not numbers and ranges"), ("node[4-1]", "range 4-1 runs backwards"),
    ("a,,b", "an empty item"), ("n[0-999999999]", "names more than 100,000 hosts"),
    ("r[0-999]n[0-999]", "names more than 100,000 hosts"), ("n[[1]]", "brackets do not nest"),
])
def test_a_bad_host_list_is_one_line(text: str, problem: str) -> None:
    with pytest.raises(UsageError) as err:
        hosts_of(text)
    assert problem in str(err.value) and str(err.value).startswith("--hosts: ") and "\n" not in str(err.value)
