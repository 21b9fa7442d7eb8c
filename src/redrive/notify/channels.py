"""Where notifications go: a Slack incoming webhook and SMTP email, and the
protocol any other channel implements (``Channel``).

A channel sends one message and returns the provider's id for it. Neither
Slack's webhooks nor SMTP can be asked afterwards whether a message
arrived, so when a send was cut off by a crash (the outbox row says
``sending``) the delivery counts as done: a notification may then be lost in
that window of a few milliseconds, but it is never repeated. A channel whose
provider can be asked implements ``lookup``.

A send that fails in this process is known not to have been taken: it
raises ``NotDelivered`` (sent again on the next try: 429, 5xx, timeouts,
refused connections) or ``Permanent`` (a 4xx the next try would get again).
A timeout is counted as not taken, so a webhook that took a message but
answered after the timeout would show it twice: the price of retrying a
hanging webhook at all. Errors never carry the webhook's URL or the SMTP
password.
"""

from __future__ import annotations

import smtplib
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Protocol

from redrive.errors import ConfigError, NotDelivered, Permanent
from redrive.settings import NOTIFY_TIMEOUT_MAX


@dataclass(frozen=True, slots=True)
class Message:
    """A notification as sent: a subject line and a plain-text body, both redacted."""

    subject: str
    body: str


class Channel(Protocol):
    name: str  # one per channel of an app: part of the outbox key

    def send(self, message: Message, token: str) -> str:
        """Send ``message``; returns the provider's id for it. ``token`` is
        the delivery's idempotency token (the same on every try)."""

    def lookup(self, token: str, provider_id: str | None) -> str | None:
        """The provider's id if it has the delivery of ``token``, else None."""


class CannotAsk:
    """For providers that cannot be asked: a send cut off by a crash counts
    as delivered (never repeated)."""

    def lookup(self, token: str, provider_id: str | None) -> str | None:
        return provider_id or f"unconfirmed:{token}"


class Slack(CannotAsk):
    """A Slack incoming webhook (``https://hooks.slack.com/services/...``)."""

    def __init__(self, webhook_url: str, *, timeout_s: float = 10.0, name: str = "slack") -> None:
        if not webhook_url.startswith(("https://", "http://")):
            raise ConfigError("a Slack webhook URL starts with https://")
        try:
            import httpx  # noqa: F401
        except ImportError:
            raise ConfigError("Slack notifications need the notify extra: pip install 'redrive[notify]'") from None
        self._url, self._timeout, self.name = webhook_url, _timeout(timeout_s), name

    def __repr__(self) -> str:  # the URL is the secret
        return f"Slack(name={self.name!r})"

    def send(self, message: Message, token: str) -> str:
        import httpx

        try:
            answer = httpx.post(self._url, json={"text": f"*{message.subject}*\n{message.body}"},
                                timeout=self._timeout)
        except httpx.TimeoutException:
            raise NotDelivered(f"Slack did not answer within {self._timeout:g} s", code="NOTIFY_TIMEOUT") from None
        except httpx.TransportError as exc:
            raise NotDelivered(f"Slack could not be reached ({type(exc).__name__})", code="NOTIFY_UNREACHABLE") from None
        if answer.status_code == 429 or answer.status_code >= 500:
            raise NotDelivered(f"Slack answered {answer.status_code}", code="NOTIFY_5XX")
        if answer.status_code != 200:
            raise Permanent(f"Slack refused the message: {answer.status_code} {answer.text[:100]}", code="NOTIFY_REFUSED")
        return f"slack:{token}"


class Email(CannotAsk):
    """Email over SMTP, with STARTTLS and a login when given."""

    def __init__(self, *, host: str, sender: str, recipients: Sequence[str], port: int = 587,
                 username: str | None = None, password: str | None = None, starttls: bool = True,
                 timeout_s: float = 10.0, name: str = "email") -> None:
        if not recipients or not all("@" in r for r in recipients):
            raise ConfigError("email notifications need at least one recipient address")
        if "@" not in sender:
            raise ConfigError(f"the sender {sender!r} is not an email address")
        self._host, self._port, self._sender, self._recipients = host, port, sender, list(recipients)
        self._username, self._password, self._starttls = username, password, starttls
        self._timeout, self.name = _timeout(timeout_s), name

    def __repr__(self) -> str:
        return f"Email(name={self.name!r}, host={self._host!r})"

    def send(self, message: Message, token: str) -> str:
        email = EmailMessage()
        email["Subject"], email["From"], email["To"] = message.subject, self._sender, ", ".join(self._recipients)
        # The same id on every try: a mail system that sees it twice can drop the copy.
        email["Message-ID"] = message_id = f"<{token}@redrive>"
        email.set_content(message.body)
        try:
            with smtplib.SMTP(self._host, self._port, timeout=self._timeout) as smtp:
                if self._starttls:
                    smtp.starttls(context=ssl.create_default_context())
                if self._username:
                    smtp.login(self._username, self._password or "")
                smtp.send_message(email)
        except smtplib.SMTPResponseException as exc:
            if 400 <= exc.smtp_code < 500:
                raise NotDelivered(f"the mail server answered {exc.smtp_code}", code="NOTIFY_5XX") from None
            raise Permanent(f"the mail server refused the message: {exc.smtp_code}", code="NOTIFY_REFUSED") from None
        except smtplib.SMTPRecipientsRefused:
            raise Permanent("the mail server refused every recipient", code="NOTIFY_REFUSED") from None
        except (OSError, smtplib.SMTPException) as exc:
            raise NotDelivered(f"the mail server could not be reached ({type(exc).__name__})",
                            code="NOTIFY_UNREACHABLE") from None
        return message_id


def _timeout(seconds: float) -> float:
    """A channel's wait for an answer, within what the notification task
    allows each channel (``NOTIFY_TIMEOUT_MAX``): a longer one would be cut
    off by the task's own timeout mid-send."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds <= NOTIFY_TIMEOUT_MAX.total_seconds():
        raise ConfigError(f"a channel's timeout_s must be more than 0 and at most {NOTIFY_TIMEOUT_MAX.seconds}, not {seconds!r}")
    return float(seconds)
