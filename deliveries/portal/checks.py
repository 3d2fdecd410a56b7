"""System check: a tenant resolver that cannot be imported fails at start, not per request."""

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.core.checks import Error
from django.utils.module_loading import import_string

from deliveries import conf
from webhooks_core.check_ids import check_id


def check_tenant_resolver(app_configs: Sequence[AppConfig] | None, **kwargs: Any) -> list[Error]:
    path = conf.portal().tenant_resolver
    if not path:
        return []
    try:
        resolver = import_string(path)
    except ImportError as exc:
        return [
            Error(
                f"The portal's tenant resolver {path!r} cannot be imported: {exc}",
                hint="Name a callable request -> tenant id or None, e.g. 'myapp.portal.tenant_of'.",
                id=check_id("webhooks.E040"),
            )
        ]
    if not callable(resolver):
        return [
            Error(
                f"The portal's tenant resolver {path!r} is not callable",
                id=check_id("webhooks.E040"),
            )
        ]
    return []
