"""Where the history store lives, as given on the command line, in ``HVDBENCH_STORE`` or by default, read into one
``Location``: its backend (chosen by the URL's scheme, each scheme's reader in ``SCHEMES``: a plain path or ``sqlite:``
is SQLite, ``postgresql://`` or a libpq keyword string ``host=… dbname=…`` is PostgreSQL, a backend registered with
schemes of its own reads them as plain URLs), what the backend connects to, and how it may be printed.
A password, however given (the URL's user information, ``?password=`` in its query, ``password=`` in a keyword
string), is masked as a field when the location is shown and never appears in any line hvdbench prints; anything
that is neither a path nor a location a backend knows (another scheme, a one-slash ``postgresql:/…``) is refused in
one line."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit, urlunsplit

from hvdbench.core.errors import HvdbenchError
from hvdbench.core.validate import inert

STORE_VARIABLE = "HVDBENCH_STORE"
OFF = ("off", "none", "no")  # a store location that turns recording off
MASK = "***"
_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*):", re.I)
# libpq's connection keywords (a keyword string is ``key=value`` pairs separated by spaces)
LIBPQ_KEYS = {"host", "hostaddr", "port", "dbname", "user", "password", "passfile", "connect_timeout",
              "options", "application_name", "sslmode", "sslcert", "sslkey", "sslrootcert", "sslpassword",
              "service", "target_session_attrs", "gssencmode", "channel_binding", "require_auth"}
SECRET_KEYS = {"password", "sslpassword"}
_PAIR = re.compile(r"(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|\S*)")


class StoreError(HvdbenchError):
    """A store that cannot be opened, read or written: one line naming it (its password never shown)."""


@dataclass(frozen=True)
class Location:
    """A store's location: the backend that opens it, what that backend connects to (a path, a URL, a keyword
    string), and the location as it may be printed (every password masked)."""

    backend: str
    target: str
    shown: str
    secrets: tuple[str, ...] = ()  # the passwords it carries, so that no printed line holds one

    def __str__(self) -> str:
        return self.shown


def default_location() -> Path:
    """Where the store lives unless told otherwise: ``$XDG_DATA_HOME/hvdbench/history.sqlite`` (the XDG default
    ``~/.local/share``)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "hvdbench" / "history.sqlite"


def location(given: str | None) -> str | None:
    """The store to use: ``given`` (``--store``), else ``HVDBENCH_STORE``, else the default file; None where
    recording is off."""
    chosen = given if given is not None else os.environ.get(STORE_VARIABLE) or str(default_location())
    return None if chosen.strip().lower() in OFF else chosen


def _keywords(text: str) -> list[tuple[str, str]] | None:
    """A libpq keyword string's pairs, or None where the text is not one (a path with an ``=`` in it is a path)."""
    pairs = _PAIR.findall(text)
    rebuilt = " ".join(f"{k}={v}" for k, v in pairs)
    if not pairs or any(k.lower() not in LIBPQ_KEYS for k, _ in pairs) or \
            re.sub(r"\s*=\s*", "=", " ".join(text.split())) != rebuilt:
        return None
    return [(k, v.strip("'")) for k, v in pairs]


Reader = Callable[[str], Location]
SCHEMES: dict[str, Reader] = {}  # a URL scheme -> how a location of it is read (its backend's grammar)


def reads(*schemes: str) -> Callable[[Reader], Reader]:
    """Register how a location of these URL schemes is read."""
    def add(read: Reader) -> Reader:
        SCHEMES.update(dict.fromkeys(schemes, read))
        return read
    return add


def url_location(backend: str, text: str) -> Location:
    """A location a backend reads as a plain URL (``scheme://[user[:password]@][host]/path[?query]``): the URL whole
    as what it connects to, shown with every password masked."""
    parts = urlsplit(text)
    if not parts.path and not parts.netloc:
        raise StoreError(f"store {_scrub(text)}: names nothing after its scheme ({inert(parts.scheme)}://…)")
    return _masked(backend, text, parts)


