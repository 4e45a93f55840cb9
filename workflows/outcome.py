"""What a workflow ends with: its exit status and the lines it has to say, in order, each for stdout or stderr."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from hvdbench.analysis.history.recording import Said


@dataclass
class Outcome:
    """A workflow's end: its exit status and its lines in the order said (``to_err``: for stderr, as
    ``hvdbench: NOTE``)."""

    status: int = 0
    lines: list[tuple[bool, str]] = field(default_factory=list)

    def say(self, text: str) -> Outcome:
        self.lines.append((False, text))
        return self

    def note(self, text: str) -> Outcome:
        self.lines.append((True, f"hvdbench: {text}"))
        return self

    def heard(self, said: Said) -> Outcome:
        """What the history store said on recording, in its place."""
        if said.line:
            self.say(said.line)
        if said.note:
            self.note(said.note)
        return self

    def show(self) -> int:
        """Print every line where it belongs; the exit status."""
        for to_err, text in self.lines:
            print(text, file=sys.stderr if to_err else sys.stdout)
        return self.status
