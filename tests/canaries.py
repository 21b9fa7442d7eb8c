"""Planted secrets, the redaction tests' set: each surface test puts them
where a user's data goes (arguments, error messages, log lines, queue names)
and checks that none of ``MARKS`` comes out."""

CANARIES = [
    "sk-proj-abcdefghijklmnopqrstuvwx1234567890",
    "4111 1111 1111 1111",
    "ada.lovelace@example.com",
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----",
    "xoxb-123456789012-abcdefghijklmnop",
]
# A piece of each that survives no redaction.
MARKS = ["abcdefghijklmnopqrstuvwx1234567890", "4111 1111", "lovelace@", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
         "123456789012-abcdefghijklmnop"]


def leaked(text: str) -> list[str]:
    return [mark for mark in MARKS if mark in text]
