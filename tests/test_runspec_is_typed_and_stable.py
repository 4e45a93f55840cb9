"""RunSpec: unknown fields are rejected with the valid ones listed; ids are stable; run.json round-trips;
status.json written by several tasks at once lands whole."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hvdbench.core.errors import SpecError
from hvdbench.core.spec import RunSpec, RunStatus


def test_unknown_field_lists_valid_fields() -> None:
    with pytest.raises(SpecError) as err:
        RunSpec.from_dict({"benchmark": "cifar10", "gpus": 4})
    message = str(err.value)
    assert "unknown RunSpec field(s) gpus" in message
    for name in ("benchmark", "np", "nodes", "placement", "controller"):
        assert name in message


def test_id_is_stable_and_depends_on_every_field() -> None:
    a = RunSpec(benchmark="cifar10", args=("--batch-size", "32"), np=2)
    b = RunSpec.from_dict({"benchmark": "cifar10", "args": ["--batch-size", "32"], "np": 2})
    assert a == b and a.id == b.id
    assert a.id.startswith("cifar10-np2-r0-")
    assert RunSpec(benchmark="cifar10", args=("--batch-size", "64"), np=2).id != a.id
    assert RunSpec(benchmark="cifar10", args=("--batch-size", "32"), np=2, repeat=1).id != a.id


def test_env_order_does_not_change_the_id() -> None:
    one = RunSpec.from_dict({"benchmark": "b", "env": {"NCCL_ALGO": "ring", "HOROVOD_CYCLE_TIME": "1"}})
    two = RunSpec.from_dict({"benchmark": "b", "env": [("HOROVOD_CYCLE_TIME", "1"), ("NCCL_ALGO", "ring")]})
    assert one.id == two.id and one.env_dict == {"NCCL_ALGO": "ring", "HOROVOD_CYCLE_TIME": "1"}


@pytest.mark.parametrize("fields, text", [
    ({"np": 0}, "np >= 1"),
    ({"np": 3, "nodes": 2}, "not a multiple"),
    ({"controller": "nccl"}, "controller"),
    ({"devices": [0, 0]}, "distinct"),
    ({"np": "2"}, "must be int"),
])
def test_impossible_values_are_rejected(fields: dict, text: str) -> None:
    with pytest.raises(SpecError, match=text):
        RunSpec.from_dict({"benchmark": "cifar10", **fields})


def test_run_file_round_trips_and_bad_files_name_the_path(tmp_path: Path) -> None:
    spec = RunSpec(benchmark="cifar10", np=4, nodes=2, devices=(0, 1), env=(("NCCL_DEBUG", "INFO"),))
    path = spec.write(tmp_path / spec.id)
    assert RunSpec.read(path) == spec
    bad = tmp_path / "bad.json"
    bad.write_text('{"spec": {"benchmark": "x", "colour": "red"}}')
    with pytest.raises(SpecError, match="bad.json: unknown RunSpec field"):
        RunSpec.read(bad)
    bad.write_text("{not json")
    with pytest.raises(SpecError, match="not a readable run description"):
        RunSpec.read(bad)


def test_tasks_recording_one_status_at_once_never_collide(tmp_path: Path) -> None:
    """Every SLURM task whose rank fails records the failure in the same status.json at once: each write
    lands whole, and none fails for another's temporary file (CI once recorded "cannot write
    status.json" as a run's failure)."""
    def record(task: int) -> None:
        for _ in range(300):
            RunStatus("failed", 1, 0.5, f"task {task}: no CUDA device is visible").write(tmp_path)

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(record, range(4)))  # re-raises a writer's WriteError
    assert RunStatus.read(tmp_path).message.endswith("no CUDA device is visible")  # type: ignore[union-attr]
    assert [p.name for p in tmp_path.iterdir()] == ["status.json"]  # no temporary file left behind
