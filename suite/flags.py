"""The one set of flags every benchmark shares; importable without any framework."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn, Sequence

from .errors import UsageError


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line and a UsageError, not a usage dump."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see --help)")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text}")
    return value


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def benchmark_parser(prog: str, models: Sequence[str], default_model: str, unit: str) -> Parser:
    """The shared benchmark flags; ``models`` are the architectures this benchmark offers."""
    parser = Parser(prog=prog, description=f"Horovod training throughput benchmark ({unit}/s).")
    parser.add_argument("--model", choices=list(models), default=default_model,
                        help=f"architecture (default {default_model})")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="samples per step per rank")
    parser.add_argument("--steps", type=positive_int, default=50, help="timed steps after warm-up")
    parser.add_argument("--warmup-steps", type=non_negative_int, default=5,
                        help="untimed steps first (allocation, autotuning); recorded, marked warm-up")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="where to train: the GPU of this rank's local rank, or the CPU")
    parser.add_argument("--threads", type=positive_int, default=None,
                        help="CPU threads per rank (default: the node's cores / ranks on the node)")
    parser.add_argument("--independent", action="store_true",
                        help="no gradient exchange: each rank trains alone (the ideal-scaling baseline)")
    parser.add_argument("--lr", type=float, default=0.01, help="learning rate of the SGD optimizer")
    parser.add_argument("--seed", type=int, default=1234, help="seed of the model and synthetic data")
    parser.add_argument("--log-dir", default=None,
                        help="directory for run.json and rank-<r>.jsonl (default: hvdbench-logs/<name>-<time>)")
    parser.add_argument("--echo-records", action="store_true",
                        help="also print every record on stdout (one whole line per record)")
    return parser


def parse_or_exit(parser: Parser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse argv; a usage error is printed as one line and the process exits with status 2."""
    try:
        return parser.parse_args(argv)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
