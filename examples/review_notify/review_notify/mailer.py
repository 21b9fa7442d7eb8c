"""The email provider's client: send with the delivery's idempotency token,
and look a delivery up by it.

What a failure means for the outbox (redrive's ``deliver``):

- 429, 5xx, a refused connection: the provider did not take the message
  (``NotDelivered``): sent again on the next try, without asking.
- a timeout or a connection cut mid-answer: it may have (``Transient``):
  the row stays ``sending`` and the next try looks it up first.
- 422 ``invalid_recipient``, 403 ``policy_rejected``: it never will
  (``Permanent``): the row is marked failed for an operator or the caller.
"""

from __future__ import annotations

import httpx

from redrive import NotDelivered, Permanent, Transient

_REFUSALS = {"invalid_recipient": "INVALID_RECIPIENT", "policy_rejected": "POLICY_REJECTED"}


class Mailer:
    def __init__(self, url: str, api_key: str, sender: str, timeout_s: float) -> None:
        self._url, self._sender = url.rstrip("/"), sender
        # One client for the process: its connections are reused, and building
        # a client per send (TLS context included) costs more than the send.
        self._http = httpx.Client(timeout=timeout_s,
                                  headers={"Authorization": f"Bearer {api_key}"} if api_key else {},
                                  limits=httpx.Limits(max_connections=32, max_keepalive_connections=32))

    def send(self, recipient: str, subject: str, text: str, token: str) -> str:
        try:
            answer = self._http.post(f"{self._url}/v1/messages", headers={"Idempotency-Key": token},
                                     json={"from": self._sender, "to": recipient, "subject": subject, "text": text})
        except httpx.ConnectError:
            raise NotDelivered("the email provider could not be reached", code="PROVIDER_UNAVAILABLE") from None
        except httpx.TransportError as exc:
            raise Transient(f"the email provider did not answer ({type(exc).__name__})",
                            code="PROVIDER_UNAVAILABLE") from None
        if answer.status_code in (200, 201, 202):
            return str(answer.json()["id"])
        if answer.status_code == 429 or answer.status_code >= 500:
            raise NotDelivered(f"the email provider answered {answer.status_code}", code="PROVIDER_UNAVAILABLE")
        error = _error(answer)
        raise Permanent(f"the email provider refused the message: {error or answer.status_code}",
                        code=_REFUSALS.get(error, "PROVIDER_REFUSED"))

    def lookup(self, token: str, provider_id: str | None) -> str | None:
        """The provider's id for the delivery of ``token``, or None if it never took it."""
        try:
            answer = self._http.get(f"{self._url}/v1/messages", params={"idempotency_key": token})
        except httpx.TransportError as exc:
            raise Transient(f"the email provider could not be asked ({type(exc).__name__})",
                            code="PROVIDER_UNAVAILABLE") from None
        if answer.status_code == 404:
            return None
        if answer.status_code != 200:
            raise Transient(f"the email provider's lookup answered {answer.status_code}", code="PROVIDER_UNAVAILABLE")
        return str(answer.json()["id"])


def _error(answer: httpx.Response) -> str:
    try:
        return str(answer.json().get("error", ""))
    except ValueError:
        return ""
