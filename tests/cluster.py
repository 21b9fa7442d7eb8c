"""A PostgreSQL server of a test's own, for scenarios that stop, crash or
fill a database: never the shared server. Made with the installed server's
initdb and pg_ctl, run as the postgres user (the server refuses root), on a
free port, trust auth, removed at the end."""

from __future__ import annotations

import glob
import os
import random
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest

from tests.conftest import IN_CI

if TYPE_CHECKING:
    from tests.network import Link


def _bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


# PostgreSQL cannot listen on port 0 and say which port it got, so a cluster
# picks one below the kernel's ephemeral range (where port-0 servers and
# outgoing connections take theirs) and picks again if it is taken: clusters
# of tests running side by side never wait on each other.
PORTS = range(20000, 32000)
STARTS = 5


class Cluster:
    def __init__(self, *, standby_of: Cluster | None = None, links: Sequence[Link] = ()) -> None:
        """``standby_of``: a streaming replica of that server instead of a new
        one (pg_basebackup -R), read-only until ``promote``. ``links``: also
        serve those network namespaces' hosts (``serve``)."""
        binaries = _bin()
        if binaries is None or shutil.which("runuser") is None or os.geteuid() != 0:
            message = "a throwaway PostgreSQL needs the server's binaries and root (to run them as postgres)"
            if IN_CI:
                pytest.fail(message)
            pytest.skip(message)
        self._bin = binaries
        self.dir = Path(tempfile.mkdtemp(prefix="redrive-pg-"))
        os.chmod(self.dir, 0o755)
        self.data = self.dir / "data"
        # and whatever a test adds, such as a network namespace's link
        self.listen = ["127.0.0.1", *(link.host for link in links)]
        shutil.chown(self.dir, "postgres", "postgres")
        if standby_of is None:
            self._as_postgres("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
            self._trust(links)
        else:  # initdb's pg_hba.conf trusts replication from 127.0.0.1
            self._as_postgres("pg_basebackup", "-D", str(self.data), "-R", "-X", "stream", "--no-sync",
                              "-h", "127.0.0.1", "-p", str(standby_of.port), "-U", "postgres")
            self._trust([link for link in links if link.host not in standby_of.listen])
        for attempt in range(STARTS):
            self.port = random.choice(PORTS)
            try:
                self.start()
                return
            except subprocess.CalledProcessError:
                log = (self.dir / "log").read_text(errors="replace") if (self.dir / "log").exists() else ""
                if "Address already in use" not in log or attempt == STARTS - 1:
                    raise

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _as_postgres(self, tool: str, *args: str) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", str(self._bin / tool), *args],
                       check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        options = (f"-p {self.port} -c listen_addresses={','.join(self.listen)} "
                   f"-c unix_socket_directories={self.dir} -c fsync=off")
        self._as_postgres("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.dir / "log"), "-w", "start")

    def serve(self, *links: Link) -> None:
        """Also listen on each network namespace's host address and trust its
        clients (a restart)."""
        self._trust(links)
        self.listen += [link.host for link in links]
        self.stop()
        self.start()

    def _trust(self, links: Iterable[Link]) -> None:
        with open(self.data / "pg_hba.conf", "a") as hba:
            hba.writelines(f"host all all {link.network} trust\n" for link in links)

    def promote(self) -> None:
        """A standby becomes a primary that takes writes (``pg_ctl promote``)."""
        self._as_postgres("pg_ctl", "-D", str(self.data), "-w", "promote")

    def synchronous(self) -> None:
        """Commits wait for a standby's confirmation (any standby: ``*``)."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET synchronous_standby_names = '*'")
            conn.execute("SELECT pg_reload_conf()")

    def lagging(self) -> Callable[[], None]:
        """A standby falls behind: its WAL receiver is stopped (SIGSTOP), so
        what an asynchronous primary commits meanwhile does not reach it.
        Call what this returns once the primary is gone: the receiver ends
        (SIGTERM, then SIGCONT) without reading what waited in its socket,
        and that WAL is lost, as a lagging standby's last commits would be."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            (pid,) = conn.execute("SELECT pid FROM pg_stat_wal_receiver").fetchone()
        os.kill(pid, signal.SIGSTOP)

        def end() -> None:
            os.kill(pid, signal.SIGTERM)
            os.kill(pid, signal.SIGCONT)
        return end

    def kill(self) -> None:
        """SIGKILL to the postmaster, as a machine's crash or the OOM killer
        would: its backends notice they are orphans and exit."""
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)

    def stop(self, mode: str = "fast") -> None:
        """``fast`` closes sessions cleanly; ``immediate`` is a crash (recovery on the next start)."""
        self._as_postgres("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def remove(self) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", str(self._bin / "pg_ctl"), "-D", str(self.data),
                        "-m", "immediate", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)
