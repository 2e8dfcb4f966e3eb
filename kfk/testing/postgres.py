"""A real PostgreSQL server in a temporary directory, for the JDBC connectors' tests.

kfk does not ship PostgreSQL; it runs the one installed on the machine (Debian's `postgresql` package, whose
initdb/pg_ctl live under /usr/lib/postgresql/<major>/bin). PostgreSQL refuses to run as root, and the tests run
as root in CI: then the cluster is made and run by the `postgres` system user the package creates, in a directory
outside pytest's (which only root may enter). The server listens on 127.0.0.1 on a free port, its unix socket in
its own directory, with fsync off (a test cluster need not survive a crash) and trust authentication.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kfk.testing.ports import free_port

INSTALL_HINT = "PostgreSQL is not installed: install Debian's package (`sudo apt-get install postgresql`)"
SYSTEM_USER = "postgres"


class PostgresNotInstalledError(RuntimeError):
    pass


def postgres_bin_dir() -> Path:
    """The newest installed PostgreSQL's bin directory."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda path: int(Path(path).parent.parent.name) if Path(path).parent.parent.name.isdigit()
                   else 0)
    if not found:
        raise PostgresNotInstalledError(INSTALL_HINT)
    return Path(found[-1]).parent


@dataclass
class PostgresServer:
    directory: Path
    port: int
    bin_dir: Path
    as_user: list[str]

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://127.0.0.1:{self.port}/postgres?user=postgres"

    @property
    def conninfo(self) -> str:
        return f"host=127.0.0.1 port={self.port} dbname=postgres user=postgres"

    def stop(self) -> None:
        subprocess.run([*self.as_user, str(self.bin_dir / "pg_ctl"), "-D", str(self.directory / "data"), "-m", "fast",
                        "-w", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(self.directory, ignore_errors=True)


def start_postgres() -> PostgresServer:
    """initdb and start a server; the caller stops it (which removes its directory)."""
    bin_dir = postgres_bin_dir()
    directory = Path(tempfile.mkdtemp(prefix="kfk-postgres-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        account = pwd.getpwnam(SYSTEM_USER)
        os.chown(directory, account.pw_uid, account.pw_gid)
        as_user = ["runuser", "-u", SYSTEM_USER, "--"]
    server = PostgresServer(directory, free_port(), bin_dir, as_user)
    try:
        _run([*as_user, str(bin_dir / "initdb"), "-D", str(directory / "data"), "-U", "postgres", "-A", "trust",
              "--no-sync", "-E", "UTF8"])
        options = (f"-p {server.port} -k {directory} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c synchronous_commit=off -c full_page_writes=off")
        _run([*as_user, str(bin_dir / "pg_ctl"), "-D", str(directory / "data"), "-l", str(directory / "server.log"),
              "-o", options, "-w", "-t", "60", "start"])
    except BaseException:
        server.stop()
        raise
    return server


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
