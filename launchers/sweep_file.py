"""Reading a sweep file safely: bounded in size, UTF-8 text without NUL bytes, TOML or YAML where YAML
aliases (a few hundred bytes can expand to gigabytes) and duplicate keys (the last would silently win)
are refused. Every problem is one line naming the file and, where known, the line."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from hvdbench.core.errors import SpecError
from hvdbench.core.validate import read_small_text

MAX_BYTES = 1 << 20  # a sweep file is a few kB; 1 MiB is far beyond any real one


class SweepError(SpecError):
    """A sweep file that cannot be read or does not fit the schema."""


def _yaml_loader() -> Any:
    import yaml

    class Strict(yaml.SafeLoader):
        """SafeLoader without aliases and with unique keys."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise yaml.composer.ComposerError(None, None, f"aliases (*{event.anchor}) are not allowed",
                                                  event.start_mark)
            return super().compose_node(parent, index)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r} (first at line "
                                                            f"{seen[key].line + 1})", key_node.start_mark)
                seen[key] = key_node.start_mark
            return super().construct_mapping(node, deep=deep)

    return Strict


def read_document(path: Path) -> Any:
    """The file's content: TOML for ``.toml``, YAML otherwise; a SweepError names the file and line."""
    try:
        text = read_small_text(path, MAX_BYTES, "a sweep file (a few kB)")
    except ValueError as exc:
        raise SweepError(str(exc)) from None
    if path.suffix == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise SweepError(f"{path}: not valid TOML ({exc})") from None
    import yaml

    try:
        return yaml.load(text, Loader=_yaml_loader())  # noqa: S506 - a SafeLoader, stricter still
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise SweepError(f"{path}: not valid YAML{where} ({getattr(exc, 'problem', exc)})") from None
