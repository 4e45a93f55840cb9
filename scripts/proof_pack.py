"""Packs one part of the GPU proof for a machine whose results come back through one folder with limits, and
checks that folder against them:

    python3 scripts/proof_pack.py PART_DIR RETURN_DIR [--files 8] [--file-mib 16] [--depth 2]

PART_DIR (the part's log, summary, run folders and facts) becomes RETURN_DIR/<name>.tar.gz, and its summary
(<name>-summary.md) is copied beside it; files already in RETURN_DIR are left as they are. Wheels, caches and
archives are never packed; where the archive would still be over the size limit, the largest files are left out
one by one until it fits, and the summary says which. Then RETURN_DIR is checked: at most --files files, each at
most --file-mib MiB, none more than --depth folders down, names of letters, digits, '.', '_' and '-' only. One
line says what came to be there, or what of this part breaks a limit (exit status 2); a folder holding more than
this part's files (an earlier part's, where it is not emptied between parts) is a note. Standard library only: it
runs before set-up, with any python3.
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tarfile
from pathlib import Path

MIB = 2**20
NEVER_PACKED = re.compile(r"(\.whl|\.tar\.gz|\.tgz|\.pyc)$|(^|/)(cache|__pycache__|\.venv[^/]*)(/|$)")
SAFE_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def packable(part: Path) -> list[Path]:
    """The part's files that go into its archive, by path within it (wheels, caches, archives left out)."""
    return sorted(p for p in part.rglob("*") if p.is_file() and not p.is_symlink()
                  and not NEVER_PACKED.search(p.relative_to(part).as_posix()))


def pack(part: Path, archive: Path, limit: int, leave: frozenset[str] = frozenset()) -> list[tuple[str, int]]:
    """Write the archive of the part's files (less ``leave``) within ``limit`` bytes; the files left out to fit,
    largest first."""
    files = [p for p in packable(part) if p.relative_to(part).as_posix() not in leave]
    left_out: list[tuple[str, int]] = []
    while True:
        with tarfile.open(archive, "w:gz", compresslevel=6) as tar:
            for path in files:
                tar.add(path, arcname=f"{part.name}/{path.relative_to(part).as_posix()}", recursive=False)
        if archive.stat().st_size <= limit or not files:
            return left_out
        largest = max(files, key=lambda p: p.stat().st_size)
        files.remove(largest)
        left_out.append((largest.relative_to(part).as_posix(), largest.stat().st_size))


def problems(folder: Path, files: int, file_bytes: int, depth: int, only: list[Path] | None = None) -> list[str]:
    """What in ``folder`` (or of its files ``only``) breaks the limits of what comes back from it."""
    found = [p for p in folder.rglob("*") if not p.is_dir()] if only is None else only
    out = [f"{len(found)} files, more than {files}"] if len(found) > files else []
    for path in found:
        rel = path.relative_to(folder)
        if not path.is_file() or path.is_symlink():
            out.append(f"{rel} is not a plain file")
        elif path.stat().st_size > file_bytes:
            out.append(f"{rel} is {path.stat().st_size / MIB:.1f} MiB, over {file_bytes / MIB:g} MiB")
        if len(rel.parts) - 1 > depth:
            out.append(f"{rel} is {len(rel.parts) - 1} folders down, more than {depth}")
        if not all(SAFE_NAME.match(part) for part in rel.parts):
            out.append(f"{rel!s:.80} has a name of other characters than letters, digits, '.', '_' and '-'")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", type=Path)
    parser.add_argument("return_to", type=Path)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--file-mib", type=float, default=16)
    parser.add_argument("--depth", type=int, default=2)
    args = parser.parse_args(argv)
    part, limit = args.part, int(args.file_mib * MIB)
    if not part.is_dir():
        print(f"proof_pack: error: {part} is not a folder", file=sys.stderr)
        return 2
    args.return_to.mkdir(parents=True, exist_ok=True)
    summary = part / f"{part.name}-summary.md"
    archive = args.return_to / f"{part.name}.tar.gz"
    left_out = pack(part, archive, limit - 64 * 1024)  # room for the summary's note below
    if left_out and summary.is_file():
        with open(summary, "a", encoding="utf-8") as out:
            out.write(f"\n## Left out of {archive.name} (over {args.file_mib:g} MiB with them)\n\n")
            out.writelines(f"- {name} ({size / MIB:.1f} MiB)\n" for name, size in left_out)
        pack(part, archive, limit, frozenset(name for name, _ in left_out))
    mine = [archive]
    if summary.is_file():
        mine.append(Path(shutil.copyfile(summary, args.return_to / summary.name)))
    found = problems(args.return_to, args.files, limit, args.depth, mine)
    if found:
        print(f"proof_pack: error: {args.return_to} breaks the limits of what comes back: {'; '.join(found[:3])}",
              file=sys.stderr)
        return 2
    others = problems(args.return_to, args.files, limit, args.depth)  # earlier parts' files, where DIR persists
    if others:
        print(f"proof_pack: note: {args.return_to} holds more than this part's files ({'; '.join(others[:2])}): a "
              "node that sends the folder back after each command needs it emptied between parts", file=sys.stderr)
    sizes = [p.stat().st_size for p in mine]
    print(f"proof_pack: {args.return_to}: {len(sizes)} file(s) of this part, the largest {max(sizes) / MIB:.1f} MiB "
          f"({archive.name}: {len(packable(part)) - len(left_out)} files packed"
          + (f", {len(left_out)} left out to fit" if left_out else "") + "): within the limits")
    return 0


if __name__ == "__main__":
    sys.exit(main())
