"""Tags on runs (``--tag key=value`` on run, sweep, screen and submit): kept in the results root beside the runs
(``tags.json``: each run id's tags), so that the history store, rebuilt from the folders, finds them again."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterable, Mapping

from .errors import UsageError
from .spec import write_whole
from .validate import read_small_text

TAGS_FILE = "tags.json"
TAGS_LIMIT = 16 * 1024 * 1024  # bytes of tags.json read at most
_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def tag_pair(text: str) -> tuple[str, str]:
    """``key=value`` (a key of letters, digits, ``_.-``; a value of printable text) as a pair."""
    key, sep, value = text.partition("=")
    if not sep or not _KEY.fullmatch(key) or not value.isprintable() or len(value) > 256:
        raise UsageError(f"tag {text!r}: give key=value (a key of letters, digits, '_', '.', '-'; a printable value)")
    return key, value


def tags_of(texts: Iterable[str]) -> dict[str, str]:
    """``--tag`` flags as a mapping (a later key wins)."""
    return dict(tag_pair(text) for text in texts)


def read_tags(root: Path) -> dict[str, dict[str, str]]:
    """Each run id's tags in a results root ({} where there is no tags file; one that cannot be read or is not a
    mapping of mappings of tags is a ValueError naming it)."""
    path = Path(root) / TAGS_FILE
    if not path.exists():
        return {}
    data = json.loads(read_small_text(path, TAGS_LIMIT, "a tags file"))
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise ValueError(f"{path}: not a tags file (each run id's tags, key to value)")
    out: dict[str, dict[str, str]] = {}
    for run_id, tags in data.items():
        for key, value in tags.items():
            if not isinstance(value, str) or not _KEY.fullmatch(str(key)) or not value.isprintable():
                raise ValueError(f"{path}: run {run_id!r:.60}: {key!r:.40} is not a tag")
        out[str(run_id)] = {str(k): v for k, v in tags.items()}
    return out


def write_tags(root: Path, run_ids: Iterable[str], tags: Mapping[str, str]) -> None:
    """Add ``tags`` to each run id in the root's tags file (made where missing; written whole)."""
    if not tags:
        return
    root.mkdir(parents=True, exist_ok=True)
    try:
        held = read_tags(root)
    except ValueError as exc:
        raise UsageError(f"{exc}: fix or remove it before tagging more runs") from None
    for run_id in run_ids:
        held[run_id] = {**held.get(run_id, {}), **tags}
    write_whole(root / TAGS_FILE, json.dumps(held, indent=1, sort_keys=True) + "\n")
