"""Model fields that keep secrets out of the database in clear.

A webhook secret must stay usable for HMAC verification and a GitHub token for API calls,
so both are encrypted (Fernet: AES-128-CBC with an HMAC-SHA256), not hashed. The key is
derived from ``SECRET_KEY``; keys in ``SECRET_KEY_FALLBACKS`` still decrypt, so the secret
key can be rotated. A database dump alone reveals neither.
"""

from __future__ import annotations

import base64
import logging

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.db import models

log = logging.getLogger(__name__)

PREFIX = "fernet:"


def _fernet(secret_key: str) -> Fernet:
    key = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"peakwatch.encrypted-field"
    ).derive(secret_key.encode())
    return Fernet(base64.urlsafe_b64encode(key))


def _keys() -> MultiFernet:
    return MultiFernet(
        [_fernet(k) for k in (settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", []))]
    )


def encrypt(value: str) -> str:
    if not value or value.startswith(PREFIX):
        return value
    return PREFIX + _keys().encrypt(value.encode()).decode()


def decrypt(value: str) -> str:
    if not value or not value.startswith(PREFIX):
        # Empty, or stored before encryption (the migration encrypts those).
        return value
    try:
        return _keys().decrypt(value.removeprefix(PREFIX).encode()).decode()
    except InvalidToken:
        # Unreadable without the key it was written with: treated as unset, said loudly.
        log.error(
            "a stored secret cannot be decrypted: was DJANGO_SECRET_KEY changed? Put the "
            "old key in DJANGO_SECRET_KEY_FALLBACKS, or set the secret again"
        )
        return ""


class EncryptedTextField(models.TextField):
    """A string stored encrypted, read back in clear; an empty string stays empty.

    Encryption is randomised, so only the empty value can be looked up.
    """

    def from_db_value(self, value, expression, connection):
        return decrypt(value) if value is not None else value

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        return encrypt(value) if value is not None else value
