"""A local SMTP server (aiosmtpd) that keeps every message it accepts."""

from __future__ import annotations

import email
import socket
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


@contextmanager
def smtp_server() -> Iterator[Inbox]:
    inbox = Inbox()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        inbox.port = s.getsockname()[1]
    controller = Controller(inbox, hostname="127.0.0.1", port=inbox.port)
    controller.start()
    try:
        yield inbox
    finally:
        controller.stop()
