"""Whether a dataset is read from storage or from the page cache: the share of its files' pages resident in memory
(``mincore`` over a sample of its files), the node's free memory, and the two ways to set the start of a run:
``cold`` drops the files' cached pages (``posix_fadvise DONTNEED``: a first pass from storage, without root) and
``warm`` reads every file once beforehand. Linux only; elsewhere, or where the kernel will not say (since Linux 5.0
``mincore`` reports a file's pages only to its owner or a writer), the share is unknown (None), never guessed."""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
import random
from typing import Any, Iterable, Sequence

CACHE_MODES = ("as-is", "cold", "warm")
SAMPLE = 2000  # files whose residency is looked at (a random sample of a larger dataset)
CHUNK = 1 << 20
FROM_MEMORY = 0.9  # a dataset this resident at the start is served from memory


def _libc() -> Any:
    name = ctypes.util.find_library("c")
    if not name or not hasattr(os, "posix_fadvise"):
        return None
    libc = ctypes.CDLL(name, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    return libc


def _resident(libc: Any, path: str) -> tuple[int, int] | None:
    """(resident pages, pages) of one file; None where the kernel would not tell (not owner or writer) or it
    cannot be mapped."""
    try:
        st = os.stat(path)
        if st.st_uid != os.geteuid() and not os.access(path, os.W_OK):
            return None
        size = st.st_size
        if size == 0:
            return 0, 0
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            return None
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vec = (ctypes.c_ubyte * pages)()
        try:
            if libc.mincore(addr, size, vec) != 0:
                return None
            return sum(b & 1 for b in vec), pages
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)


def resident_share(paths: Sequence[str], sample: int = SAMPLE, seed: int = 0) -> float | None:
    """The share of the files' pages in the page cache (of a random ``sample`` of them where there are more);
    None where it cannot be known."""
    libc = _libc()
    if libc is None or not paths:
        return None
    chosen = list(paths) if len(paths) <= sample else random.Random(seed).sample(list(paths), sample)
    resident = total = 0
    for path in chosen:
        got = _resident(libc, path)
        if got is None:
            return None
        resident, total = resident + got[0], total + got[1]
    return resident / total if total else None


def drop(paths: Iterable[str]) -> None:
    """Ask the kernel to drop the files' clean cached pages (dirty pages stay: they are still to be written)."""
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue  # a vanished file is counted when it is read
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def prewarm(paths: Iterable[str]) -> int:
    """Read every file once (into the page cache); the bytes read."""
    total = 0
    for path in paths:
        try:
            with open(path, "rb", buffering=0) as handle:
                while chunk := handle.read(CHUNK):
                    total += len(chunk)
        except OSError:
            continue
    return total


def available_bytes() -> int | None:
    """The node's available memory (MemAvailable), None where /proc/meminfo does not say."""
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def prepare(paths: Sequence[str], mode: str, dataset_bytes: int) -> dict[str, Any]:
    """Set the page cache as ``mode`` asks and say where the run starts: the facts a rank records."""
    if mode == "cold":
        drop(paths)
    elif mode == "warm":
        prewarm(paths)
    free = available_bytes()
    return {"cache": mode, "resident_start": resident_share(paths), "mem_available": free,
            "fits_in_memory": None if free is None else dataset_bytes <= free}
