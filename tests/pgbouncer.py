"""A real PgBouncer (Debian's package) in transaction-pooling mode, in front
of the test server, on a free port: the way managed PostgreSQL services put
one in front of the database. Each database the tests create gets a server
pool smaller than the connections redrive's processes open to it, so
consecutive transactions of one client land on different server sessions.
Run as the postgres user when the tests run as root (PgBouncer refuses root)."""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.conftest import IN_CI

PORTS = range(32000, 34000)  # below the ephemeral range, above tests/cluster.py's
STARTS = 5


class PgBouncer:
    def __init__(self, server: str, *, pool_size: int = 3) -> None:
        """``server``: postgresql://user@host:port, the server every database is on."""
        binary = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if os.path.exists("/usr/sbin/pgbouncer") else None)
        if binary is None:
            message = "pgbouncer is not installed (scripts/test installs Debian's package)"
            if IN_CI:
                pytest.fail(message)
            pytest.skip(message)
        parts = urlsplit(server)
        self.user = parts.username or "postgres"
        self.dir = Path(tempfile.mkdtemp(prefix="redrive-pgbouncer-"))
        os.chmod(self.dir, 0o755)
        (self.dir / "users.txt").write_text(f'"{self.user}" ""\n')
        self._binary = binary
        self._server = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self.pool_size = pool_size
        self.process: subprocess.Popen | None = None
        for attempt in range(STARTS):
            self.port = random.choice(PORTS)
            if self._start():
                return
            if attempt == STARTS - 1:
                raise RuntimeError(f"pgbouncer did not start: {self.log[-2000:]}")

    @property
    def log(self) -> str:
        path = self.dir / "log"
        return path.read_text(errors="replace") if path.exists() else ""

    def url(self, database: str) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def _start(self) -> bool:
        host, port = self._server
        (self.dir / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"* = host={host} port={port}\n"  # any database name, on the test server
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.dir / 'users.txt'}\n"
            "pool_mode = transaction\n"
            f"default_pool_size = {self.pool_size}\nreserve_pool_size = 0\nmax_client_conn = 1000\n"
            f"logfile = {self.dir / 'log'}\n"
            + ("user = postgres\n" if os.geteuid() == 0 else "")
        )
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            for path in self.dir.iterdir():
                shutil.chown(path, "postgres", "postgres")
        self.process = subprocess.Popen([self._binary, str(self.dir / "pgbouncer.ini")],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False  # most likely the port was taken: the caller picks another
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return True
            except OSError:
                time.sleep(0.05)
        self.process.kill()
        return False

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
