"""The receiving side's settings: the registry entries (names, defaults, what they do),
declared once on their typed view, and the system checks that refuse inconsistent ones. Code
reads settings only here (``webhooks_core.conf`` holds those shared with the sending side:
countdowns and sweeps)."""

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.core.checks import CheckMessage, Error, Tags, Warning, register

from webhooks_core.check_ids import check_id
from webhooks_core.conf import Setting, View, accessor, settings_of

#: Providers retry for days (Stripe: up to 3); dedupe history must outlive that.
MIN_SAFE_INBOX_RETENTION_DAYS = 7


def _as_given(raw: Any) -> object:
    # A list of dotted paths, or anything else: receivers.E004 says what is wrong with it.
    return raw


class ReceiverSettings(View):
    """The receiving side: processing, retries, retention, handlers and schemes."""

    max_attempts = Setting(
        "RECEIVERS_MAX_ATTEMPTS",
        10,
        "Processing attempts per retry cycle before an inbox event is `failed`.",
    )
    backoff_base_seconds = Setting(
        "RECEIVERS_BACKOFF_BASE_SECONDS",
        10.0,
        "Base of the processing backoff (`base·2^(n-1) + jitter`).",
    )
    backoff_max_seconds = Setting(
        "RECEIVERS_BACKOFF_MAX_SECONDS",
        3600.0,
        "Cap of the processing backoff.",
    )
    lease_seconds = Setting(
        "RECEIVERS_LEASE_SECONDS",
        300.0,
        "How long a worker owns an inbox row it processes without renewing it; a running "
        "handler's lease is renewed every third of it (up to its bound), so this is how soon "
        "the row of a worker that died goes to another.",
    )
    handler_timeout_seconds = Setting(
        "RECEIVERS_HANDLER_TIMEOUT_SECONDS",
        300.0,
        "The bound of one handler's run. Within it the run's lease is renewed, so no other "
        "worker runs the event meanwhile; past it the attempt has failed (retried with "
        "backoff, `failed` after `RECEIVERS_MAX_ATTEMPTS`) and whatever the late run does in "
        "the database is rolled back. The prefork pool stops the handler at most 15 s later (the "
        "processing tasks' soft time limit); a thread cannot be stopped, so effects outside "
        "the database must be idempotent ([a handler's bound](receiving.md#a-handlers-bound)).",
    )
    wake_grace_seconds = Setting(
        "RECEIVERS_REDISPATCH_GRACE_SECONDS",
        60.0,
        "How long a sent processing message may take before the sweeper sends another.",
    )
    body_retention_days = Setting(
        "RECEIVERS_BODY_RETENTION_DAYS",
        30,
        "Raw bodies of finished inbox events are cleared after this.",
    )
    inbox_retention_days = Setting(
        "RECEIVERS_INBOX_RETENTION_DAYS",
        90,
        "Processed and ignored inbox events are deleted after this; keep it above providers' "
        "redelivery windows (a system check warns below 7).",
    )
    dispatch_batch_size = Setting(
        "RECEIVERS_DISPATCH_BATCH_SIZE",
        20,
        "Most inbox ids in one processing message sent by the receiving view.",
    )
    handler_modules = Setting[tuple[str, ...]](
        "RECEIVERS_HANDLER_MODULES",
        (),
        "Modules imported at start so their `@inbox_handler` functions register (handlers in "
        "an app's `ready()` need no entry).",
    )
    schemes = Setting[object](
        "RECEIVERS_SCHEMES",
        (),
        "Dotted paths to the host's own `receivers.schemes.Scheme` subclasses, offered beside "
        "the built-in providers (see *Write a provider*); a bad entry is a system check error.",
        parse=_as_given,
    )
    reconcile_interval_seconds = Setting(
        "RECEIVERS_RECONCILE_INTERVAL_SECONDS",
        300.0,
        "How often beat starts reconciliation.",
    )


get = accessor(ReceiverSettings)

SETTINGS = settings_of(ReceiverSettings)


@register(Tags.compatibility)
def check_receiver_settings(
    app_configs: Sequence[AppConfig] | None, **kwargs: Any
) -> list[CheckMessage]:
    conf = get()
    problems: list[CheckMessage] = []
    if conf.max_attempts < 1:
        problems.append(
            Error("RECEIVERS_MAX_ATTEMPTS must be at least 1.", id=check_id("receivers.E001"))
        )
    for name, seconds in (
        ("RECEIVERS_LEASE_SECONDS", conf.lease_seconds),
        ("RECEIVERS_HANDLER_TIMEOUT_SECONDS", conf.handler_timeout_seconds),
    ):
        if not seconds > 0:
            problems.append(Error(f"{name} must be positive.", id=check_id("receivers.E005")))
    if conf.dispatch_batch_size < 1:
        problems.append(
            Error(
                "RECEIVERS_DISPATCH_BATCH_SIZE must be at least 1.", id=check_id("receivers.E003")
            )
        )
    if conf.backoff_max_seconds < conf.backoff_base_seconds:
        problems.append(
            Error(
                "RECEIVERS_BACKOFF_MAX_SECONDS is smaller than RECEIVERS_BACKOFF_BASE_SECONDS.",
                id=check_id("receivers.E002"),
            )
        )
    if conf.inbox_retention_days < MIN_SAFE_INBOX_RETENTION_DAYS:
        problems.append(
            Warning(
                f"RECEIVERS_INBOX_RETENTION_DAYS is below {MIN_SAFE_INBOX_RETENTION_DAYS}: "
                "a provider's late redelivery could find no inbox row and be processed again.",
                id=check_id("receivers.W001"),
            )
        )
    if conf.body_retention_days > conf.inbox_retention_days:
        problems.append(
            Warning(
                "RECEIVERS_BODY_RETENTION_DAYS exceeds RECEIVERS_INBOX_RETENTION_DAYS; "
                "bodies go with their rows.",
                id=check_id("receivers.W002"),
            )
        )
    return problems
