"""TensorFlow's own replicated training across processes (``--exchange mirrored``): MultiWorkerMirroredStrategy
with one worker per rank, as the seeds' ``replicated`` mode is in today's TensorFlow. The launcher still starts
the ranks (Horovod joins them for the harness's barrier and records) and the strategy all-reduces the gradients
inside the optimizer's step with its own collectives: NCCL on GPUs, a ring over gRPC on CPUs. Variables created
in its scope start equal on every worker (the strategy copies worker 0's).

The strategy must exist before TensorFlow runs its first operation, and Horovod's object collectives are
TensorFlow operations: so the workers' ``host:port`` meet through files in the run folder, which every rank of a
run writes its log into (a folder shared by the nodes), under a name of this launch's own."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Mapping

import tensorflow as tf

from hvdbench.core.addresses import free_port, reachable_address
from hvdbench.core.errors import UsageError
from hvdbench.core.spec import RENDEZVOUS

RENDEZVOUS_TIMEOUT_S = 600.0  # ranks of one launch start within minutes of each other
# What names one launch of a job on every rank (the first set, in this order): horovodrun's Gloo rendezvous port,
# PMIx's namespace (Open MPI 5, srun --mpi=pmix), Open MPI 4's job id, SLURM's job and step, hydra's PMI port.
LAUNCH_VARIABLES = (("HOROVOD_GLOO_RENDEZVOUS_PORT",), ("PMIX_NAMESPACE",), ("OMPI_MCA_ess_base_jobid",),
                    ("SLURM_JOB_ID", "SLURM_STEP_ID"), ("PMI_PORT",))


def launch_token(environ: Mapping[str, str]) -> str:
    """A name of this launch that every rank reads alike (empty where no launcher variable says one)."""
    for names in LAUNCH_VARIABLES:
        if all(environ.get(name) for name in names):
            return "-".join("".join(c if c.isalnum() else "_" for c in environ[name])[:40] for name in names)
    return ""


def gather_through_folder(folder: Path, rank: int, size: int, value: str,
                          timeout_s: float = RENDEZVOUS_TIMEOUT_S) -> list[str]:
    """Every rank's ``value`` in rank order: each writes its own file (whole, by a rename) and waits for the
    others'; a rank missing at the timeout is a UsageError naming the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    mine = folder / f".{rank}.{os.getpid()}.tmp"
    mine.write_text(value, encoding="utf-8")
    mine.replace(folder / str(rank))
    deadline = time.monotonic() + timeout_s
    while True:
        files = [folder / str(r) for r in range(size)]
        missing = [r for r, path in enumerate(files) if not path.is_file()]
        if not missing:
            return [path.read_text(encoding="utf-8") for path in files]
        if time.monotonic() > deadline:
            raise UsageError(f"--exchange mirrored: rank(s) {', '.join(map(str, missing[:8]))} never wrote their "
                             f"address into {folder} within {timeout_s:.0f} s: is the run folder shared by every host?")
        time.sleep(0.1)


def start_strategy(log_dir: str | None, rank: int, size: int, one_host: bool, on_gpu: bool) -> tuple[Any, dict]:
    """The strategy over every rank of the job, and the facts to record (workers, collective)."""
    if not log_dir:
        raise UsageError("--exchange mirrored needs --log-dir: its workers meet through files in the run folder")
    address = reachable_address(one_host, os.environ, "name the interface the ranks reach each other on with "
                                                      "GLOO_SOCKET_IFNAME")
    folder = Path(log_dir) / RENDEZVOUS.format(token=launch_token(os.environ) or "mirrored")
    workers = gather_through_folder(folder, rank, size, f"{address}:{free_port()}")
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": rank}})
    collective = tf.distribute.experimental.CommunicationImplementation
    strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=tf.distribute.experimental.
                                                          CommunicationOptions(implementation=collective.NCCL
                                                                               if on_gpu else collective.RING))
    return strategy, {"name": "mirrored", "backend": "nccl" if on_gpu else "ring", "workers": workers,
                      "replicas": int(strategy.num_replicas_in_sync)}


def local_value(strategy: Any, value: Any) -> Any:
    """This worker's own value of what ``strategy.run`` returned (one replica per worker)."""
    return strategy.experimental_local_results(value)[0]
