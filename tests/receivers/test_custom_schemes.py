"""An open set of providers: ``RECEIVERS_SCHEMES`` adds a host's own `Scheme` subclass
beside the built-in ones, without a migration. The guide's example provider
(``examples.providers.acme``, docs/receiving/providers.md) is driven end to end here: a
signed batch over real HTTP, one inbox row per event, handled by a real worker."""

import json
import time
from typing import Any

import pytest
import requests
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper
from rest_framework.test import APIClient

from examples.providers.acme import AcmeScheme, sign
from receivers import reconciliation, schemes, services
from receivers.checks import check_schemes
from receivers.handlers import inbox_handler, registry
from receivers.models import InboxEvent, InboxStatus, Source
from receivers.reconciliation import ReconcileResult
from receivers.schemes.base import Scheme
from tests.conftest import wait_until

ACME = "examples.providers.acme.AcmeScheme"
SECRET = "acme_sk_" + "k" * 32


class NotAScheme:
    name = "plain"


class Nameless(Scheme):
    pass


class Reconciling(AcmeScheme):
    name = "acme-reconciling"

    def reconcile(self, source: Any) -> ReconcileResult:
        return ReconcileResult(checked=7)


@pytest.fixture
def acme(settings: SettingsWrapper) -> None:
    settings.RECEIVERS_SCHEMES = [ACME]


def batch(*events: dict[str, Any]) -> bytes:
    return json.dumps({"events": list(events)}).encode()


def event(event_id: str, event_type: str = "invoice.paid") -> dict[str, Any]:
    return {"id": event_id, "type": event_type, "created": int(time.time()), "data": {}}


def acme_headers(url: str, body: bytes, secret: str = SECRET) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "Acme-Signature": sign(secret, int(time.time()), url, body),
    }


# --- the registry and its check ---------------------------------------------------------


def test_the_built_in_schemes_are_registered_without_any_setting() -> None:
    assert {"ours", "standard", "stripe", "github", "slack", "sendgrid"} <= set(schemes.SCHEMES)
    assert "acme" not in schemes.SCHEMES
    assert check_schemes(None) == []
    assert schemes.get("ours").generates_secrets
    assert not schemes.get("stripe").generates_secrets


def test_a_listed_scheme_joins_the_registry(acme: None) -> None:
    assert isinstance(schemes.get("acme"), AcmeScheme)
    assert ("acme", "Acme (Acme-Signature)") in schemes.choices()
    assert check_schemes(None) == []


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ("examples.providers.nowhere.Scheme", "cannot be imported"),
        ("examples.providers.acme.Nope", "cannot be imported"),
        ("tests.receivers.test_custom_schemes.NotAScheme", "is not a subclass"),
        ("tests.receivers.test_custom_schemes.Nameless", "has no usable name"),
        ("receivers.schemes.stripe.StripeScheme", "'stripe', which"),
        ("", "is not a dotted path"),
    ],
)
def test_a_bad_entry_is_a_check_error_not_a_crash(
    settings: SettingsWrapper, entry: str, says: str
) -> None:
    settings.RECEIVERS_SCHEMES = [ACME, entry]

    [error] = check_schemes(None)

    assert error.id == "receivers.E004"
    assert says in error.msg, error.msg
    assert repr(entry) in error.msg
    # The good entries still count: one typo does not take every provider down.
    assert "acme" in schemes.SCHEMES
    with pytest.raises(SystemCheckError, match=r"receivers\.E004"):
        call_command("check")


def test_a_string_instead_of_a_list_is_a_check_error(settings: SettingsWrapper) -> None:
    settings.RECEIVERS_SCHEMES = ACME
    [error] = check_schemes(None)
    assert "must be a list" in error.msg
    assert "ours" in schemes.SCHEMES


