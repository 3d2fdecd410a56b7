"""The settings registry: every setting the apps read, its default, how it is read and what
it does, written once; and the typed views the code reads them through.

A ``Setting`` is declared as an attribute of a ``View`` (a frozen, typed snapshot of the
settings of one concern): ``DeliverySettings.lease_seconds`` *is* the registry entry of
``WEBHOOKS_LEASE_SECONDS``, and ``deliveries.conf.get().lease_seconds`` is its value, a
``float``. Each accessor module (``deliveries.conf``, ``receivers.conf``, this one) derives
its ``SETTINGS`` from its views, so the documentation's configuration reference, the
reference deployment's environment and the code read the same entries. This module knows
no app: each registers its tuple in its ``AppConfig.ready()`` (``register``), and
``all_settings()`` answers those of the apps installed.

Every view, and every value derived from views (``address_policy``), is read once per
process (``per_process``) and read again after Django's ``setting_changed`` signal
(``override_settings``, pytest-django's ``settings`` fixture).
"""

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, overload

from django.conf import settings
from django.core.signals import setting_changed

from webhooks_core.egress.ssrf import AddressPolicy, parse_networks

T = TypeVar("T")
V = TypeVar("V", bound="View")


class _NotSet:
    def __repr__(self) -> str:
        return "NOT_SET"


NOT_SET: Any = _NotSet()


def _as_given(raw: Any) -> Any:
    return raw


def _default_parser(default: object) -> Callable[[Any], Any]:
    # How a host's value becomes the type of the default: lists (django-environ's, or a
    # host's own) become tuples, ints become floats where a float is expected, and an empty
    # text (a variable set to nothing) means the default. Integers and booleans are taken as
    # given.
    if isinstance(default, tuple):
        return tuple
    if isinstance(default, float):
        return float
    if isinstance(default, str):
        return lambda raw: str(raw) if raw else default
    return _as_given


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One setting: ``default`` applies when the host's settings do not name it;
    ``debug_default``, if given, replaces it while ``DEBUG`` is on (local development).
    ``parse`` turns the value into the type the code reads (by default: from the type of
    ``default``), and ``minimum`` bounds it from below.

    Declared as an attribute of a ``View``, it reads as its value on the view's instances."""

    name: str
    default: T
    doc: str
    debug_default: Any = NOT_SET
    parse: Callable[[Any], T] | None = field(default=None, compare=False)
    minimum: float | None = None

    def raw(self) -> Any:
        if hasattr(settings, self.name):
            return getattr(settings, self.name)
        if self.debug_default is not NOT_SET and settings.DEBUG:
            return self.debug_default
        return self.default

    def value(self) -> T:
        parse = self.parse or _default_parser(self.default)
        parsed = parse(self.raw())
        if self.minimum is not None and parsed < self.minimum:  # type: ignore[operator]
            return type(parsed)(self.minimum)  # type: ignore[call-arg]
        return parsed

    @overload
    def __get__(self, instance: None, owner: type) -> "Setting[T]": ...
    @overload
    def __get__(self, instance: "View", owner: type) -> T: ...
    def __get__(self, instance: "View | None", owner: type) -> "Setting[T] | T":
        # A view's instance holds its values in its own __dict__, which Python reads before
        # this (non-data) descriptor: only the class itself gets here.
        if instance is None:
            return self
        return self.value()


class View:
    """A frozen snapshot of the settings declared on the class (``Setting`` attributes),
    each read and parsed once when the view is made."""

    def __init__(self) -> None:
        for attribute, entry in self.entries().items():
            object.__setattr__(self, attribute, entry.value())

    @classmethod
    def entries(cls) -> dict[str, Setting[Any]]:
        """attribute -> registry entry, in declaration order."""
        found: dict[str, Setting[Any]] = {}
        for klass in reversed(cls.__mro__):
            found.update({k: v for k, v in vars(klass).items() if isinstance(v, Setting)})
        return found

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.entries())
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    __hash__ = None  # type: ignore[assignment]


def settings_of(*views: type[View]) -> tuple[Setting[Any], ...]:
    """The registry entries of ``views``, in declaration order (an accessor module's
    ``SETTINGS``)."""
    return tuple(entry for view in views for entry in view.entries().values())


_per_process: list["functools._lru_cache_wrapper[Any]"] = []
#: Every view class with its accessor (``get``, ``health`` …), for the tests.
ACCESSORS: dict[type[View], Callable[[], View]] = {}


def per_process(function: Callable[[], T]) -> Callable[[], T]:
    """``function``'s answer, kept for the process until a setting changes."""
    cached = functools.cache(function)
    _per_process.append(cached)
    return cached


