"""The benchmarks' writing view (`bench/anchor.py`, `/bench/write` in `bench.urls` only):
the API's bearer token, one row inserted and committed, 202; no token or a wrong one, 401."""

import json

import pytest
from django.db import connection
from django.test import RequestFactory

from bench import anchor
from webhooks_core.models import ApiToken


@pytest.mark.django_db
def test_the_writing_view_checks_the_apis_token_and_inserts_one_row() -> None:
    with connection.cursor() as cursor:
        anchor.create_table(cursor)
    token, plain = ApiToken.issue("bench-anchor")
    factory = RequestFactory()
    body = json.dumps({"n": 1})

    def post(headers: dict[str, str]) -> int:
        request = factory.post(
            "/bench/write", body, content_type="application/json", headers=headers
        )
        return anchor.write(request).status_code

    assert post({}) == 401
    assert post({"Authorization": "Bearer whk_not-a-token"}) == 401
    assert post({"Authorization": f"Bearer {plain}"}) == 202
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT token_id, body FROM {anchor.TABLE}")  # noqa: S608
        rows = cursor.fetchall()
    assert [(token_id, json.loads(b) if isinstance(b, str) else b) for token_id, b in rows] == [
        (token.pk, {"n": 1})
    ]


def test_the_writing_view_is_routed_by_the_benchmarks_urls_only() -> None:
    from django.urls import Resolver404, resolve

    assert resolve("/bench/write", urlconf="bench.urls").func is anchor.write
    with pytest.raises(Resolver404):
        resolve("/bench/write", urlconf="webhooks_project.urls")
