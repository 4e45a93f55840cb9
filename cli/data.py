"""``hvdbench data make|export``: datasets for ``--data files``, made here (shaped like ImageNet, LibriSpeech, WMT)
or written out from a real one (Fashion-MNIST)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from hvdbench.core.errors import UsageError
from hvdbench.core.flags import Parser, positive_int


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


def declare(sub: Any) -> None:
    """hvdbench data make: a dataset shaped like a real one, made here."""
    data = sub.add_parser("data", help="make a dataset shaped like ImageNet, LibriSpeech or WMT (no download)",
                          description="Datasets for --data files, made here: JPEGs of ILSVRC-2012's pixel and byte "
                                      "sizes, 16 kHz WAVs of LibriSpeech's lengths with transcripts, token pairs of "
                                      "WMT's lengths; as ImageFolder, WebDataset shards or TFRecords (imagenet, with "
                                      "TensorFlow), with a manifest.")
    verbs = data.add_subparsers(dest="verb", required=True, parser_class=Parser)
    make = verbs.add_parser("make", help="make one", description=data.description)
    make.set_defaults(func=cmd_data)
    make.add_argument("kind", choices=["imagenet", "speech", "translation"])
    make.add_argument("--to", type=Path, required=True, metavar="DIR", help="a new or empty folder")
    make.add_argument("--format", choices=["folder", "webdataset", "tfrecord"], default="folder",
                      help="ImageFolder (train/<class>/...), WebDataset .tar shards, or TFRecord shards")
    make.add_argument("--samples", type=positive_int, default=1000, help="samples to make (default 1000)")
    make.add_argument("--seed", type=int, default=0, help="the seed (the same seed makes the same bytes)")
    export = verbs.add_parser("export", help="write a real dataset out for the file loaders",
                              description="fashion-mnist: Debian's dataset-fashion-mnist (or --idx-dir's MNIST-format "
                                          "files), checked, written as PNGs under DIR/train and DIR/val (ImageFolder "
                                          "or WebDataset shards), for --data files --data-dir DIR/train --eval-dir "
                                          "DIR/val and a run to a quality target on the imagenet workload.")
    export.set_defaults(func=cmd_data)
    export.add_argument("kind", choices=["fashion-mnist"])
    export.add_argument("--to", type=Path, required=True, metavar="DIR", help="a new or empty folder")
    export.add_argument("--format", choices=["folder", "webdataset"], default="folder",
                        help="ImageFolder (<label>-<name>/<index>.png) or WebDataset .tar shards")
    export.add_argument("--idx-dir", type=Path, default=None, metavar="DIR",
                        help="the MNIST-format files (default: Debian's dataset-fashion-mnist)")
