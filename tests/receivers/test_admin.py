from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from receivers import services
from receivers.models import InboxEvent, InboxStatus, Source
from tests.fixtures import MakeSource
from tests.receivers.conftest import post
from tests.receivers.helpers import ours_event, sign_ours
from webhooks_core.crypto.signing import generate_secret

pytestmark = pytest.mark.django_db


def test_inbox_list_detail_and_retry_action(staff: Client, make_source: MakeSource) -> None:
    source, secret = make_source()
    body = ours_event("future.event")
    post(Client(), source.slug, body, sign_ours([secret], body))
    row = InboxEvent.objects.get()
    InboxEvent.objects.filter(pk=row.pk).update(status=InboxStatus.FAILED, last_error="boom")

    listing = staff.get("/admin/receivers/inboxevent/?status=failed")
    assert listing.status_code == 200
    assert row.event_id in listing.content.decode()
    detail = staff.get(f"/admin/receivers/inboxevent/{row.pk}/change/")
    assert detail.status_code == 200
    assert "boom" in detail.content.decode()

    response = staff.post(
        "/admin/receivers/inboxevent/",
        {"action": "retry_processing", "_selected_action": [str(row.pk)]},
        follow=True,
    )
    assert "1 event queued for processing" in response.content.decode()
    row.refresh_from_db()
    assert row.status == InboxStatus.RECEIVED


def test_source_admin_adds_a_secret_and_rotates(staff: Client, make_source: MakeSource) -> None:
    source, _ = make_source()
    assert staff.get(f"/admin/receivers/source/{source.pk}/change/").status_code == 200
    response = staff.post(
        "/admin/receivers/source/",
        {"action": "rotate_secret", "_selected_action": [str(source.pk)]},
        follow=True,
    )
    assert source.secrets.count() == 2
    assert source.secrets.filter(expires_at__isnull=False).count() == 1
    newest = source.secrets.order_by("-created_at", "-id").first()
    assert newest is not None
    # Shown once on its own page, never in the messages cookie.
    assert newest.value in response.content.decode()
    assert "no-store" in response.headers["Cache-Control"]
    assert newest.value not in str(response.cookies.get("messages", ""))

    github = Source.objects.create(slug="gh", scheme="github")
    response = staff.post(
        "/admin/receivers/source/",
        {"action": "rotate_secret", "_selected_action": [str(github.pk)]},
        follow=True,
    )
    assert "needs the provider" in response.content.decode()


