"""A TCP proxy on 127.0.0.1 that can stop forwarding without closing
anything, as a partition between machines does: bytes sent meanwhile wait
(in the kernel's buffers, as in the network's retransmissions), nothing is
refused or reset, a new connection is accepted and then hears nothing. When
it heals, what waited flows on, late, as it would after a real partition."""

from __future__ import annotations

import select
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class BlackHole:
    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, name="blackhole-accept", daemon=True).start()

    def cut(self) -> None:
        self._flowing.clear()

    def heal(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        self._listener.close()
        for sock in list(self._sockets):
            sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        self._sockets.append(client)
        self._wait_flowing()  # a connection made during the partition hears nothing
        try:
            server = socket.create_connection(self._target, timeout=5)
        except OSError:
            client.close()
            return
        self._sockets.append(server)
        for src, dst in ((client, server), (server, client)):
            threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _wait_flowing(self) -> None:
        while not self._flowing.wait(0.1):
            if self._closed.is_set():
                return

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not self._closed.is_set():
                self._wait_flowing()  # not read: the sender's bytes wait in the buffers, unanswered
                if not select.select([src], [], [], 0.1)[0]:
                    continue
                data = src.recv(65536)
                if not data:
                    break
                self._wait_flowing()  # read just as the partition began: it is late, not lost
                dst.sendall(data)
        except (OSError, ValueError):  # closed at the end
            pass
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@contextmanager
def black_hole(host: str, port: int) -> Iterator[BlackHole]:
    proxy = BlackHole((host, port))
    try:
        yield proxy
    finally:
        proxy.close()
