"""The keys a deployment refuses to start without.

``settings.py`` calls :func:`refuse_unsafe_keys` at import when DEBUG is off, so every
process that loads the settings (gunicorn, every Celery process, ``manage.py``, the image's
``CMD``) exits within seconds, with one message listing every problem, instead of serving
with a key an attacker can know: the built-in development key, a placeholder this
repository ships, or a key too weak to resist guessing. The portal cookie, the admin's
session and CSRF tokens are signed with ``SECRET_KEY``; endpoint and source secrets are
encrypted with ``WEBHOOKS_ENCRYPTION_KEY``.

Flower reads none of the settings' keys but has its own password: ``python -m
webhooks_project.flower`` (the Procfile's ``flower`` line) refuses a missing, shipped or
short one before it starts Flower (:func:`flower_auth_problems`).

Pure functions, no Django import beyond the exception: the settings module calls them before
Django is configured.
"""

import base64
import binascii

from django.core.exceptions import ImproperlyConfigured

# As Django's security.W009 (django/core/checks/security/base.py) defines a weak key.
SECRET_KEY_MIN_LENGTH = 50
SECRET_KEY_MIN_UNIQUE_CHARACTERS = 5
SECRET_KEY_INSECURE_PREFIX = "django-insecure-"  # noqa: S105 (a prefix refused, not a key)

#: The development key the embedded default (DEBUG on) runs with.
INSECURE_DEFAULT_SECRET_KEY = "django-insecure-dev-only-do-not-use-in-production"  # noqa: S105

#: Every SECRET_KEY this repository has shipped as a placeholder or an example (compose
#: file, docs, test and benchmark set-ups of earlier versions): anyone can read them.
SHIPPED_SECRET_KEYS = frozenset(
    {
        INSECURE_DEFAULT_SECRET_KEY,
        "change-me-to-a-long-random-string-of-50-characters",
        "test-secret-key-that-is-long-enough-for-checks",
        "another-secret-key-that-is-long-enough-for-the-checks",
        "bench-secret-key-" + "x" * 40,
        "peer-bench-" + "x" * 40,
    }
)

#: Every WEBHOOKS_ENCRYPTION_KEY this repository has shipped (the compose file's default).
SHIPPED_ENCRYPTION_KEYS = frozenset({"Xj12CFzqtYLFParsutiJDIxnirNujtbEGL2ZbUylLmM="})

#: Flower passwords this repository has shipped, and the obvious ones.
SHIPPED_FLOWER_PASSWORDS = frozenset({"change-me", "changeme", "admin", "password", "flower"})
FLOWER_MIN_PASSWORD_LENGTH = 12

GENERATE_SECRET_KEY = "python -c 'import secrets; print(secrets.token_urlsafe(50))'"  # noqa: S105
HOW_TO_SECRET_KEY = f"generate one with: {GENERATE_SECRET_KEY}"
HOW_TO_ENCRYPTION_KEY = "generate one with: python -m webhooks_core.crypto.encryption"


def secret_key_problems(value: str | None, *, name: str = "SECRET_KEY") -> list[str]:
    """What is wrong with a signing key; weak as Django's security.W009 defines it."""
    if not value:
        return [f"{name} is not set ({HOW_TO_SECRET_KEY})."]
    if value in SHIPPED_SECRET_KEYS:
        return [
            f"{name} is a placeholder this repository ships, so anyone can know it "
            f"({HOW_TO_SECRET_KEY})."
        ]
    if (
        len(value) < SECRET_KEY_MIN_LENGTH
        or len(set(value)) < SECRET_KEY_MIN_UNIQUE_CHARACTERS
        or value.startswith(SECRET_KEY_INSECURE_PREFIX)
    ):
        return [
            f"{name} is weak: it needs at least {SECRET_KEY_MIN_LENGTH} characters, "
            f"{SECRET_KEY_MIN_UNIQUE_CHARACTERS} of them distinct, and no "
            f"{SECRET_KEY_INSECURE_PREFIX!r} prefix ({HOW_TO_SECRET_KEY})."
        ]
    return []


def _is_fernet_key(value: str) -> bool:
    try:
        return len(base64.urlsafe_b64decode(value.encode("ascii"))) == 32
    except (binascii.Error, ValueError, UnicodeError):
        return False


def encryption_key_problems(value: str | None) -> list[str]:
    """What is wrong with WEBHOOKS_ENCRYPTION_KEY (one or more comma-separated Fernet keys)."""
    keys = [key.strip() for key in (value or "").split(",") if key.strip()]
    if not keys:
        return [f"WEBHOOKS_ENCRYPTION_KEY is not set ({HOW_TO_ENCRYPTION_KEY})."]
    problems = []
    for position, key in enumerate(keys, start=1):
        which = (
            "WEBHOOKS_ENCRYPTION_KEY" if len(keys) == 1 else f"WEBHOOKS_ENCRYPTION_KEY #{position}"
        )
        if key in SHIPPED_ENCRYPTION_KEYS:
            problems.append(
                f"{which} is a placeholder this repository ships, so anyone can know it "
                f"({HOW_TO_ENCRYPTION_KEY})."
            )
        elif not _is_fernet_key(key):
            problems.append(
                f"{which} is not a Fernet key (32 bytes, url-safe base64) "
                f"({HOW_TO_ENCRYPTION_KEY})."
            )
    return problems


def key_problems(
    *, secret_key: str | None, fallbacks: list[str], encryption_key: str | None
) -> list[str]:
    problems = secret_key_problems(secret_key)
    for position, fallback in enumerate(fallbacks, start=1):
        problems += secret_key_problems(fallback, name=f"SECRET_KEY_FALLBACKS #{position}")
    return problems + encryption_key_problems(encryption_key)


def refuse_unsafe_keys(
    *, secret_key: str | None, fallbacks: list[str], encryption_key: str | None
) -> None:
    """Raise ImproperlyConfigured naming every problem; called with DEBUG off."""
    problems = key_problems(
        secret_key=secret_key, fallbacks=fallbacks, encryption_key=encryption_key
    )
    if problems:
        listed = "\n".join(f"  - {problem}" for problem in problems)
        raise ImproperlyConfigured(
            "Refusing to start with DEBUG off:\n"
            f"{listed}\n"
            "Set them in the environment (see docs/security.md), or DEBUG=true for "
            "local development."
        )


def flower_auth_problems(value: str | None) -> list[str]:
    """What is wrong with FLOWER_BASIC_AUTH (``user:password``, comma-separated)."""
    entries = [entry.strip() for entry in (value or "").split(",") if entry.strip()]
    if not entries:
        return ["FLOWER_BASIC_AUTH is not set (user:password)."]
    problems = []
    for entry in entries:
        user, colon, password = entry.partition(":")
        if not colon or not user:
            problems.append("FLOWER_BASIC_AUTH: an entry is not user:password.")
        elif password.lower() in SHIPPED_FLOWER_PASSWORDS:
            problems.append(
                f"FLOWER_BASIC_AUTH: the password of user {user!r} is a placeholder this "
                "repository ships."
            )
        elif len(password) < FLOWER_MIN_PASSWORD_LENGTH:
            problems.append(
                f"FLOWER_BASIC_AUTH: the password of user {user!r} is shorter than "
                f"{FLOWER_MIN_PASSWORD_LENGTH} characters."
            )
    return problems
