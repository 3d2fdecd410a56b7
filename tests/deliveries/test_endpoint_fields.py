"""An endpoint's field rules live in `deliveries.endpoints.field_rules` only: the model, the
services, the API serializer and the admin's and the portal's forms all take them from
there, and a create-only field is refused on update by the API and the admin alike."""

import dataclasses
import json
from typing import Any

import pytest
from django.test import Client
from rest_framework import serializers
from rest_framework.test import APIClient

from deliveries import services
from deliveries.admin import endpoints as admin_endpoints
from deliveries.admin.endpoints import EndpointAdmin, EndpointForm
from deliveries.api.serializers import EndpointSerializer, RotateSecretSerializer
from deliveries.endpoints import field_rules, lifecycle
from deliveries.endpoints.field_rules import (
    CREATE_ONLY,
    EDITABLE,
    NUMERIC,
    READ_ONLY,
    TENANT_FIXED,
    Bound,
)
from deliveries.models import Endpoint
from deliveries.portal.forms import EndpointForm as PortalEndpointForm
from tests.deliveries.admin.helpers import endpoint_form

ADMIN = "/admin/deliveries/endpoint"
URL = "https://fields.example.com/hook"


def _serializer_fields() -> dict[str, Any]:
    return dict(EndpointSerializer().fields)


# --- the table and its readers ---------------------------------------------------------


@pytest.mark.parametrize("rule", NUMERIC, ids=lambda rule: rule.name)
def test_each_bound_is_the_serializers_and_the_admin_forms(rule: Bound) -> None:
    api = _serializer_fields()[rule.name]
    form = EndpointForm().fields[rule.name]
    assert type(api) is (serializers.IntegerField if rule.kind is int else serializers.FloatField)
    assert (api.min_value, api.max_value) == (rule.low, rule.high)
    assert (form.min_value, form.max_value) == (rule.low, rule.high)  # type: ignore[attr-defined]
    assert (api.allow_null, form.required) == (rule.nullable, not rule.nullable)
    # Out of bounds, the admin's form says what the service says.
    assert form.error_messages["min_value"] == form.error_messages["max_value"] == rule.refusal
    # The model's default and nullability are the table's.
    assert Endpoint._meta.get_field(rule.name).null is rule.nullable
    assert getattr(Endpoint(), rule.name) == rule.default


