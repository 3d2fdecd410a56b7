"""Property-based bad input: random headers and bodies never crash anything.

Every answer to garbage is a 4xx, an unsigned request stores nothing, a correctly signed
body that is not an event stores nothing either, and the API never answers 5xx (503 while
the database is down: tests/webhooks_project/test_database_unavailable.py).
Runs in-process against the real database.
"""

import json
from typing import Any

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deliveries.models import ApiToken, Endpoint, Event
from receivers import services as receiver_services
from receivers.models import InboxEvent
from tests.receivers.helpers import sign_ours
from webhooks_core.crypto import signing

pytestmark = [pytest.mark.faults, pytest.mark.django_db]

SIGNATURE_HEADERS = [
    "X-Webhook-Signature",
    "X-Webhook-Timestamp",
    "X-Webhook-Id",
    "webhook-id",
    "webhook-timestamp",
    "webhook-signature",
    "Stripe-Signature",
    "X-Hub-Signature-256",
    "X-GitHub-Delivery",
    "X-GitHub-Event",
    "Content-Type",
]
header_values = st.text(
    alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=120
) | st.sampled_from(["t=1,v1=00", "v1,AAAA", "sha256=00", "t=,v1=", "application/json", ""])
headers = st.dictionaries(st.sampled_from(SIGNATURE_HEADERS), header_values, max_size=6)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)
# Nesting beyond what json (or the rest of the stack) can walk.
HOSTILE_BODIES = [
    b"[" * 10_000 + b"]" * 10_000,
    b'{"id": "x", "type": "t", "data": ' + b"[" * 990 + b"]" * 990 + b"}",
    b'{"type": "a.b", "data": ' + b'{"d": ' * 300 + b"1" + b"}" * 300 + b"}",
]
bodies = (
    st.binary(max_size=512)
    | json_values.map(lambda v: json.dumps(v).encode())
    | st.sampled_from(HOSTILE_BODIES)
)


def _names_an_event(body: bytes) -> bool:
    """A JSON object with an id and a type: perhaps a real event, which is accepted."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and "id" in data and "type" in data


# Signed bodies that cannot be an event of ours (hypothesis once found a valid one).
not_events = bodies.filter(lambda body: not _names_an_event(body))
FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def as_meta(raw: dict[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for name, value in raw.items():
        if name == "Content-Type":
            meta["CONTENT_TYPE"] = value
        else:
            meta["HTTP_" + name.upper().replace("-", "_")] = value
    return meta


@pytest.mark.parametrize("scheme", ["ours", "standard", "stripe", "github"])
def test_unsigned_garbage_is_refused_and_nothing_is_stored(client: Client, scheme: str) -> None:
    receiver_services.source_create(
        slug=f"fuzz-{scheme}", scheme=scheme, secret=signing.generate_secret()
    )

    @FUZZ
    @given(raw_headers=headers, body=bodies)
    def check(raw_headers: dict[str, str], body: bytes) -> None:
        response = client.generic(
            "POST", f"/receivers/fuzz-{scheme}/", data=body, **as_meta(raw_headers)
        )
        assert 400 <= response.status_code < 500, response.content[:200]
        assert b"Traceback" not in response.content

    check()
    assert not InboxEvent.objects.exists()


def test_signed_garbage_is_refused_as_malformed_and_nothing_is_stored(client: Client) -> None:
    # Past the signature check the body is trusted to be ours; parsing it must still
    # never turn into a 5xx or a half-written row.
    _, secret = receiver_services.source_create(slug="fuzz-signed", scheme="ours")

    @FUZZ
    @given(body=not_events)
    def check(body: bytes) -> None:
        response = client.generic(
            "POST",
            "/receivers/fuzz-signed/",
            data=body,
            content_type="application/json",
            **as_meta(sign_ours([secret], body)),
        )
        assert 400 <= response.status_code < 500, response.content[:200]
        assert b"Traceback" not in response.content

    check()
    assert not InboxEvent.objects.exists()


def test_the_api_answers_garbage_with_4xx(client: Client) -> None:
    _, token = ApiToken.issue("fuzz")
    auth: dict[str, Any] = {"HTTP_AUTHORIZATION": f"Bearer {token}"}

    @FUZZ
    @given(
        path=st.sampled_from(
            ["/api/v1/endpoints", "/api/v1/events", "/api/v1/sources", "/api/v1/deliveries/1/retry"]
        ),
        body=bodies,
        content_type=st.sampled_from(
            ["application/json", "text/plain", "application/x-www-form-urlencoded"]
        ),
    )
    def check(path: str, body: bytes, content_type: str) -> None:
        response = client.generic("POST", path, data=body, content_type=content_type, **auth)
        assert response.status_code < 500, (path, body[:100], response.content[:300])
        assert b"Traceback" not in response.content

    check()
    # Anything stored came from a request that was valid by chance, never half-written.
    for endpoint in Endpoint.objects.all():
        assert endpoint.secrets.exists()
    assert all(isinstance(e.type, str) and e.type for e in Event.objects.all())


# --- oversized bodies, NUL in list filters, unknown charsets -----------------------------


def test_the_api_answers_a_body_over_the_upload_limit_with_413(
    client: Client, settings: Any
) -> None:
    _, token = ApiToken.issue("big")
    big = b'{"type": "a.b", "data": "' + b"x" * settings.DATA_UPLOAD_MAX_MEMORY_SIZE + b'"}'
    for path in ("/api/v1/endpoints", "/api/v1/events", "/api/v1/sources", "/api/v1/replays"):
        response = client.generic(
            "POST", path, data=big, content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )  # fmt: skip
        assert response.status_code == 413, (path, response.content[:200])
        assert response.json()["detail"].startswith("The request body is larger than")


def _changelist_urls() -> list[str]:
    from django.contrib import admin
    from django.urls import reverse

    return sorted(
        reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for model in admin.site._registry
    )


def _filter_parameters(html: str) -> set[str]:
    """Every query parameter the page's filters, search and sorting links use."""
    import html as html_lib
    import re
    from urllib.parse import parse_qsl

    names = {"q", "o", "p", "e", "_facets"}
    for query in re.findall(r'href="\?([^"]*)"', html):
        names |= {name for name, _ in parse_qsl(html_lib.unescape(query))}
    # Filters typed in (time ranges) are forms with named inputs.
    names |= set(re.findall(r'<input[^>]+name="([a-z_]+__(?:gte|lt|lte|gt))"', html))
    return names


