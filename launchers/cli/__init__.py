"""The ``hvdbench`` command: a thin layer that parses arguments (``parser``) and calls library functions
(``commands``); every expected failure is one line on stderr and a non-zero status."""

from __future__ import annotations

import os
import sys
from typing import Sequence

from hvdbench.suite.errors import HvdbenchError, UsageError

from ..local import Stopped
from . import commands
from .parser import build_parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``hvdbench``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args, rest = build_parser().parse_known_args(argv)
        if args.command in ("run", "screen"):
            return (commands.cmd_run if args.command == "run" else commands.cmd_screen)(args, rest)
        if rest:
            raise UsageError(f"hvdbench {args.command}: unrecognized arguments: {' '.join(rest)}")
        if args.command in ("report", "compare"):
            return commands.report(args.dirs, args.output, warmup=args.warmup, prices=args.price,
                                   systems=args.command == "compare")
        return {"topo": commands.cmd_topo, "sweep": commands.cmd_sweep, "submit": commands.cmd_submit,
                "status": commands.cmd_status}[args.command](args)
    except HvdbenchError as exc:
        print(f"hvdbench: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into head and the like
        sys.stdout = open(os.devnull, "w")
        return 0
    except KeyboardInterrupt:
        print("hvdbench: interrupted; finished runs are kept", file=sys.stderr)
        return 130
    except Stopped as stop:
        print(f"hvdbench: stopped: {stop.message}; a run in flight is recorded as {stop.status}, "
              "finished runs are kept", file=sys.stderr)
        return 128 + stop.signum


if __name__ == "__main__":
    sys.exit(main())
