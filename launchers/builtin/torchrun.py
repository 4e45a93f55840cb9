"""torchrun: PyTorch's own launcher. Its ranks meet through torch.distributed alone (no Horovod), so it runs
the PyTorch workloads whose gradients go through torch.distributed (``--exchange ddp|fsdp|ps``, or none with
``--independent``)."""

from __future__ import annotations

from hvdbench.core.errors import UsageError
from hvdbench.core.spec import RunSpec

from ..base import LaunchContext, Launcher, rank_command, register, run_hosts

RDZV_PORT = 29400  # torchrun's c10d rendezvous on the first node, across nodes


@register
class Torchrun(Launcher):
    """``python -m torch.distributed.run --standalone --nproc-per-node G --no-python python script ...`` on one
    node (torchrun picks a free port); over N nodes one torchrun per node through srun, meeting at the first
    node's c10d rendezvous (inside a SLURM allocation: its hosts). The interpreter is the ranks' own, so the
    CPU binder can sit between torchrun and the script."""

    name = "torchrun"
    controllers = ("c10d",)
    controller_note = "torchrun starts torch.distributed's ranks, no Horovod"
    starts_horovod = False
    srun_across_nodes = True

    @classmethod
    def controllers_text(cls) -> str:
        return f"starts torch.distributed's c10d rendezvous only ({cls.controller_note})"

    def command(self, spec: RunSpec, ctx: LaunchContext) -> list[str]:
        self.check_controller(spec.controller)
        self.check_transport(spec.transport)
        if spec.container is not None:
            raise UsageError("launcher torchrun with a container image: each rank would start its own container "
                             "under torchrun's agent; use launcher srun (pyxis) or mpirun for ranks in an image")
        torchrun = [ctx.python, "-m", "torch.distributed.run", f"--nproc-per-node={spec.ranks_per_node}"]
        tail = ["--max-restarts=0", "--no-python", *rank_command(spec, ctx)]
        if spec.nodes == 1 and spec.host is None:
            return [*torchrun, "--standalone", "--nnodes=1", *tail]
        hosts = run_hosts(spec, ctx.hosts)
        return ["srun", f"--nodes={spec.nodes}", f"--ntasks={spec.nodes}", "--ntasks-per-node=1",
                f"--nodelist={','.join(hosts)}", "--kill-on-bad-exit=1", "--cpu-bind=none",
                f"--job-name=hvdbench-{spec.benchmark}", *torchrun, f"--nnodes={spec.nodes}", "--rdzv-backend=c10d",
                f"--rdzv-endpoint={hosts[0]}:{RDZV_PORT}", f"--rdzv-id={spec.id}", *tail]
