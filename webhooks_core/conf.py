"""The settings registry: every setting the apps read, its default and what it does.

Each accessor module (``deliveries.conf``, ``receivers.conf``, this one) declares
``SETTINGS`` and reads values only through it, so a default exists exactly once and the
documentation's configuration reference is generated from the same tuples. This module
knows no app: each registers its tuple in its ``AppConfig.ready()`` (``register``), and
``all_settings()`` answers those of the apps installed.
"""

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed

from webhooks_core.egress.ssrf import AddressPolicy, parse_networks


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
        "`python -m webhooks_core.crypto.encryption`) makes one.",
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
        "Sending: per sweep, the most events the sweeper fans out (oldest first), endpoints "
        "it wakes (this many with a due row and this many whose rows' lease ran out, in no "
        "fixed order) and disabled or suspended endpoints it settles; the rest wait for the "
        "next sweep. Receiving: inbox rows per batch, when the inbox sweeper dispatches rows "
        "again (`SELECT … FOR UPDATE SKIP LOCKED`, at most 20 batches per run) and when "
        "inbox retention clears bodies and deletes rows.",
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
    Setting(
        "WEBHOOKS_ALLOWED_NETWORKS",
        (),
        "CIDR networks the SSRF guard admits besides public addresses. In DEBUG loopback "
        "(`127.0.0.0/8`, `::1`) is admitted too.",
        debug_default=("127.0.0.0/8", "::1"),
    ),
    Setting(
        "WEBHOOKS_REQUIRE_HTTPS",
        True,
        "Refuse `http://` URLs the platform calls (endpoints, when saved and when a request "
        "is sent; a source's reconciliation API). Off in DEBUG.",
        debug_default=False,
    ),
)

value = Registry(SETTINGS)

_registered: dict[str, tuple[Setting, ...]] = {}


def register(app: str, entries: Iterable[Setting]) -> None:
    """Add an app's settings to ``all_settings()`` (called from its ``ready()``)."""
    _registered[app] = tuple(entries)


def all_settings() -> tuple[Setting, ...]:
    """Every setting of this package and of the apps registered (the apps installed), for
    documentation and deployments that read them from the environment."""
    return (*SETTINGS, *(entry for entries in _registered.values() for entry in entries))


@functools.cache
def address_policy() -> AddressPolicy:
    """The SSRF guard's policy for URLs operators configure (endpoints made by operators
    and the API, a source's reconciliation API). A bad CIDR fails loudly: system check
    ``webhooks.E010``."""
    return AddressPolicy(
        allowed_networks=parse_networks(tuple(value("WEBHOOKS_ALLOWED_NETWORKS"))),
        require_https=value("WEBHOOKS_REQUIRE_HTTPS"),
    )


def _forget(**kwargs: Any) -> None:
    # A changed setting (tests, `override_settings`) is read again.
    address_policy.cache_clear()


setting_changed.connect(_forget, dispatch_uid="webhooks_core.conf")
