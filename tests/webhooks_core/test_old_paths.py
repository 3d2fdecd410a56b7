"""The modules that moved to webhooks_core are still importable from their old
paths, as the very same module objects: code and tests written against ``deliveries.ssrf``
or ``deliveries.api.strict`` keep working, private names and monkeypatching included."""

import importlib

import pytest

MOVED = {
    "deliveries.signing": "webhooks_core.signing",
    "deliveries.ssrf": "webhooks_core.ssrf",
    "deliveries.ssrf_transport": "webhooks_core.ssrf_transport",
    "deliveries.deadlines": "webhooks_core.deadlines",
    "deliveries.tracing": "webhooks_core.tracing",
    "deliveries.retry_policy": "webhooks_core.retry_policy",
    "deliveries.jsondepth": "webhooks_core.jsondepth",
    "deliveries.tenants": "webhooks_core.tenants",
    "deliveries.middleware": "webhooks_core.middleware",
    "deliveries.urlmask": "webhooks_core.urlmask",
    "deliveries.admin.secrets": "webhooks_core.secrets_page",
    **{
        f"deliveries.api.{name}": f"webhooks_core.api.{name}"
        for name in (
            "authentication",
            "base",
            "errors",
            "filters",
            "pagination",
            "parsers",
            "schema",
            "schema_errors",
            "scoping",
            "strict",
        )
    },
}


@pytest.mark.parametrize(("old", "new"), sorted(MOVED.items()))
def test_the_old_path_is_the_moved_module(old: str, new: str) -> None:
    assert importlib.import_module(old) is importlib.import_module(new)


def test_the_moved_models_are_importable_from_deliveries_models() -> None:
    from deliveries import models
    from webhooks_core import models as core

    assert models.ApiToken is core.ApiToken
    assert models.AuditEntry is core.AuditEntry
    assert models.hash_api_token is core.hash_api_token
    assert core.ApiToken._meta.db_table == "webhooks_core_apitoken"
