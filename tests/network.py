"""Hosts of a test's own: each a network namespace joined to this machine by
a veth pair, as a second machine on the network would be, with a link the
test can cut and heal. Needs iproute2 and root."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conftest import IN_CI


class Link:
    """A network namespace joined to this host by a veth pair. Its names and
    its /30 are drawn from this pytest process's id (tests run side by side)
    and ``index`` (a test may make several)."""

    def __init__(self, index: int = 0) -> None:
        if shutil.which("ip") is None or os.geteuid() != 0:
            message = "a network namespace needs iproute2 and root"
            if IN_CI:
                pytest.fail(message)
            pytest.skip(message)
        net = f"10.{213 + index}.{os.getpid() % 250 + 1}"
        self.host, self.remote, self.network = f"{net}.1", f"{net}.2", f"{net}.0/30"
        tag = f"{str(os.getpid())[-6:]}{index}"
        self.namespace, self.host_end, self.remote_end = f"rd{tag}", f"rdh{tag}", f"rdr{tag}"
        self._ip("netns", "add", self.namespace)
        self._ip("link", "add", self.host_end, "type", "veth", "peer", "name", self.remote_end)
        self._ip("link", "set", self.remote_end, "netns", self.namespace)
        self._ip("addr", "add", f"{self.host}/30", "dev", self.host_end)
        self._ip("link", "set", self.host_end, "up")
        self.inside("ip", "addr", "add", f"{self.remote}/30", "dev", self.remote_end)
        self.inside("ip", "link", "set", self.remote_end, "up")
        self.inside("ip", "link", "set", "lo", "up")

    @staticmethod
    def _ip(*args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)

    def inside(self, *command: str) -> None:
        subprocess.run(["ip", "netns", "exec", self.namespace, *command], check=True, capture_output=True, timeout=10)

    @property
    def prefix(self) -> tuple[str, ...]:
        """What runs a command on the namespace's side."""
        return ("ip", "netns", "exec", self.namespace)

    def cut(self) -> None:
        self._ip("link", "set", self.host_end, "down")

    def heal(self) -> None:
        self._ip("link", "set", self.host_end, "up")

    def remove(self) -> None:
        subprocess.run(["ip", "link", "del", self.host_end], capture_output=True, timeout=10)
        subprocess.run(["ip", "netns", "del", self.namespace], capture_output=True, timeout=10)
