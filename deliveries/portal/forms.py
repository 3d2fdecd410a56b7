"""The portal's forms: they translate input; the services decide what is allowed."""

from typing import Any

from django import forms
from django.utils import timezone

from deliveries import catalogue
from deliveries.endpoints import field_rules
from deliveries.endpoints.auth_forms import (
    OAUTH2_FIELDS,
    DeliveryAuthFields,
    initial_of,
    service_changes,
)
from deliveries.endpoints.field_rules import TLS_FIELDS
from deliveries.endpoints.lifecycle import DEFAULT_ROTATION_GRACE_SECONDS
from deliveries.endpoints.test_event import TEST_EVENT_TYPE
from deliveries.endpoints.url_field import EndpointURLFormField
from deliveries.models import DeliveryStatus, Endpoint, EndpointMode

DATETIME_INPUT = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")
EVERYTHING = "*"


def event_type_choices() -> list[tuple[str, str]]:
    # The test event is sent on request only, never subscribed to.
    names = [t.name for t in catalogue.all_types() if t.name != TEST_EVENT_TYPE]
    return [(EVERYTHING, "Every event type, including future ones"), *((n, n) for n in names)]


def endpoint_label(endpoint: Endpoint) -> str:
    return endpoint.description or endpoint.url or "Polling endpoint"


class EndpointForm(DeliveryAuthFields):
    mode = forms.ChoiceField(
        label="How it gets its events",
        choices=[
            (EndpointMode.PUSH, "Push: we send each event to your URL"),
            (
                EndpointMode.POLL,
                "Poll: your consumer reads the events with a key (no public URL needed)",
            ),
        ],
        initial=EndpointMode.PUSH,
        widget=forms.RadioSelect,
        # A form posted without it (an older page) adds a push endpoint, as before.
        required=False,
    )
    # Not required here: a push endpoint needs one, a polling one has none (the service
    # says which).
    url = EndpointURLFormField(
        label="URL",
        required=False,
        max_length=field_rules.URL_MAX_LENGTH,
        assume_scheme="https",
        help_text="Where we send the webhooks, e.g. https://example.com/webhooks.",
    )
    description = forms.CharField(
        label="Description", max_length=field_rules.DESCRIPTION_MAX_LENGTH, required=False
    )
    event_types = forms.MultipleChoiceField(
        label="Event types",
        widget=forms.CheckboxSelectMultiple,
        help_text="Pick at least one.",
    )

    #: What only a push endpoint has: hidden while "poll" is chosen, absent for one.
    PUSH_ONLY = ("url", *OAUTH2_FIELDS, *TLS_FIELDS)

    def __init__(self, *args: Any, endpoint: Endpoint | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if endpoint is not None:
            del self.fields["mode"]  # set on creation only
            if endpoint.mode == EndpointMode.POLL:
                for name in self.PUSH_ONLY:
                    del self.fields[name]
        choices = event_type_choices()
        field = self.fields["event_types"]
        assert isinstance(field, forms.MultipleChoiceField)
        # Filters saved before a type left the catalogue stay selectable for this endpoint.
        initial = self.initial.get("event_types") or []
        known = {value for value, _ in choices}
        field.choices = [*choices, *((p, p) for p in initial if p not in known)]

    @classmethod
    def of(cls, endpoint: Endpoint, data: Any = None) -> "EndpointForm":
        return cls(
            data,
            endpoint=endpoint,
            initial={
                "url": endpoint.url,
                "description": endpoint.description,
                "event_types": list(endpoint.event_types),
                **initial_of(endpoint),
            },
        )

    def service_fields(self, *, adding: bool) -> dict[str, Any]:
        """The cleaned values the services take (a polling endpoint's form has no URL)."""
        data = self.cleaned_data
        fields: dict[str, Any] = {
            "description": data["description"],
            "event_types": list(data["event_types"]),
        }
        if "url" in self.fields:
            fields["url"] = data["url"] or ""
        if adding:
            fields["mode"] = data.get("mode") or EndpointMode.PUSH
        fields.update(service_changes(self, adding=adding))
        return fields

    def add_service_errors(self, errors: dict[str, list[str]]) -> None:
        for field, messages in errors.items():
            # The service names `auth`; the form has its parts (auth_type, oauth2_…).
            target = "auth_type" if field == "auth" else field
            for message in messages:
                self.add_error(target if target in self.fields else None, message)


class RotateForm(forms.Form):
    grace_seconds = forms.TypedChoiceField(
        label="Keep the current secret signing for",
        coerce=int,
        initial=DEFAULT_ROTATION_GRACE_SECONDS,
        choices=[(0, "no time: stop at once"), (3600, "1 hour"), (24 * 3600, "24 hours")],
        widget=forms.RadioSelect,
    )


class DeliveryFilterForm(forms.Form):
    status = forms.ChoiceField(
        label="Status", required=False, choices=[("", "any"), *DeliveryStatus.choices]
    )
    endpoint = forms.ChoiceField(label="Endpoint", required=False)
    event_type = forms.CharField(label="Event type", max_length=200, required=False)
    since = forms.DateTimeField(label="Since", required=False, widget=DATETIME_INPUT)

    def __init__(self, *args: Any, endpoints: list[Endpoint], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["endpoint"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("", "any"), *((str(e.pk), endpoint_label(e)) for e in endpoints)]


class RecoverForm(forms.Form):
    since = forms.DateTimeField(label="Failed since", widget=DATETIME_INPUT)
    endpoint = forms.ChoiceField(label="Endpoint", required=False)

    def __init__(self, *args: Any, endpoints: list[Endpoint], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["since"].help_text = f"Time zone: {timezone.get_current_timezone_name()}."
        field = self.fields["endpoint"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("", "all"), *((str(e.pk), endpoint_label(e)) for e in endpoints)]