@reads("postgres", "postgresql")
def _postgres_url(text: str) -> Location:
    parts = urlsplit(text)
    if not parts.netloc and not parts.path.startswith("/"):
        raise StoreError(f"store {_scrub(text)}: a PostgreSQL store is postgresql://user@host/database")
    if not parts.netloc:
        raise StoreError(f"store {_scrub(text)}: one slash after the scheme: a PostgreSQL store is "
                         "postgresql://user@host/database (two slashes)")
    return _masked("postgresql", text, parts)


def _masked(backend: str, text: str, parts: SplitResult) -> Location:
    """``text``, a URL split as ``parts``, as the location of ``backend``: the password of its user information and
    of its query masked where it is shown, and kept as the secrets no printed line may hold."""
    secrets = [parts.password] if parts.password else []
    netloc = parts.netloc
    if parts.password is not None:
        netloc = f"{parts.username or ''}:{MASK}@{netloc.rsplit('@', 1)[1]}"
    query = parse_qsl(parts.query, keep_blank_values=True)
    secrets += [v for k, v in query if k.lower() in SECRET_KEYS and v]
    shown_query = urlencode([(k, MASK if k.lower() in SECRET_KEYS else v) for k, v in query], safe="*")
    shown = urlunsplit(parts._replace(netloc=netloc, query=shown_query))
    return Location(backend, text, inert(shown), tuple(secrets))


@reads("sqlite")
def _sqlite_url(text: str) -> Location:
    path = re.sub(r"^sqlite:(//)?", "", text, flags=re.I)
    if not path:
        raise StoreError(f"store {_scrub(text)}: sqlite: names no file (sqlite:///path/to/history.sqlite)")
    return Location("sqlite", str(Path(path).expanduser()), inert(text))


def _scrub(text: str) -> str:
    """A location that could not be read, as it may be printed: anything after a colon in its authority, and any
    ``password=`` value, masked."""
    text = re.sub(r"(://[^:/@]*:)[^@/]*@", rf"\1{MASK}@", text)
    text = re.sub(r"(?i)((?:ssl)?password\s*=\s*)('[^']*'|[^\s&]*)", rf"\1{MASK}", text)
    return inert(text)


def parse_location(text: str) -> Location:
    """The store's location; a StoreError of one line where it is none a backend knows."""
    if not text.strip():
        raise StoreError("store: an empty location")
    scheme = _SCHEME.match(text)
    if scheme and len(scheme.group(1)) > 1:  # one letter is a drive, not a scheme
        read = SCHEMES.get(scheme.group(1).lower())
        if read is None:
            others = "".join(f", {name}://…" for name in SCHEMES if name not in ("sqlite", "postgres", "postgresql"))
            raise StoreError(f"store {_scrub(text)}: {inert(scheme.group(1))} stores are not supported: give a file "
                             f"path, sqlite:///path, postgresql://user@host/database{inert(others)} or a libpq keyword "
                             "string (host=… dbname=…)")
        return read(text)
    pairs = _keywords(text)
    if pairs is not None:
        shown = " ".join(f"{k}={MASK if k.lower() in SECRET_KEYS else v}" for k, v in pairs)
        return Location("postgresql", text, inert(shown), tuple(v for k, v in pairs if k.lower() in SECRET_KEYS and v))
    if "=" in text and re.match(r"^\s*\w+\s*=", text):
        raise StoreError(f"store {_scrub(text)}: neither a path nor a libpq keyword string hvdbench knows (keys: "
                         "host, port, dbname, user, password, sslmode ...)")
    return Location("sqlite", str(Path(text).expanduser()), inert(text))


def redacted(text: str) -> str:
    """A store location as it may be printed: every password masked (one that cannot be read, scrubbed)."""
    try:
        return parse_location(text).shown
    except StoreError:
        return _scrub(text)


def said(exc: BaseException, where: Location) -> str:
    """A driver's error as one inert line; where it echoes the connection string (the location whole, or a password
    as the string gives it: ``:pw@``, ``password=pw``), the line says so instead of quoting it, never editing the
    driver's words."""
    text = str(exc)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    echoed = [where.target, *(f":{s}@" for s in where.secrets), *(f"password={s}" for s in where.secrets),
              *(f"password='{s}'" for s in where.secrets)]
    if where.secrets and any(piece in text for piece in echoed):
        return f"{type(exc).__name__} on the connection string (not shown: it holds the password)"
    return inert(first)