@pytest.mark.parametrize("changelist", _changelist_urls())
def test_every_admin_changelist_answers_400_to_nul_in_every_filter(
    client: Client, changelist: str, django_user_model: Any
) -> None:
    """`?type=%00` and the like were a 500: PostgreSQL refuses NUL in text."""
    from datetime import UTC, datetime

    from deliveries import services as delivery_services

    client.force_login(django_user_model.objects.create_superuser("nul", "n@example.com", "pw"))
    # Rows, so that the filters derived from data (choices, dates) render their links.
    endpoint, _ = delivery_services.endpoint_create(url="http://127.0.0.1:9/x", event_types=["*"])
    event = Event.objects.create(type="t.x", occurred_at=datetime.now(UTC), data={})
    event.deliveries.create(endpoint=endpoint)
    receiver_services.source_create(slug="nul-src", scheme="ours")
    page = client.get(changelist)
    assert page.status_code == 200, changelist
    parameters = _filter_parameters(page.content.decode())
    assert "q" in parameters

    for name in sorted(parameters):
        for value in ("\x00", "a\x00b"):
            response = client.get(changelist, {name: value})
            assert response.status_code == 400, (changelist, name, response.status_code)
            assert b"NUL" in response.content
    assert client.get(changelist, {"\x00": "x"}).status_code == 400


UNKNOWN_CHARSETS = ["rot13", "base64", "nonsense", "hex", "zlib", "x" * 300]