def test_a_changed_bound_changes_the_serializer_the_admin_form_and_the_service(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    narrower = dataclasses.replace(field_rules.BY_NAME["max_in_flight"], low=2, high=7)
    table = tuple(narrower if r.name == narrower.name else r for r in field_rules.NUMERIC)
    monkeypatch.setattr(field_rules, "NUMERIC", table)

    api = _serializer_fields()["max_in_flight"]
    form = EndpointForm().fields["max_in_flight"]
    assert (api.min_value, api.max_value) == (2, 7)
    assert (form.min_value, form.max_value) == (2, 7)  # type: ignore[attr-defined]
    with pytest.raises(services.EndpointInvalid) as raised:
        services.endpoint_check(url=URL, event_types=["*"], max_in_flight=8)
    assert raised.value.errors == {"max_in_flight": ["Must be a number from 2 to 7."]}


def test_lengths_are_the_tables_everywhere() -> None:
    api = _serializer_fields()
    admin = EndpointForm.base_fields
    portal = PortalEndpointForm.base_fields
    url_max = field_rules.URL_MAX_LENGTH
    assert api["url"].max_length == admin["url"].max_length == portal["url"].max_length == url_max  # type: ignore[attr-defined]
    assert Endpoint._meta.get_field("url").max_length == url_max
    description_max = field_rules.DESCRIPTION_MAX_LENGTH
    assert Endpoint._meta.get_field("description").max_length == description_max
    assert admin["description"].max_length == portal["description"].max_length  # type: ignore[attr-defined]
    assert portal["description"].max_length == description_max  # type: ignore[attr-defined]
    filters = api["event_types"]
    assert filters.max_length == field_rules.MAX_FILTERS
    assert filters.child.max_length == field_rules.FILTER_MAX_LENGTH
    assert api["version_pins"].child.max_value == field_rules.MAX_VERSION_PIN
    grace = RotateSecretSerializer().fields["grace_seconds"]
    admin_grace = admin_endpoints.RotateForm.base_fields["grace_seconds"]
    assert grace.max_value == admin_grace.max_value == field_rules.MAX_ROTATION_GRACE_SECONDS  # type: ignore[attr-defined]


def test_who_may_set_what_is_the_tables() -> None:
    api = _serializer_fields()
    writable = {name for name, field in api.items() if not field.read_only}
    # The API takes every field the services take, and `state` (endpoint_set_state).
    assert writable == EDITABLE | CREATE_ONLY | {"state"}
    assert all(api[name].read_only for name in READ_ONLY)
    # The admin's form takes only those fields (state through its actions), and shows the
    # system's own fields read-only.
    assert set(EndpointForm.Meta.fields) <= EDITABLE | CREATE_ONLY
    assert set(READ_ONLY) <= set(EndpointAdmin.readonly_fields)
    # The services' lists are the table's.
    assert lifecycle.EDITABLE is EDITABLE
    assert lifecycle.CREATE_ONLY is CREATE_ONLY
    assert not EDITABLE & CREATE_ONLY
    assert set(field_rules.OPTION_FIELDS) | set(field_rules.AUTH_FIELDS) <= EDITABLE


# --- behaviour: bounds and create-only fields, through the API and the admin -----------


def _patch(api: APIClient, pk: Any, payload: dict[str, Any]) -> Any:
    return api.patch(
        f"/api/v1/endpoints/{pk}", data=json.dumps(payload), content_type="application/json"
    )


@pytest.mark.django_db
def test_a_value_out_of_bounds_is_refused_by_the_api_and_the_admin(
    api: APIClient, admin_client: Client
) -> None:
    rule = field_rules.BY_NAME["max_in_flight"]
    created, _ = services.endpoint_create(url=URL, event_types=["*"])
    too_many = int(rule.high) + 1

    response = _patch(api, created.pk, {"max_in_flight": too_many})
    assert response.status_code == 400
    assert list(response.json()) == ["max_in_flight"]

    page = admin_client.post(
        f"{ADMIN}/{created.pk}/change/", endpoint_form(url=URL, max_in_flight=str(too_many))
    )
    assert page.status_code == 200
    assert page.context["adminform"].form.errors == {"max_in_flight": [rule.refusal]}

    created.refresh_from_db()
    assert created.max_in_flight is None


@pytest.mark.django_db
def test_a_create_only_field_is_refused_on_update_by_the_api_and_the_admin(
    api: APIClient, admin_client: Client
) -> None:
    assert "tenant" in CREATE_ONLY
    created, _ = services.endpoint_create(url=URL, event_types=["*"], tenant="acme")

    response = _patch(api, created.pk, {"tenant": "globex"})
    assert response.status_code == 400
    assert response.json() == {"tenant": [TENANT_FIXED]}
    # The same tenant again is no change.
    assert _patch(api, created.pk, {"tenant": "acme"}).status_code == 200

    # The admin shows it read-only on change, takes no value for it, and saves the rest.
    change = admin_client.get(f"{ADMIN}/{created.pk}/change/")
    assert "tenant" not in change.context["adminform"].form.fields
    saved = admin_client.post(
        f"{ADMIN}/{created.pk}/change/", endpoint_form(url=URL, tenant="globex", description="kept")
    )
    assert saved.status_code == 302, saved.content.decode()[:2000]
    created.refresh_from_db()
    assert (created.tenant, created.description) == ("acme", "kept")

    # On add, it is taken.
    added = admin_client.post(f"{ADMIN}/add/", endpoint_form(url=URL + "/2", tenant="globex"))
    assert added.status_code == 200, added.content.decode()[:2000]
    assert Endpoint.objects.get(url=URL + "/2").tenant == "globex"
