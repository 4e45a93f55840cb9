"""What the history store keeps of each execution, made from a collection of results roots: the run table's row
whole, its configuration (the key ``compare`` pairs runs by), its throughput with the within-run interval, its time
to a target where it ran to one, its environment, its folder and attempts (what tells a retried attempt from a new
run), a digest of its measurements (what it is known by, wherever its root moves) and their fingerprint (the one
copy rule, analysis/copies.py), and the key it is kept under."""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from ..collect import Collection
from ..copies import execution_key, fingerprint, measurement_digest
from ..keys import CONFIG, SHARED, SIZE
from ..tables.scaling import run_stats_table

# The run table's columns that say what a run ran on and with (what changed when a configuration changed pace).
ENVIRONMENT = ("host", "device_name", "driver", "cuda", "cudnn", "nccl", "torch", "tensorflow", "horovod_version",
               "mpi", "tuning", "cpu_model", "container_image", "container_image_id", "container_runtime",
               "nccl_network", "nccl_plugin", "fabric_software", "node_power_source", "hvdbench_version")


def plain(value: Any) -> Any:
    """A cell as JSON keeps it: missing values as None, numpy and pandas scalars as Python's."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if hasattr(value, "item") and not isinstance(value, (list, dict, str)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def config_key(row: dict[str, Any]) -> str:
    """The configuration a run belongs to, as canonical JSON: the columns compare pairs runs by and the size."""
    return json.dumps({name: plain(row.get(name)) for name in dict.fromkeys([*CONFIG, *SIZE, *SHARED])},
                      sort_keys=True, default=str)


def store_rows(collection: Collection) -> list[dict[str, Any]]:
    """One row a run of the collection (every status: a failed run is history too), as Store.record takes it."""
    stats = run_stats_table(collection).set_index("run_id")
    measured = collection.cache.get("measured", {})
    out = []
    for row in collection.runs.to_dict("records"):
        run_id, status = str(row["run_id"]), str(row["status"])
        facts = stats.loc[run_id] if run_id in stats.index else None
        started, wall = plain(row.get("started")), plain(row.get("wall_s"))
        values = measured.get(run_id)
        found = measurement_digest(run_id, status, values, started)
        print_ = fingerprint(values) if values is not None else None
        out.append({
            "run_key": execution_key(run_id, found), "run_id": run_id, "digest": found,
            "folder": plain(row.get("folder")), "attempts": plain(row.get("attempts")),
            "n_values": print_.count if print_ else None, "fingerprint": print_.text() if print_ else None,
            **{name: plain(row.get(name)) for name in ("system", "host", "framework", "benchmark", "model", "np",
                                                         "nodes", "root", "unit", "time_to_target_s")},
            "config": config_key(row), "status": status, "started": started,
            "ended": started + wall if started is not None and wall is not None else None,
            **{name: None if facts is None else plain(facts[name]) for name in ("throughput", "ci_low", "ci_high",
                                                                               "steps")},
            "converged": plain(row.get("converged")),
            "environment": {name: plain(row.get(name)) for name in ENVIRONMENT if plain(row.get(name)) is not None},
            "row_json": {name: plain(value) for name, value in row.items()},
        })
    return out