def test_admin_refuses_a_secret_that_could_never_verify(
    staff: Client, make_source: MakeSource
) -> None:
    source, _ = make_source("standard")
    prefix = "secrets-"
    form = {
        "slug": source.slug,
        "scheme": source.scheme,
        "enabled": "on",
        "tolerance_seconds": "300",
        "max_body_bytes": str(256 * 1024),
        f"{prefix}TOTAL_FORMS": "2",
        f"{prefix}INITIAL_FORMS": "1",
        f"{prefix}MIN_NUM_FORMS": "0",
        f"{prefix}MAX_NUM_FORMS": "1000",
        f"{prefix}0-id": str(source.secrets.get().pk),
        f"{prefix}0-source": str(source.pk),
        f"{prefix}1-source": str(source.pk),
        f"{prefix}1-secret": "whsec_not base64!",
    }
    response = staff.post(f"/admin/receivers/source/{source.pk}/change/", form)
    assert response.status_code == 200  # the form again, with the error
    assert "base64" in response.content.decode()
    assert source.secrets.count() == 1

    form[f"{prefix}1-secret"] = generate_secret()
    response = staff.post(f"/admin/receivers/source/{source.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert source.secrets.count() == 2


def test_rotate_secret_page_takes_the_providers_new_secret_with_a_grace_period(
    staff: Client, make_source: MakeSource
) -> None:
    source, _ = make_source("github", secret="old github secret")
    url = f"/admin/receivers/source/{source.pk}/rotate-secret/"
    assert url in staff.get(f"/admin/receivers/source/{source.pk}/change/").content.decode()
    assert staff.get(url).status_code == 200

    refused = staff.post(url, {"secret": "", "grace_hours": "24"})
    assert refused.status_code == 200
    assert "needs the provider" in refused.content.decode()
    assert source.secrets.count() == 1

    response = staff.post(url, {"secret": "new github secret", "grace_hours": "0"})
    assert response.status_code == 302
    assert source.secrets.count() == 2
    [active] = source.secrets.unexpired(timezone.now())
    assert active.value == "new github secret"
    assert "new github secret" not in staff.get(response["Location"]).content.decode()


def test_rotate_secret_page_generates_for_our_scheme_and_refuses_bad_secrets(
    staff: Client, make_source: MakeSource
) -> None:
    source, _ = make_source("standard")
    url = f"/admin/receivers/source/{source.pk}/rotate-secret/"
    refused = staff.post(url, {"secret": "whsec_not base64!", "grace_hours": "24"})
    assert "base64" in refused.content.decode()

    response = staff.post(url, {"secret": "", "grace_hours": "1"}, follow=True)
    newest = source.secrets.order_by("-created_at", "-id").first()
    assert newest is not None
    assert newest.value in response.content.decode()  # shown once, on its own page
    assert source.secrets.unexpired(timezone.now()).count() == 2
    assert staff.get("/admin/receivers/source/999999/rotate-secret/").status_code == 404


# --- secrets and tokens in the admin; the SSRF guard at save time -------------------------


def _staff_in(group: str) -> Client:
    from tests.deliveries.admin.helpers import staff_in

    client = Client()
    client.force_login(staff_in(group))
    return client


@pytest.mark.parametrize("group", ["viewers", "operators"])
def test_view_only_users_never_see_the_reconciliation_token(
    make_source: MakeSource, group: str
) -> None:
    """The decrypted api_token was once a read-only field for viewers and operators."""
    source, _ = make_source(api_base_url="https://api.provider.example")
    source.api_token = "tok_live_s3cr3t_value"
    source.save()
    page = _staff_in(group).get(f"/admin/receivers/source/{source.pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "tok_live_s3cr3t_value" not in text
    assert "set (stored encrypted)" in text


SOURCE_FORM = {
    "slug": "shop",
    "scheme": "ours",
    "secret": "",
    "description": "",
    "enabled": "on",
    "tolerance_seconds": "300",
    "max_body_bytes": str(256 * 1024),
    "expected_account": "",
    "expected_mode": "",
    "api_base_url": "",
    "api_token": "",
}


def test_admin_add_source_gives_it_a_secret_shown_once(staff: Client) -> None:
    response = staff.post("/admin/receivers/source/add/", SOURCE_FORM)
    assert response.status_code == 200, response.content.decode()[:3000]
    source = Source.objects.get(slug="shop")
    secret = source.secrets.get()
    assert secret.value in response.content.decode()
    assert secret.value not in str(response.cookies.get("messages", ""))

    # A provider-issued scheme needs the provider's secret: a field error, nothing stored.
    refused = staff.post(
        "/admin/receivers/source/add/", {**SOURCE_FORM, "slug": "gh", "scheme": "github"}
    )
    assert refused.status_code == 200
    assert "needs the secret the provider gave you" in refused.content.decode()
    assert not Source.objects.filter(slug="gh").exists()


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/api",
        "http://169.254.169.254/latest/",
        "http://10.1.2.3/",
        "http://127.0.0.1:18291\\@example.com/x",
        "https://user:pw@provider.example/",
    ],
)
def test_reconciliation_url_gets_the_ssrf_guard_at_save_time(
    staff: Client, make_source: MakeSource, settings: Any, url: str
) -> None:
    """A source's api_base_url is refused like an endpoint URL, everywhere."""
    settings.WEBHOOKS_ALLOWED_NETWORKS = []
    with pytest.raises(services.SourceInvalid) as refused:
        services.source_create(slug="api", scheme="ours", api_base_url=url)
    assert "api_base_url" in refused.value.errors
    assert not Source.objects.filter(slug="api").exists()

    response = staff.post("/admin/receivers/source/add/", {**SOURCE_FORM, "api_base_url": url})
    assert response.status_code == 200
    assert not Source.objects.filter(slug="shop").exists()

    source, _ = make_source(api_base_url="https://1.1.1.1/api")
    with pytest.raises(services.SourceInvalid):
        services.source_update(source=source, api_base_url=url)
    source.refresh_from_db()
    assert source.api_base_url == "https://1.1.1.1/api"


def test_views_that_take_secrets_hide_them_from_error_reports(
    staff: Client, make_source: MakeSource
) -> None:
    """sensitive_post_parameters on every view that takes a secret by POST."""
    source, _ = make_source("github", secret="old github secret")
    for url, data in [
        (f"/admin/receivers/source/{source.pk}/rotate-secret/", {"secret": "", "grace_hours": "x"}),
        (f"/admin/receivers/source/{source.pk}/change/", {"slug": ""}),
        ("/admin/receivers/source/add/", {"slug": ""}),
    ]:
        response = staff.post(url, data)
        assert response.status_code == 200, url
        request = response.context["request"]
        assert getattr(request, "sensitive_post_parameters", None) == "__ALL__", url
