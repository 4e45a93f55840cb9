"""Horovod's own ``horovodrun --check-build``, in a third of its time: it asks each answer (MPI built? Gloo? NCCL?)
of a forked process that imports every framework's extension afresh, TensorFlow's first; importing them here
first lets each fork find them loaded. A framework that fails to import here is left to the forks, which report
it as Horovod does (set-up and scripts/versions.sh run this)."""

import sys

for name in ("horovod.tensorflow", "horovod.torch"):
    try:
        __import__(name)
    except Exception:  # noqa: BLE001 - the check below says what is missing
        pass

from horovod.runner.launch import run_commandline  # noqa: E402

sys.argv = ["horovodrun", "--check-build"]
run_commandline()