@pytest.mark.parametrize("charset", UNKNOWN_CHARSETS)
@pytest.mark.parametrize("path", ["/admin/login/", "/api/v1/events", "/receivers/fuzz-cs/"])
@pytest.mark.parametrize("media_type", ["application/x-www-form-urlencoded", "application/json"])
def test_an_unknown_charset_is_a_400_on_every_url(
    client: Client, charset: str, path: str, media_type: str
) -> None:
    """A form POST in `charset=rot13` to /admin/login/ was a 500 with a long traceback."""
    receiver_services.source_create(slug="fuzz-cs", scheme="ours")
    _, token = ApiToken.issue("charset")
    response = client.generic(
        "POST",
        path,
        data=b"username=a&password=b",
        content_type=f"{media_type}; charset={charset}",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 400, (path, charset, response.content[:200])
    assert b"charset" in response.content
    assert b"Traceback" not in response.content


@pytest.mark.parametrize("charset", ["utf-16", "latin-1", "utf-32", "ascii", "UTF-8"])
@pytest.mark.parametrize("path", ["/admin/login/", "/api/v1/events", "/receivers/fuzz-cs/"])
def test_a_known_but_odd_charset_is_never_a_500(client: Client, charset: str, path: str) -> None:
    receiver_services.source_create(slug="fuzz-cs", scheme="ours")
    _, token = ApiToken.issue("charset")
    for media_type in ("application/x-www-form-urlencoded", "application/json"):
        response = client.generic(
            "POST",
            path,
            data="username=ä&password=b".encode("utf-16"),
            content_type=f"{media_type}; charset={charset}",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        )
        assert response.status_code < 500, (path, charset, response.content[:200])
        if media_type.endswith("urlencoded") and charset.lower() != "utf-8":
            assert response.status_code == 400, (path, charset)


@pytest.mark.parametrize(
    "path",
    ["/api/v1/deliveries", "/api/v1/inbox", "/api/v1/events", "/api/v1/endpoints"],
)
def test_the_api_answers_nul_in_its_filters_without_a_500(client: Client, path: str) -> None:
    _, token = ApiToken.issue("nul")
    for name in ("status", "type", "source", "event_type", "endpoint", "event", "cursor", "limit"):
        response = client.get(path, {name: "a\x00b"}, HTTP_AUTHORIZATION=f"Bearer {token}")
        assert response.status_code in (200, 400), (path, name, response.content[:200])


# Endpoint settings the services refuse, whichever door they come through.
bad_header_names = st.sampled_from(
    [
        "Host",
        "Transfer-Encoding",
        "Content-Length",
        "Connection",
        "TE",
        "Upgrade",
        "Keep-Alive",
        "X-Webhook-Id",
        "webhook-signature",
        "bad name",
        "X-A\r\nX-B",
        "",
    ]
)
bad_header_values = st.sampled_from(
    ["price €5", "a\r\nX-Injected: 1", "nul\x00", "\U0001f600", "line\nbreak", "x" * 1001]
)
ambiguous_urls = st.sampled_from(
    [
        "http://127.0.0.1:18291\\@example.com/x",
        "https://example.com\\@127.0.0.1/",
        "https://user:pw@example.com/",
        "https://127.0.0.1%2f@example.com/",
        "https://0x7f.1/",
        "https://2130706433/",
        "https://exa mple.com/",
        "https://example.com:80:90/",
        "http://169.254.169.254/latest/",
    ]
)
bad_endpoint_fields = st.one_of(
    st.builds(lambda n: {"custom_headers": {n: "v"}}, bad_header_names),
    st.builds(lambda v: {"custom_headers": {"X-Ok": v}}, bad_header_values),
    st.builds(lambda u: {"url": u}, ambiguous_urls),
    st.just({"event_types": ["nothing.declared.here"]}),
    st.just({"custom_headers": {"X-Api-Key": "<redacted>"}}),
    st.just({"custom_headers": {"X-A": "a"}, "secret_headers": ["X-B"]}),
)


def test_bad_endpoint_settings_are_400_on_create_and_patch_and_change_nothing(
    client: Client, settings: Any
) -> None:
    settings.WEBHOOKS_ALLOWED_NETWORKS = []
    _, token = ApiToken.issue("fuzz-endpoints")
    auth: dict[str, Any] = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    good = {"url": "https://1.1.1.1/hook", "event_types": ["*"]}
    created = client.post(
        "/api/v1/endpoints", data=json.dumps(good), content_type="application/json", **auth
    )
    assert created.status_code == 201
    endpoint_id = created.json()["id"]
    before = Endpoint.objects.values().get(pk=endpoint_id)

    @FUZZ
    @given(fields=bad_endpoint_fields)
    def check(fields: dict[str, Any]) -> None:
        for method, path, payload in [
            ("POST", "/api/v1/endpoints", {**good, **fields}),
            ("PATCH", f"/api/v1/endpoints/{endpoint_id}", fields),
        ]:
            response = client.generic(
                method, path, data=json.dumps(payload), content_type="application/json", **auth
            )
            assert response.status_code == 400, (method, fields, response.content[:300])
            assert b"Traceback" not in response.content

    check()
    assert Endpoint.objects.count() == 1
    assert Endpoint.objects.values().get(pk=endpoint_id) == before
