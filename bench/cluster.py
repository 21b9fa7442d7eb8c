"""A PostgreSQL server of the bench's own (``bench.dbcost``): made with the
installed server's initdb and pg_ctl, run as the postgres user (the server
refuses root) on a free port, removed at the end. Being private, everything
it does is the systems' doing: its WAL between two LSNs (read back with
pg_waldump) and the CPU of its processes (from ``/proc``)."""

from __future__ import annotations

import contextlib
import glob
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench import callgrind
from bench.harness import BenchError

# Autovacuum off: a vacuum landing inside one phase and not another is the
# one thing that made two runs disagree (vacuum's own cost, alike for every
# system, is not what is compared). pg_stat_statements counts statements;
# wal_keep_size keeps the segments a phase wrote for pg_waldump after the
# CHECKPOINT that follows it.
SETTINGS = {"autovacuum": "off", "shared_preload_libraries": "pg_stat_statements", "fsync": "off",
            "max_connections": "200", "shared_buffers": "256MB", "max_wal_size": "4GB", "wal_keep_size": "16GB"}
_TICK = os.sysconf("SC_CLK_TCK")
_SEGMENT = 16 * 1024 * 1024  # initdb's default WAL segment
# "rmgr: Heap  len (rec/tot): 54/ 54, tx: 735, lsn: 0/01A3B0D8, prev ..., desc: INSERT off 2 ..., blkref #0: rel 1663/16384/16390 blk 0 FPW"
_RECORD = re.compile(r"^rmgr: (\S+)\s+len \(rec/tot\):\s*\d+/\s*(\d+), .*?desc: (\S+)(.*)$")
_BLOCK = re.compile(r"blkref #\d+: rel \d+/\d+/(\d+)")
_TUPLES = re.compile(r"MULTI_INSERT(?:\+INIT)? (\d+) tuples")  # a multi-insert's rows (COPY writes a page of them a record)


@dataclass(frozen=True)
class Record:
    kind: str  # rmgr/type, such as Heap/INSERT or Btree/INSERT_LEAF
    size: int  # bytes, full-page images included
    fpi: int  # full-page images it carries
    relation: int | None  # the relfilenode of its first block, if it has one
    rows: int = 1  # rows it writes (a multi-insert's, more)


class Cluster:
    def __init__(self, *, counted: bool = False) -> None:
        """``counted``: the server runs under callgrind, its backends'
        instructions counted (``bench/callgrind.py``); many times slower."""
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
        if not found or shutil.which("runuser") is None or os.geteuid() != 0:
            raise BenchError("a private PostgreSQL needs the server's binaries and root (to run them as postgres)")
        if counted:
            callgrind.require()
        self._bin = Path(found[-1]).parent
        self.dir = Path(tempfile.mkdtemp(prefix="redrive-dbcost-"))
        os.chmod(self.dir, 0o755)
        shutil.chown(self.dir, "postgres", "postgres")
        self.data = self.dir / "data"
        self._as_postgres("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        options = " ".join(f"-c {k}={v}" for k, v in SETTINGS.items())
        under: list[str] = []
        self.instructions: callgrind.Counter | None = None
        if counted:
            under = ["-t", "600", "-p", str(callgrind.wrapper(self.dir, self._bin / "postgres"))]
            self.instructions = callgrind.Counter(self.dir)
        for attempt in range(5):
            self.port = random.randrange(20000, 32000)
            try:
                self._as_postgres("pg_ctl", "-D", str(self.data), "-l", str(self.dir / "log"), "-w", *under, "-o",
                                  f"-p {self.port} -c listen_addresses=127.0.0.1 "
                                  f"-c unix_socket_directories={self.dir} {options}", "start")
                return
            except subprocess.CalledProcessError:
                if attempt == 4 or "Address already in use" not in (self.dir / "log").read_text(errors="replace"):
                    self.close()
                    raise BenchError(f"the private PostgreSQL did not start: {self.log_tail()}") from None

    @property
    def server(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}"

    def tool(self, name: str) -> str:
        return str(self._bin / name)

    def _as_postgres(self, tool: str, *args: str) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", self.tool(tool), *args],
                       check=True, capture_output=True, timeout=900)

    def log_tail(self) -> str:
        log = self.dir / "log"
        return " | ".join(log.read_text(errors="replace").splitlines()[-3:]) if log.exists() else ""

    def cpu_s(self) -> float:
        """CPU seconds of the server so far: the postmaster's own and its
        reaped children's, and every live child's. A live process's time is
        read in nanoseconds (schedstat): in clock ticks, a hundredth of a
        second each, a phase's few hundred milliseconds spread over half a
        dozen processes were off by up to a tenth. Reaped children's come
        only in ticks, summed once."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        reaped = _stat(postmaster)[13:15]  # cutime, cstime
        return sum(int(f) for f in reaped) / _TICK + sum(map(_on_cpu_s, self.pids()))

    def pids(self) -> list[int]:
        """The server's live processes: the postmaster and its children."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        return [postmaster, *_children(postmaster)]

    def records(self, start: str, end: str) -> Iterator[Record]:
        """Every WAL record from ``start`` to ``end`` (LSNs), read with pg_waldump."""
        # Named, the start's segment is where pg_waldump reads the segment size
        # (unnamed, it takes any file in pg_wal: a preallocated one is zeros).
        argv = [self.tool("pg_waldump"), "--path", str(self.data / "pg_wal"), "--start", start, "--end", end,
                _segment(start), _segment(end)]
        with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as run:
            assert run.stdout is not None and run.stderr is not None
            for line in run.stdout:
                found = _RECORD.match(line)
                if found is None:
                    continue
                rmgr, size, kind, rest = found.groups()
                block, tuples = _BLOCK.search(rest), _TUPLES.search(line)
                yield Record(f"{rmgr}/{kind.rstrip(',')}", int(size), rest.count(" FPW"),
                             int(block.group(1)) if block else None, int(tuples.group(1)) if tuples else 1)
            failed = run.stderr.read().strip()
        if run.returncode != 0:
            raise BenchError(f"pg_waldump {start}..{end} failed: {failed[-300:]}")

    def close(self) -> None:
        try:
            subprocess.run(["runuser", "-u", "postgres", "--", self.tool("pg_ctl"), "-D", str(self.data),
                            "-m", "immediate", "stop"], capture_output=True, timeout=120)
        except subprocess.TimeoutExpired:  # under callgrind, slow to go: the processes are killed instead
            for pid in self.pids() if (self.data / "postmaster.pid").exists() else []:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.dir, ignore_errors=True)


def _segment(lsn: str) -> str:
    """The name of the WAL file holding ``lsn`` (timeline 1)."""
    high, low = (int(part, 16) for part in lsn.split("/"))
    number, per_id = ((high << 32) + low) // _SEGMENT, 2**32 // _SEGMENT
    return f"{1:08X}{number // per_id:08X}{number % per_id:08X}"


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name (field 3 on), or [] if it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return text[text.rindex(")") + 2:].split()


def _on_cpu_s(pid: int) -> float:
    """The CPU seconds ``pid`` has run, user and system (0 if it is gone)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        fields = _stat(pid)  # no schedstat: clock ticks
        return (int(fields[11]) + int(fields[12])) / _TICK if fields else 0.0


def _children(pid: int) -> list[int]:
    found = []
    for task in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            found += [int(c) for c in Path(task).read_text().split()]
        except OSError:
            continue
    return found
