"""A real PostgreSQL server for the tests: Debian's postgresql, an unprivileged cluster made with initdb and started
with pg_ctl in a temporary folder, listening on a Unix socket only (as root, it runs as the postgres user, since
PostgreSQL refuses root), trust authentication; each test gets a database of its own."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from cluster import free_port


def tool(name: str) -> str | None:
    """A PostgreSQL program: the newest Debian cluster version's, else on PATH."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    return found[-1] if found else shutil.which(name)


def missing() -> str | None:
    """Why no server can be started here (None where one can)."""
    if tool("initdb") is None or tool("pg_ctl") is None:
        return "needs Debian's postgresql (initdb, pg_ctl; scripts/test-tools.sh installs it as root)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "needs the psycopg driver (set-up installs hvdbench[store])"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "as root, needs runuser to start PostgreSQL as another user"
    return None


@dataclass
class PostgresServer:
    """A started server: its folder, socket folder and port."""

    folder: Path
    port: int
    user: str

    def _as_owner(self, argv: list[str]) -> list[str]:
        return ["runuser", "-u", self.user, "--", *argv] if os.geteuid() == 0 else argv

    def url(self, database: str = "postgres", password: str | None = None) -> str:
        who = self.user if password is None else f"{self.user}:{password}"
        return f"postgresql://{who}@/{database}?host={self.folder / 'socket'}&port={self.port}"

    def database(self) -> str:
        """A new empty database's URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def pg_ctl(self, *action: str) -> None:
        subprocess.run(self._as_owner([str(tool("pg_ctl")), "-D", str(self.folder / "data"), "-w", "-t", "60",
                                       *action]), check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        options = f"-k {self.folder / 'socket'} -p {self.port} -c listen_addresses='' -c fsync=off"
        self.pg_ctl("-l", str(self.folder / "server.log"), "-o", options, "start")

    def stop(self) -> None:
        self.pg_ctl("-m", "fast", "stop")


def start_postgres() -> PostgresServer:
    """initdb in a fresh folder (owned by the postgres user where run as root), then pg_ctl start."""
    folder = Path(tempfile.mkdtemp(prefix="hvdbench-pg-"))
    user = "postgres" if os.geteuid() == 0 else os.environ.get("USER") or "postgres"
    (folder / "socket").mkdir()
    if os.geteuid() == 0:
        shutil.chown(folder, user, user)
        shutil.chown(folder / "socket", user, user)
    server = PostgresServer(folder, free_port(), user)
    subprocess.run(server._as_owner([str(tool("initdb")), "-D", str(folder / "data"), "-U", user, "--auth=trust",
                                     "--no-sync", "-E", "UTF8", "--locale=C"]),
                   check=True, capture_output=True, timeout=300)
    server.start()
    return server
