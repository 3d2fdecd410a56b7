"""System checks of this deployment that refuse unsafe production settings (the apps' own
checks are in ``webhooks_core.checks``, ``deliveries.checks`` and ``receivers.conf``).

They run with every management command and at server start; with DEBUG off an error stops
`migrate`, `runserver` and gunicorn's preload alike.
"""

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from webhooks_core.check_ids import check_id

from .keys import secret_key_problems


@register(Tags.security, deploy=False)
def check_production_settings(
    app_configs: Sequence[AppConfig] | None, **kwargs: Any
) -> list[Error | Warning]:
    if settings.DEBUG:
        return []
    problems: list[Error | Warning] = []
    # The settings refuse these at import already (webhooks_project/keys.py); this check
    # catches a key changed after that, e.g. by a settings module that imports ours.
    for problem in secret_key_problems(settings.SECRET_KEY):
        problems.append(
            Error(
                problem,
                hint="Set SECRET_KEY in the environment, or DEBUG=true for local development.",
                id=check_id("webhooks.E001"),
            )
        )
    if "*" in settings.ALLOWED_HOSTS:
        problems.append(
            Warning(
                "ALLOWED_HOSTS contains '*'.",
                hint="List the host names this deployment answers to.",
                id=check_id("webhooks.W001"),
            )
        )
    return problems


@register(Tags.security, deploy=True)
def check_debug_off_in_deployment(
    app_configs: Sequence[AppConfig] | None, **kwargs: Any
) -> list[Error]:
    # `manage.py check --deploy` runs in the Procfile's release phase: a deployment with
    # DEBUG on never gets as far as migrating.
    if settings.DEBUG:
        return [
            Error(
                "DEBUG is on in a deployment.",
                hint="Unset DEBUG (or set DEBUG=false) in production.",
                id=check_id("webhooks.E003"),
            )
        ]
    return []
