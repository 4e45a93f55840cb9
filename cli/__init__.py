"""The ``hvdbench`` command: a thin layer that parses arguments (``parser``: each subcommand declares its parser and,
by ``set_defaults(func=...)``, the function it calls) and prints what the workflows and the library return; every
expected failure is one line on stderr and a non-zero status."""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from typing import Any, Sequence

from hvdbench.core.errors import HvdbenchError, UsageError
from hvdbench.core.validate import inert, visible

from hvdbench.launchers.local import Stopped
from .parser import build_parser


class _Visible:
    """A text stream whose writes show control characters as escapes (core/validate.visible): what
    hvdbench prints comes partly from run folders, which anyone could have written."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(visible(text))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``hvdbench``: every line it prints, on stdout and stderr, made visible first."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Visible(out), _Visible(err)
    try:
        return _main(argv)
    finally:
        sys.stdout, sys.stderr = out, err


def _main(argv: Sequence[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args, rest = build_parser().parse_known_args(argv)
        if "--" in rest:  # the usual end of hvdbench's options: what follows goes to the benchmark as it is
            rest.remove("--")
        if getattr(args, "benchmark_args", False):  # run, screen: what hvdbench does not know goes to the benchmark
            return int(args.func(args, rest))
        if rest:
            raise UsageError(f"hvdbench {args.command}: unrecognized arguments: {' '.join(rest)}")
        return int(args.func(args))
    except HvdbenchError as exc:  # one line whatever the message holds (a name with a newline forges none)
        print(f"hvdbench: error: {inert(exc)}", file=sys.stderr)
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
    except Exception as exc:  # noqa: BLE001 - the one outer handler: a bug is one line plus a traceback file
        return unexpected(exc)


def unexpected(exc: BaseException) -> int:
    """An error hvdbench did not foresee: one line naming it and the file holding its traceback (printed
    instead with HVDBENCH_DEBUG=1); exit status 3."""
    trace = "".join(traceback.format_exception(exc))
    if os.environ.get("HVDBENCH_DEBUG") == "1":
        sys.stderr.write(trace)
        return 3
    try:
        handle, name = tempfile.mkstemp(prefix="hvdbench-error-", suffix=".txt")
        with os.fdopen(handle, "w") as out:
            out.write(trace)
        where = f"traceback in {name}"
    except OSError:
        where = "set HVDBENCH_DEBUG=1 to see the traceback"
    first = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    print(f"hvdbench: internal error: {type(exc).__name__}: {first[:300]} ({where}; please report it)",
          file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
