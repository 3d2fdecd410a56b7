"""The dashboard shows endpoint URLs with their userinfo and query
values masked to staff who may not change endpoints; whoever may sees them whole."""

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from deliveries.models import Endpoint
from webhooks_core.egress.urlmask import masked_url

from .dashboard_data import seed_dashboard

pytestmark = pytest.mark.django_db

SECRET_URL = "https://hook-user:pa55word@flaky.example.org/webhooks?token=tok_live_42&team=ops"


def staff_with(username: str, *permissions: str) -> Client:
    user = User.objects.create_user(username, password="pw-for-tests-only", is_staff=True)
    for codename in permissions:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    client = Client()
    client.force_login(user)
    return client


def test_staff_without_the_change_permission_see_masked_urls() -> None:
    seed_dashboard()
    Endpoint.objects.filter(url__contains="flaky.example.org").update(url=SECRET_URL)

    viewer = staff_with("viewer", "view_endpoint").get("/admin/dashboard/").content.decode()
    assert "flaky.example.org/webhooks" in viewer
    for secret in ("pa55word", "hook-user", "tok_live_42", "=ops"):
        assert secret not in viewer
    assert "token=***" in viewer

    editor = staff_with("editor", "change_endpoint").get("/admin/dashboard/").content.decode()
    assert "tok_live_42" in editor
    assert "pa55word" in editor


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (SECRET_URL, "https://***@flaky.example.org/webhooks?token=***&team=***"),
        ("https://example.com/hook", "https://example.com/hook"),
        ("https://example.com/hook?opaque", "https://example.com/hook?opaque=***"),
        ("https://example.com:8443/h#frag", "https://example.com:8443/h#***"),
        ("http://[::1", "***"),
    ],
)
def test_masked_url(url: str, shown: str) -> None:
    assert masked_url(url) == shown
