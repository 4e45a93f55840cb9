"""``hvdbench data make|export``: datasets for ``--data files``, made here (shaped like ImageNet, LibriSpeech, WMT)
or written out from a real one (Fashion-MNIST)."""

from __future__ import annotations

import argparse
import sys

from hvdbench.core.errors import UsageError


def cmd_data(args: argparse.Namespace) -> int:
    """hvdbench data make, hvdbench data export: the dataset, made or written out by the suite's own maker in a
    process of its own (it may need TensorFlow to write TFRecords, which the command line never imports); its
    output passed on."""
    import subprocess

    argv = [sys.executable, "-m", "hvdbench.suite.datamake", args.kind, "--to", str(args.to), "--format", args.format]
    if args.verb == "export":
        argv += ["--idx-dir", str(args.idx_dir)] if args.idx_dir is not None else []
    else:
        argv += ["--samples", str(args.samples), "--seed", str(args.seed)]
    done = subprocess.run(argv, capture_output=True, text=True)
    print(done.stdout, end="")
    errors = [line for line in done.stderr.splitlines() if line.startswith("hvdbench: error: ")]
    if done.returncode:
        raise UsageError(errors[-1].removeprefix("hvdbench: error: ") if errors else
                         f"data {args.verb} ended with status {done.returncode}: {done.stderr.strip()[-300:]}")
    return 0
