"""The settings registry: every setting the apps read, its default and what it does.

Each accessor module (``deliveries.conf``, ``receivers.conf``, this one) declares
``SETTINGS`` and reads values only through it, so a default exists exactly once and the
documentation's configuration reference is generated from the same tuples.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings


class _NotSet:
    def __repr__(self) -> str:
        return "NOT_SET"


NOT_SET: Any = _NotSet()


@dataclass(frozen=True)
class Setting:
    """One setting: ``default`` applies when the host's settings do not name it;
    ``debug_default``, if given, replaces it while ``DEBUG`` is on (local development)."""

    name: str
    default: object
    doc: str
    debug_default: object = NOT_SET

    def value(self) -> Any:
        if hasattr(settings, self.name):
            return getattr(settings, self.name)
        if self.debug_default is not NOT_SET and settings.DEBUG:
            return self.debug_default
        return self.default


class Registry:
    """The settings of one accessor module, looked up by name."""

    def __init__(self, entries: Iterable[Setting]) -> None:
        self._by_name = {entry.name: entry for entry in entries}

    def __call__(self, name: str) -> Any:
        return self._by_name[name].value()


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "WEBHOOKS_ENCRYPTION_KEY",
        "",
        "Fernet key(s) that encrypt secrets at rest, comma-separated for key rotation (the "
        "first encrypts, all decrypt). Required outside DEBUG (system check `webhooks.E002`; "
        "the reference deployment also refuses shipped and malformed keys at start); in DEBUG "
        "a key is derived from `SECRET_KEY`. `manage.py generate_encryption_key` (or "
        "`python -m webhooks_core.crypto`) makes one.",
    ),
    Setting(
        "WEBHOOKS_MAX_COUNTDOWN_SECONDS",
        60.0,
        "Retries due sooner than this wait as Celery countdowns; later ones wait in the "
        "database for the sweeper. Keep it far below the broker's visibility timeout.",
    ),
    Setting(
        "WEBHOOKS_SWEEP_BATCH_SIZE",
        500,
        "Rows per sweeper batch (`SELECT … FOR UPDATE SKIP LOCKED`).",
    ),
    Setting(
        "WEBHOOKS_SWEEP_INTERVAL_SECONDS",
        15.0,
        "How often beat runs the sweepers (and resumes stalled replays).",
    ),
    Setting(
        "METRICS_TOKEN",
        "",
        "Bearer token that may scrape `/metrics`. With neither it nor METRICS_ALLOWED_IPS "
        "set, `/metrics` answers 403.",
    ),
    Setting(
        "METRICS_ALLOWED_IPS",
        (),
        "Client addresses or CIDR networks that may scrape `/metrics` without the token "
        "(REMOTE_ADDR only, never X-Forwarded-For).",
    ),
)

value = Registry(SETTINGS)


def all_settings() -> tuple[Setting, ...]:
    """Every setting of both apps and of this package, for documentation and deployments
    that read them from the environment."""
    from deliveries.conf import SETTINGS as DELIVERIES
    from receivers.conf import SETTINGS as RECEIVERS

    return (*SETTINGS, *DELIVERIES, *RECEIVERS)
