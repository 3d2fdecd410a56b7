"""Values a client may send that Python or HTTP would mishandle: refused in our words."""

import json

import pytest
from rest_framework.test import APIClient

from deliveries.endpoints import headers
from deliveries.models import Endpoint, Event
from tests.deliveries.api.helpers import post_raw

pytestmark = pytest.mark.django_db


def test_an_integer_of_5000_digits_is_a_400_in_our_words(api: APIClient) -> None:
    raw = '{"type": "invoice.paid", "data": {"n": ' + "9" * 5000 + "}}"
    response = post_raw(api, "/api/v1/events", raw, "application/json")
    assert response.status_code == 400, response.content
    detail = response.json()["detail"]
    assert "more than 4000 digits" in detail
    assert "sys." not in detail
    assert "int_max_str_digits" not in detail
    assert not Event.objects.exists()
    # A long number that is not too long is taken.
    raw = '{"type": "invoice.paid", "data": {"n": ' + "9" * 400 + "}}"
    assert post_raw(api, "/api/v1/events", raw, "application/json").status_code == 202


@pytest.mark.parametrize(
    "value", ["a\x85b", "a\x7fb", "a\x0bb", "a\x1bb", "a\x9fb", " leading", "trailing\t"]
)
def test_a_header_value_outside_https_field_value_grammar_is_refused(
    api: APIClient, value: str
) -> None:
    assert headers.problems({"X-Api-Key-Id": value})
    response = post_raw(
        api,
        "/api/v1/endpoints",
        json.dumps(
            {
                "url": "https://receiver.example.com/hooks",
                "event_types": ["*"],
                "custom_headers": {"X-Client": value},
            }
        ),
        "application/json",
    )
    assert response.status_code == 400, response.content
    assert "X-Client" in " ".join(response.json()["custom_headers"])
    assert not Endpoint.objects.exists()


def test_latin_1_and_inner_white_space_stay_allowed() -> None:
    assert headers.problems({"X-Client": "Zürich, caf\xe9\tbar"}) == []
