"""A portal token reaches no log line however its path is spelt, and the demo shop's
receiver is not part of a deployment (DEBUG off)."""

import logging

import pytest
from django.test import Client
from django.urls import Resolver404, resolve

from deliveries import services
from webhooks_project.accesslog import RedactTokens, redact

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "path", ["/portal/%6Fpen/{t}", "/portal/%6fpen/{t}", "/portal/open%2F{t}", "/portal/o%70en/{t}"]
)
def test_a_percent_encoded_portal_link_is_routed_and_redacted(path: str) -> None:
    _, token = services.portal_link_create(tenant="acme")
    spelt = path.format(t=token)
    # Django routes the decoded path: this spelling opens the link's page ...
    assert Client().get(spelt).status_code == 200
    # ... so neither the access log nor Django's own lines may carry it.
    line = f'127.0.0.1 - - "GET {spelt}?utm=%20x HTTP/1.1" 200 812'
    assert token not in redact(line)
    assert "/portal/open/[redacted]?utm=%20x" in redact(line)
    record = logging.LogRecord(
        "django.request", logging.WARNING, "", 0, "Forbidden: %s", (spelt,), None
    )
    RedactTokens().filter(record)
    assert token not in record.getMessage()


def test_the_demo_receiver_is_not_mounted_with_debug_off() -> None:
    # Resolved, it would answer as the demo source's receiver (a 404 for a source that
    # is not configured, but the demo's flaky 503s once it is).
    with pytest.raises(Resolver404):
        resolve("/demo/receiver/")