def test_a_scheme_reconciles_by_itself(settings: SettingsWrapper) -> None:
    settings.RECEIVERS_SCHEMES = ["tests.receivers.test_custom_schemes.Reconciling"]
    assert Reconciling.reconciles()
    assert not AcmeScheme.reconciles()
    found = reconciliation.reconciler_for("acme-reconciling")
    assert found is not None
    assert found(Source(slug="x", scheme="acme-reconciling")).checked == 7
    assert reconciliation.reconciler_for("github") is None


# --- sources of a host's scheme --------------------------------------------------------


@pytest.mark.django_db
def test_the_api_creates_a_source_of_a_listed_scheme(acme: None, api: APIClient) -> None:
    response = api.post(
        "/api/v1/sources", {"slug": "acme", "scheme": "acme", "secret": SECRET}, format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["scheme"] == "acme"
    # The scheme's own rules apply to its secrets, and it generates none.
    for secret, field in [("whatever", "secret"), ("", "secret")]:
        refused = api.post(
            "/api/v1/sources", {"slug": "acme-2", "scheme": "acme", "secret": secret}, format="json"
        )
        assert refused.status_code == 400, refused.content
        assert field in refused.json()


@pytest.mark.django_db
def test_an_unlisted_scheme_is_a_400(api: APIClient) -> None:
    response = api.post(
        "/api/v1/sources", {"slug": "acme", "scheme": "acme", "secret": SECRET}, format="json"
    )
    assert response.status_code == 400
    assert "scheme" in response.json()
    with pytest.raises(services.SourceInvalid, match="not a scheme"):
        services.source_create(slug="acme", scheme="acme", secret=SECRET)
    assert not Source.objects.exists()


@pytest.mark.django_db
def test_the_admin_offers_a_listed_scheme(acme: None, admin_client: Client) -> None:
    page = admin_client.get("/admin/receivers/source/add/")
    assert page.status_code == 200
    assert b'<option value="acme">Acme (Acme-Signature)</option>' in page.content
    created = admin_client.post(
        "/admin/receivers/source/add/",
        {
            "slug": "acme",
            "scheme": "acme",
            "secret": SECRET,
            "tolerance_seconds": 300,
            "max_body_bytes": 262144,
        },
    )
    assert created.status_code == 302, created.content
    assert Source.objects.get(slug="acme").scheme == "acme"


@pytest.mark.django_db
def test_a_source_whose_scheme_is_gone_answers_503_and_stores_nothing(
    settings: SettingsWrapper, client: Client
) -> None:
    settings.RECEIVERS_SCHEMES = [ACME]
    services.source_create(slug="acme", scheme="acme", secret=SECRET)
    settings.RECEIVERS_SCHEMES = []
    body = batch(event("evt_1"))
    response = client.post(
        "/receivers/acme/",
        data=body,
        content_type="application/json",
        headers=acme_headers("http://testserver/receivers/acme/", body),
    )
    assert response.status_code == 503
    assert response["Retry-After"]
    assert not InboxEvent.objects.exists()


# --- the example provider over HTTP -------------------------------------------------------


@pytest.mark.django_db
def test_a_challenge_is_answered_and_not_stored(acme: None, client: Client) -> None:
    services.source_create(slug="acme", scheme="acme", secret=SECRET)
    body = json.dumps({"type": "url.verify", "challenge": "c-123"}).encode()
    url = "http://testserver/receivers/acme/"

    answered = client.post(
        "/receivers/acme/",
        data=body,
        content_type="application/json",
        headers=acme_headers(url, body),
    )
    forged = client.post(
        "/receivers/acme/",
        data=body,
        content_type="application/json",
        headers=acme_headers(url, body, secret="acme_sk_other"),
    )

    assert answered.status_code == 200
    assert json.loads(answered.content) == {"challenge": "c-123"}
    assert forged.status_code == 401
    assert not InboxEvent.objects.exists()


@pytest.mark.django_db
def test_the_url_signed_is_the_public_url_behind_a_proxy(acme: None, client: Client) -> None:
    public = "https://hooks.example.com/acme"
    services.source_create(slug="acme", scheme="acme", secret=SECRET, public_url=public)
    body = batch(event("evt_1"))

    as_called = client.post(
        "/receivers/acme/?x=1",
        data=body,
        content_type="application/json",
        headers=acme_headers(f"{public}?x=1", body),
    )
    as_reached = client.post(
        "/receivers/acme/?x=1",
        data=body,
        content_type="application/json",
        headers=acme_headers("http://testserver/receivers/acme/?x=1", body),
    )

    assert as_called.status_code == 200, as_called.content
    assert as_reached.status_code == 401


@pytest.mark.django_db
def test_a_batch_is_stored_all_or_nothing(acme: None, client: Client) -> None:
    services.source_create(slug="acme", scheme="acme", secret=SECRET)
    url = "http://testserver/receivers/acme/"

    def send(body: bytes) -> Any:
        return client.post(
            "/receivers/acme/",
            data=body,
            content_type="application/json",
            headers=acme_headers(url, body),
        )

    bad = send(batch(event("evt_1"), {"id": "evt_2"}))
    assert bad.status_code == 400
    assert "event 1" in bad.json()["detail"]
    assert not InboxEvent.objects.exists()

    first = send(batch(event("evt_1"), event("evt_2")))
    again = send(batch(event("evt_2"), event("evt_3")))

    assert first.json() == {"status": "accepted", "events": 2, "stored": 2}
    assert again.json() == {"status": "accepted", "events": 2, "stored": 1}
    assert sorted(InboxEvent.objects.values_list("event_id", flat=True)) == [
        "evt_1",
        "evt_2",
        "evt_3",
    ]
    stored = InboxEvent.objects.get(event_id="evt_1")
    assert "Acme-Signature" not in stored.headers
    assert stored.provider_timestamp is not None


@pytest.mark.django_db(transaction=True)
def test_a_signed_batch_is_processed_end_to_end(
    settings: SettingsWrapper, celery_worker: object, live_server: Any
) -> None:
    settings.RECEIVERS_SCHEMES = [ACME]
    services.source_create(slug="acme", scheme="acme", secret=SECRET)
    seen: list[str] = []

    @inbox_handler("invoice.paid", sources=["acme"])
    def paid(inbox_event: InboxEvent) -> None:
        seen.append(inbox_event.event_id)

    url = f"{live_server.url}/receivers/acme/"
    body = batch(event("evt_a"), event("evt_b"), event("evt_c", "invoice.voided"))
    try:
        response = requests.post(url, data=body, headers=acme_headers(url, body), timeout=10)
        assert response.status_code == 200, response.text
        assert response.json() == {"status": "accepted", "events": 3, "stored": 3}
        wait_until(
            lambda: (
                InboxEvent.objects.filter(
                    status__in=[InboxStatus.PROCESSED, InboxStatus.IGNORED]
                ).count()
                == 3
            ),
            timeout=30,
            what="the three events handled",
        )
    finally:
        registry.unregister("invoice.paid", sources=["acme"])
    assert sorted(seen) == ["evt_a", "evt_b"]
    statuses = dict(InboxEvent.objects.values_list("event_id", "status"))
    assert statuses == {"evt_a": "processed", "evt_b": "processed", "evt_c": "ignored"}


@pytest.mark.django_db
def test_rotating_a_source_whose_scheme_is_gone_is_refused_not_a_crash(
    settings: SettingsWrapper,
) -> None:
    settings.RECEIVERS_SCHEMES = [ACME]
    source, _ = services.source_create(slug="acme", scheme="acme", secret=SECRET)
    settings.RECEIVERS_SCHEMES = []
    with pytest.raises(services.SecretRequired):
        services.source_rotate_secret(source=source)
    with pytest.raises(services.InvalidSecret, match="not registered"):
        services.source_rotate_secret(source=source, secret=SECRET + "2")
    assert source.secrets.count() == 1
