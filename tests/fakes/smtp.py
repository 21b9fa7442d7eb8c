"""A local SMTP server (aiosmtpd) that keeps every message it accepts."""

from __future__ import annotations

import asyncio
import email
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import Message
from typing import Any

from aiosmtpd.controller import Controller


class Inbox:
    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.port = 0

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(email.message_from_bytes(envelope.content))
        return "250 Message accepted for delivery"


class _OnAnyPort(Controller):
    """Listens on a port the system picks (0), then knows which: aiosmtpd's
    own controller connects to ``self.port`` once started, so it is set
    from the listening socket before that."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sessions: list[Any] = []

    def factory(self) -> Any:
        made = super().factory()
        self.sessions.append(made)
        return made

    def stop(self, *args: Any, **kwargs: Any) -> None:
        """Closes every session's connection first: one whose client was
        killed a moment ago may not have been seen to end yet, and a
        transport left open warns in whichever test collects it."""
        async def close_all() -> None:
            for session in self.sessions:
                if session.transport is not None:
                    session.transport.close()
            await asyncio.sleep(0)  # the closes run

        if self.loop.is_running():
            asyncio.run_coroutine_threadsafe(close_all(), self.loop).result(timeout=5)
        super().stop(*args, **kwargs)

    def _create_server(self) -> Any:
        return self._listen()

    async def _listen(self) -> asyncio.AbstractServer:
        server = await self.loop.create_server(self._factory_invoker, host=self.hostname, port=0)
        self.port = server.sockets[0].getsockname()[1]
        return server


@contextmanager
def smtp_server() -> Iterator[Inbox]:
    inbox = Inbox()
    controller = _OnAnyPort(inbox, hostname="127.0.0.1", port=0)
    controller.start()
    inbox.port = controller.port
    try:
        yield inbox
    finally:
        controller.stop()
