"""Encryption at rest for endpoint secrets (Fernet from `cryptography`).

WEBHOOKS_ENCRYPTION_KEY holds one or more comma-separated Fernet keys: the first encrypts,
all decrypt, so the key itself can be rotated (add the new key first, re-save, drop the
old). In DEBUG without a key, one is derived from SECRET_KEY so the embedded default works;
the `webhooks.E002` system check refuses that outside DEBUG.
"""

import base64
import hashlib
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

from webhooks_core import conf


class SecretDecryptionError(Exception):
    """A stored secret cannot be decrypted with the configured keys."""


def generate_key() -> str:
    return Fernet.generate_key().decode("ascii")


@lru_cache(maxsize=4)
def _fernet(keys_setting: str, secret_key: str) -> MultiFernet:
    keys = [k.strip() for k in keys_setting.split(",") if k.strip()]
    if not keys:
        derived = hashlib.sha256(b"webhooks-secret-encryption:" + secret_key.encode()).digest()
        keys = [base64.urlsafe_b64encode(derived).decode("ascii")]
    return MultiFernet([Fernet(key) for key in keys])


def _current() -> MultiFernet:
    return _fernet(conf.value("WEBHOOKS_ENCRYPTION_KEY"), settings.SECRET_KEY)


def encrypt(plaintext: str) -> str:
    return _current().encrypt(plaintext.encode("utf-8")).decode("ascii")


def decrypt(token: str) -> str:
    try:
        return _current().decrypt(token.encode("ascii")).decode("utf-8")
    except (InvalidToken, UnicodeError) as exc:
        # Never include the token or the key in the message.
        raise SecretDecryptionError("stored secret cannot be decrypted with the keys") from exc


def reencrypt(token: str) -> str:
    """The same plaintext, encrypted with the first (newest) key; for key rotation."""
    try:
        return _current().rotate(token.encode("ascii")).decode("ascii")
    except (InvalidToken, UnicodeError) as exc:
        raise SecretDecryptionError("stored secret cannot be decrypted with the keys") from exc


if __name__ == "__main__":  # `python -m webhooks_core.crypto.encryption`: a new key, without Django
    print(generate_key())
