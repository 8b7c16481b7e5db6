"""Credentials never leave in text: a URL's user information is masked wherever shown.

A clone URL may carry a password or token (``https://user:pass@host/repo.git``); git puts
the URL into its command line and sometimes its messages, which become run errors, log
lines and API answers. Everything that turns such text into output goes through
:func:`redact`.
"""

from __future__ import annotations

import logging
import re

MASK = "***"
# scheme://userinfo@host : the userinfo ends at the *last* "@" before the host (a password
# may hold a raw "@": https://user:p@ss@host/, as urlsplit reads it), so the match runs to
# the last "@" before the authority ends at "/", a space or the end. Quotes may be in it
# too: a password may hold them, and masking too much is harmless where too little leaks.
_CREDENTIALS = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<userinfo>[^/\s]+)@")


def _masked(match: re.Match) -> str:
    user, colon, _password = match["userinfo"].partition(":")
    # Without a password the user part may be the token itself (https://TOKEN@host/).
    shown = f"{user}:{MASK}" if colon and user else MASK
    return f"{match['scheme']}{shown}@"


def redact(text: str) -> str:
    """``text`` with the user information of every URL in it masked."""
    if not text or "@" not in text:
        return text
    return _CREDENTIALS.sub(_masked, text)


class RedactingFilter(logging.Filter):
    """Masks credentials in a record's message and traceback before any handler writes it.

    Installed on the handlers (settings.LOGGING, and Celery's in dashboard/celery.py): the
    sources redact what they raise, this catches what a library formats itself.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True