def accessor(view: type[V]) -> Callable[[], V]:
    """The current instance of ``view``, made once per process (every delivery reads its
    settings several times) and again after a setting changed."""
    current = per_process(view)
    ACCESSORS[view] = current
    return current


def _forget(**kwargs: Any) -> None:
    for cached in _per_process:
        cached.cache_clear()


setting_changed.connect(_forget, dispatch_uid="webhooks_core.conf")


class CryptoSettings(View):
    """Secrets at rest (``webhooks_core.crypto.encryption``)."""

    encryption_key = Setting(
        "WEBHOOKS_ENCRYPTION_KEY",
        "",
        "Fernet key(s) that encrypt secrets at rest, comma-separated for key rotation (the "
        "first encrypts, all decrypt). Required outside DEBUG (system check `webhooks.E002`; "
        "the reference deployment also refuses shipped and malformed keys at start); in DEBUG "
        "a key is derived from `SECRET_KEY`. `manage.py generate_encryption_key` (or "
        "`python -m webhooks_core.crypto.encryption`) makes one.",
    )


class SchedulingSettings(View):
    """Retries and sweepers, shared by the sending and the receiving side."""

    max_countdown_seconds = Setting(
        "WEBHOOKS_MAX_COUNTDOWN_SECONDS",
        60.0,
        "Retries due sooner than this wait as Celery countdowns; later ones wait in the "
        "database for the sweeper. Keep it far below the broker's visibility timeout.",
    )
    sweep_batch_size = Setting(
        "WEBHOOKS_SWEEP_BATCH_SIZE",
        500,
        "Sending: per sweep, the most events the sweeper fans out (oldest first), endpoints "
        "it wakes (this many with a due row and this many whose rows' lease ran out, in no "
        "fixed order) and disabled or suspended endpoints it settles; the rest wait for the "
        "next sweep. Receiving: inbox rows per batch, when the inbox sweeper dispatches rows "
        "again (`SELECT … FOR UPDATE SKIP LOCKED`, at most 20 batches per run) and when "
        "inbox retention clears bodies and deletes rows.",
    )
    sweep_interval_seconds = Setting(
        "WEBHOOKS_SWEEP_INTERVAL_SECONDS",
        15.0,
        "How often beat runs the sweepers (and resumes stalled replays).",
    )


class MetricsSettings(View):
    """Who may scrape ``/metrics`` (``webhooks_core.web.metrics``)."""

    token = Setting(
        "METRICS_TOKEN",
        "",
        "Bearer token that may scrape `/metrics`. With neither it nor METRICS_ALLOWED_IPS "
        "set, `/metrics` answers 403.",
    )
    allowed_ips = Setting[tuple[str, ...]](
        "METRICS_ALLOWED_IPS",
        (),
        "Client addresses or CIDR networks that may scrape `/metrics` without the token "
        "(REMOTE_ADDR only, never X-Forwarded-For).",
    )


class SsrfSettings(View):
    """The SSRF guard for URLs operators configure (``address_policy``)."""

    allowed_networks = Setting[tuple[str, ...]](
        "WEBHOOKS_ALLOWED_NETWORKS",
        (),
        "CIDR networks the SSRF guard admits besides public addresses. In DEBUG loopback "
        "(`127.0.0.0/8`, `::1`) is admitted too.",
        debug_default=("127.0.0.0/8", "::1"),
    )
    require_https = Setting(
        "WEBHOOKS_REQUIRE_HTTPS",
        True,
        "Refuse `http://` URLs the platform calls (endpoints, when saved and when a request "
        "is sent; a source's reconciliation API). Off in DEBUG.",
        debug_default=False,
    )


crypto = accessor(CryptoSettings)
scheduling = accessor(SchedulingSettings)
metrics = accessor(MetricsSettings)
ssrf = accessor(SsrfSettings)

SETTINGS = settings_of(CryptoSettings, SchedulingSettings, MetricsSettings, SsrfSettings)

_registered: dict[str, tuple[Setting[Any], ...]] = {}


def register(app: str, entries: Iterable[Setting[Any]]) -> None:
    """Add an app's settings to ``all_settings()`` (called from its ``ready()``)."""
    _registered[app] = tuple(entries)


def all_settings() -> tuple[Setting[Any], ...]:
    """Every setting of this package and of the apps registered (the apps installed), for
    documentation and deployments that read them from the environment."""
    return (*SETTINGS, *(entry for entries in _registered.values() for entry in entries))


@per_process
def address_policy() -> AddressPolicy:
    """The SSRF guard's policy for URLs operators configure (endpoints made by operators
    and the API, a source's reconciliation API). A bad CIDR fails loudly: system check
    ``webhooks.E010``."""
    current = ssrf()
    return AddressPolicy(
        allowed_networks=parse_networks(current.allowed_networks),
        require_https=current.require_https,
    )
