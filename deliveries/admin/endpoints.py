"""Endpoints: health at a glance, suspend/resume, secret rotation and reveal, test events,
and a polling endpoint's feed (poll URL, consumer groups, recent polls, its key)."""

from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers, widgets
from django.core.exceptions import PermissionDenied
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import ngettext
from django.views.decorators.debug import sensitive_post_parameters

from deliveries import selectors, services
from deliveries.admin.audit import audit
from deliveries.admin.filters import TenantFilter
from deliveries.admin.masking import searchable
from deliveries.endpoints import auth_forms, field_rules, headers, options, principals
from deliveries.endpoints.field_rules import CREATE_ONLY, EDITABLE
from deliveries.endpoints.lifecycle import DEFAULT_ROTATION_GRACE_SECONDS
from deliveries.endpoints.url_field import EndpointURLFormField
from deliveries.models import (
    CircuitTransition,
    Endpoint,
    EndpointMode,
    EndpointState,
    EnvelopeKind,
    SignatureScheme,
    StateSetBy,
    Validation,
)
from deliveries.polling import services as polling
from webhooks_core.egress.urlmask import masked_url as url_masked
from webhooks_core.web.secrets_page import ShownSecret, secrets_page

#: What the list and the forms show for a polling endpoint's (empty) URL.
POLLING = "(polling endpoint)"
#: The read-only fields of a feed: a polling endpoint's, or a push endpoint's catch-up one.
FEED_FIELDS = ["poll_feed", "poll_consumers", "recent_polls"]
#: What only a push endpoint has (sending, its target's health): not on a polling
#: endpoint's page, where its consumer reads and nothing is sent.
PUSH_ONLY = frozenset(
    {
        "url",
        "masked_url",
        "custom_headers",
        "secret_headers",
        "ordered_delivery",
        "validation",
        *(rule.name for rule in field_rules.NUMERIC),
        *auth_forms.OAUTH2_FIELDS,
        *field_rules.TLS_FIELDS,
        "masked_token_url",
        "consecutive_failures",
        "last_success_at",
        "last_failure_at",
        "failing_since",
        "circuit_state",
        "circuit_changed_at",
        "test_events",
        "validation_state",
        "validation_reason",
        "validation_checked_at",
        "validation_next_at",
        "validation_allowed_rate",
    }
)
#: Characters of an iterator a table shows (the whole of it in the cell's title).
ITERATOR_WIDTH = 24


def _has_feed(endpoint: Endpoint) -> bool:
    return endpoint.mode == EndpointMode.POLL or bool(endpoint.poll_key_hash)


def _short(iterator: str) -> str:
    return iterator if len(iterator) <= ITERATOR_WIDTH else iterator[: ITERATOR_WIDTH - 1] + "…"


def _position(delivery_id: int) -> SafeString | str:
    """A committed position as the delivery at it (a link to its page), or the start."""
    if not delivery_id:
        return "the start"
    url = reverse("admin:deliveries_delivery_change", args=[delivery_id])
    return format_html('<a href="{}">delivery #{}</a>', url, delivery_id)


class ResumeForm(forms.Form):
    backlog = forms.ChoiceField(
        choices=[
            ("deliver", "Deliver the held backlog"),
            ("cancel", "Cancel the held backlog"),
        ],
        widget=forms.RadioSelect,
        initial="deliver",
    )


class RotateForm(forms.Form):
    grace_seconds = forms.IntegerField(
        min_value=0,
        max_value=field_rules.MAX_ROTATION_GRACE_SECONDS,
        initial=DEFAULT_ROTATION_GRACE_SECONDS,
        help_text="How long the current secrets keep signing next to the new one.",
    )


def _bounded(rule: field_rules.Bound) -> forms.Field:
    """The model's form field for a numeric setting, with the bounds of `field_rules`
    and the service's words for a value beyond them."""
    model_field = Endpoint._meta.get_field(rule.name)
    assert isinstance(model_field, models.Field)
    # The admin's own widget for integers, as its ModelAdmin gives the fields it makes.
    extra: dict[str, Any] = {"widget": widgets.AdminIntegerFieldWidget} if rule.kind is int else {}
    field = model_field.formfield(
        min_value=rule.kind(rule.low),
        max_value=rule.kind(rule.high),
        error_messages={"min_value": rule.refusal, "max_value": rule.refusal},
        **extra,
    )
    assert field is not None
    return field


class EndpointForm(auth_forms.DeliveryAuthFields, forms.ModelForm[Endpoint]):
    """Translates the admin's fields for `endpoint_create` / `endpoint_update`, which own
    every rule; their refusals come back as this form's field errors."""

    # Set on creation only (then shown read-only); a form posted without it adds a push one.
    mode = forms.ChoiceField(
        choices=EndpointMode.choices,
        required=False,
        initial=EndpointMode.PUSH,
        help_text="Poll: no URL; its consumer reads the events with the key shown once "
        "after it is added.",
    )
    # Not required: a push endpoint needs one, a polling one has none (the service says).
    url = EndpointURLFormField(
        max_length=field_rules.URL_MAX_LENGTH,
        assume_scheme="https",
        required=False,
        help_text="Where the events are sent (push). Empty for a polling endpoint.",
    )
    secret_headers = forms.CharField(
        required=False,
        help_text="Comma-separated names of custom headers to store encrypted and mask on "
        "every read. Credential-like names (Authorization, X-Api-Key, …) always are. "
        f"A masked value ({headers.MASK}) left as it is keeps the stored value.",
    )

    # Not required: a form posted without them (a script, an old page) keeps the defaults.
    signature_scheme = forms.ChoiceField(
        choices=SignatureScheme.choices, required=False, initial=SignatureScheme.V1
    )
    envelope = forms.ChoiceField(
        choices=EnvelopeKind.choices, required=False, initial=EnvelopeKind.DEFAULT
    )
    validation = forms.ChoiceField(
        choices=Validation.choices,
        required=False,
        initial=Validation.NONE,
        help_text="CloudEvents: nothing is sent until the target consents to an OPTIONS "
        "handshake, asked again after every change of the URL.",
    )

    class Meta:
        model = Endpoint
        fields = list(field_rules.CONFIG_FIELDS)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for rule in field_rules.NUMERIC:
            if rule.name in self.fields:  # left out by the admin for a view-only user
                self.fields[rule.name] = _bounded(rule)
        if not self.instance._state.adding and "custom_headers" in self.fields:
            self.initial["custom_headers"] = self.instance.custom_headers_masked()
            self.initial["secret_headers"] = ", ".join(self.instance.secret_header_names)
        for name, value in auth_forms.initial_of(self.instance).items():
            self.initial.setdefault(name, value)

    def clean_signature_scheme(self) -> str:
        return self.cleaned_data.get("signature_scheme") or (
            self.instance.signature_scheme or SignatureScheme.V1
        )

    def clean_envelope(self) -> str:
        return self.cleaned_data.get("envelope") or (self.instance.envelope or EnvelopeKind.DEFAULT)

    def clean_validation(self) -> str:
        return self.cleaned_data.get("validation") or (self.instance.validation or Validation.NONE)

    def clean_mode(self) -> str:
        return self.cleaned_data.get("mode") or EndpointMode.PUSH

    def service_fields(self) -> dict[str, Any]:
        """The cleaned values the services take: all of them on add, the changed ones after."""
        adding = self.instance._state.adding
        names = [
            n
            for n in self.fields
            if (n in EDITABLE or n in CREATE_ONLY) and n not in field_rules.TLS_FIELDS
        ]
        if not adding:
            names = [n for n in names if n in self.changed_data and n not in CREATE_ONLY]
        fields = {n: self.cleaned_data[n] for n in names if n in self.cleaned_data}
        if "secret_headers" in fields:
            raw = fields["secret_headers"] or ""
            fields["secret_headers"] = [n.strip() for n in raw.split(",") if n.strip()]
        fields.update(auth_forms.service_changes(self, adding=adding))
        return fields

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        try:
            services.endpoint_check(
                endpoint=None if self.instance._state.adding else self.instance,
                **self.service_fields(),
            )
        except services.EndpointInvalid as exc:
            for field, problems in exc.errors.items():
                # The service names `auth`; the form has its parts (auth_type, oauth2_…).
                target = "auth_type" if field == "auth" else field
                self.add_error(target if target in self.fields else None, problems)
        return cleaned

    def _post_clean(self) -> None:
        # The services validate and write; the instance is not the source of truth here.
        pass


class CircuitTransitionInline(admin.TabularInline[CircuitTransition, Endpoint]):
    """The breaker's recent history (read-only)."""

    model = CircuitTransition
    extra = 0
    max_num = 0
    can_delete = False
    readonly_fields = ["at", "from_state", "to_state", "reason"]
    ordering = ["-at", "-id"]


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin[Endpoint]):
    form = EndpointForm
    # The model's `mode` is not editable (set on creation only): the form's declared field
    # takes it, and the admin's field list naming it must not reach the model's.
    exclude = ["mode"]
    list_display = [
        "target",
        "mode",
        "tenant",
        "state",
        "consent",
        "event_types",
        "consecutive_failures",
        "last_success_at",
        "last_failure_at",
        "success_rate_24h",
        "pending_deliveries",
        "dead_lettered_deliveries",
        "circuit_state",
    ]
    list_filter = ["state", "mode", "circuit_state", "validation_state", TenantFilter]
    inlines = [CircuitTransitionInline]
    search_fields = ["url", "description", "owner_email", "tenant"]
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    def delete_model(self, request: HttpRequest, obj: Endpoint) -> None:
        services.endpoint_delete(endpoint_id=obj.pk)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Endpoint]) -> None:
        for pk in queryset.values_list("pk", flat=True):
            services.endpoint_delete(endpoint_id=pk)

    readonly_fields = [
        "id",
        "state_changed_at",
        "consecutive_failures",
        "last_success_at",
        "last_failure_at",
        "failing_since",
        "circuit_state",
        "circuit_changed_at",
        "created_at",
        "updated_at",
        # State changes go through actions (services), which hold or release deliveries.
        "state",
        "state_reason",
        "signing_secrets",
        "public_key",
        "test_events",
        "validation_state",
        "validation_reason",
        "validation_checked_at",
        "validation_next_at",
        "validation_allowed_rate",
    ]
    actions = [
        "suspend_endpoints",
        "resume_endpoints",
        "rotate_secret",
        "rotate_signing_key",
        "send_test_event",
        "request_validation",
        "rotate_poll_key",
    ]

    # --- view-only staff: credentials in URLs masked (webhooks_core.egress.urlmask) --------------

    #: What a user who may not change the endpoint reads instead of a URL field.
    MASKED = {"url": "masked_url", "oauth2_token_url": "masked_token_url"}

    def get_list_display(self, request: HttpRequest) -> Any:
        shown = super().get_list_display(request)
        if self.has_change_permission(request):
            return shown
        masked = {**self.MASKED, "target": "masked_url"}
        return [masked.get(name, name) if isinstance(name, str) else name for name in shown]

    @admin.display(description="URL", ordering="url")
    def target(self, endpoint: Endpoint) -> str:
        # The list's link: a polling endpoint has no URL to show.
        return endpoint.url or POLLING

    def get_search_fields(self, request: HttpRequest) -> Any:
        return searchable(request, super().get_search_fields(request))

    def get_fields(self, request: HttpRequest, obj: Endpoint | None = None) -> Any:
        fields = list(super().get_fields(request, obj))
        # How it gets its events first: everything else reads in that light.
        fields.remove("mode")
        if obj is not None and obj.mode == EndpointMode.POLL:
            fields = [n for n in fields if n not in PUSH_ONLY]
        fields.insert(0, "mode")
        if obj is not None and _has_feed(obj):
            feed = [n for n in fields if n in FEED_FIELDS]
            rest = [n for n in fields if n not in FEED_FIELDS]
            fields = [*rest[:1], *feed, *rest[1:]]
        if obj is None or self.has_change_permission(request, obj):
            return fields
        # In the URL fields' places; the read-only fields' list would repeat them at the end.
        swapped = [self.MASKED.get(n, n) if isinstance(n, str) else n for n in fields]
        return list(dict.fromkeys(swapped))

    @admin.display(description="URL", ordering="url")
    def masked_url(self, endpoint: Endpoint) -> str:
        return url_masked(endpoint.url) if endpoint.url else POLLING

    @admin.display(description="OAuth2 token URL")
    def masked_token_url(self, endpoint: Endpoint) -> str:
        token_url = (endpoint.auth or {}).get("token_url")
        return url_masked(token_url) if token_url else "-"

    # --- add and change: through the services ------------------------------------------

    def get_inlines(self, request: HttpRequest, obj: Endpoint | None) -> Any:
        # A polling endpoint has no circuit: nothing is sent to it.
        if obj is not None and obj.mode == EndpointMode.POLL:
            return []
        return super().get_inlines(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj: Endpoint | None = None) -> Any:
        # The tenant is chosen once: the endpoint's deliveries belong to that tenant.
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None and not self.has_change_permission(request, obj):
            fields += self.MASKED.values()
        if obj is not None and _has_feed(obj):
            fields += FEED_FIELDS
        return [*fields, *sorted(CREATE_ONLY)] if obj is not None else fields

    @method_decorator(sensitive_post_parameters("custom_headers", *auth_forms.SECRET_FIELDS))
    def changeform_view(self, *args: Any, **kwargs: Any) -> HttpResponse:
        return super().changeform_view(*args, **kwargs)

    def save_model(
        self, request: HttpRequest, obj: Endpoint, form: forms.ModelForm[Endpoint], change: bool
    ) -> None:
        fields = form.service_fields()  # type: ignore[attr-defined]
        if change:
            saved = services.endpoint_update(endpoint=obj, **fields)
            for notice in saved.notices:
                self.message_user(request, notice, messages.WARNING)
        else:
            created = polling.endpoint_create_with_key(principal=principals.OPERATOR, **fields)
            saved = created.endpoint
            # For response_add, in this request only: shown once on its own page.
            request._new_endpoint_secrets = created  # type: ignore[attr-defined]
        obj.__dict__.update(saved.__dict__)

    def response_add(
        self, request: HttpRequest, obj: Endpoint, post_url_continue: str | None = None
    ) -> HttpResponse:
        created: polling.NewEndpoint | None = getattr(request, "_new_endpoint_secrets", None)
        if created is None:
            return super().response_add(request, obj, post_url_continue)
        rows = [self._secret_row(obj, created.secret)]
        if created.poll_key is not None:
            rows.append(self._poll_key_row(request, obj, created.poll_key))
            return self._secrets_page(
                request,
                title="Polling endpoint added: its signing secret and poll key",
                rows=rows,
                note="Copy them now; they are not shown again (the reveal permission can "
                "show the signing secret later; a lost poll key is replaced by rotating it).",
            )
        return self._secrets_page(
            request,
            title="Endpoint added: its signing secret",
            rows=rows,
            note="Copy it now; it is not shown again (the reveal permission can show it later).",
        )

    @admin.display(description="consent", ordering="validation_state")
    def consent(self, endpoint: Endpoint) -> str:
        """The CloudEvents handshake's state in a word ("-": the endpoint does not ask)."""
        return endpoint.validation_state or "-"

    @admin.display(description="secret headers")
    def secret_headers(self, endpoint: Endpoint) -> str:
        # For view-only users: which headers are secret, never their values.
        return ", ".join(f"{n}: {headers.MASK}" for n in endpoint.secret_header_names) or "-"

    # --- list: health figures in the same SELECT -----------------------------------------

    def get_queryset(self, request: HttpRequest) -> QuerySet[Endpoint]:
        return selectors.endpoints_with_stats(super().get_queryset(request), now=timezone.now())

    @admin.display(description="success 24h", ordering="successes_24h")
    def success_rate_24h(self, endpoint: Any) -> str:
        rate = selectors.success_rate(endpoint.attempts_24h, endpoint.successes_24h)
        if rate is None:
            return "-"
        return f"{rate:.0%} of {endpoint.attempts_24h}"

    @admin.display(description="pending", ordering="pending_count")
    def pending_deliveries(self, endpoint: Any) -> int:
        return int(endpoint.pending_count)

    @admin.display(description="dead-lettered", ordering="dead_lettered_count")
    def dead_lettered_deliveries(self, endpoint: Any) -> SafeString | int:
        count = int(endpoint.dead_lettered_count)
        if not count:
            return 0
        url = reverse("admin:deliveries_deadletter_changelist")
        return format_html('<a href="{}?endpoint__id__exact={}">{}</a>', url, endpoint.pk, count)

    # --- detail: secrets and test events -------------------------------------------------

    @admin.display(description="signing secrets")
    def signing_secrets(self, endpoint: Endpoint) -> SafeString:
        active = selectors.endpoint_signing_secrets(endpoint=endpoint, now=timezone.now()).count()
        url = reverse("admin:deliveries_endpoint_reveal_secret", args=[endpoint.pk])
        return format_html(
            '{} signing now. <a href="{}">Reveal…</a> (needs the "reveal" permission)',
            active,
            url,
        )

    @admin.display(description="public key (v1a)")
    def public_key(self, endpoint: Endpoint) -> str:
        # Public by nature: the consumer verifies v1a signatures with it.
        return services.endpoint_public_key(endpoint=endpoint) or "-"

    @admin.display(description="test events (webhook.test)")
    def test_events(self, endpoint: Endpoint) -> SafeString | str:
        rows = selectors.recent_test_deliveries(endpoint_id=endpoint.pk)
        if not rows:
            return "none sent yet"
        lines = []
        for delivery in rows:
            attempts = list(delivery.attempt_set.all())
            last = attempts[-1] if attempts else None
            outcome = (
                f"HTTP {last.response_status} in {last.duration_ms:.0f} ms"
                if last and last.response_status
                else (last.error if last else "waiting for a worker")
            )
            lines.append(
                format_html(
                    '<li class="test-event test-event-{}"><b>{}</b> {} — {} (delivery #{})</li>',
                    delivery.status,
                    delivery.get_status_display(),
                    delivery.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                    outcome,
                    delivery.pk,
                )
            )
        return format_html("<ul>{}</ul>", SafeString("".join(lines)))

    # --- detail: a polling endpoint's (or a catch-up) feed ---------------------------------

    @admin.display(description="poll URL")
    def poll_feed(self, endpoint: Endpoint) -> SafeString:
        path = polling.poll_path(endpoint.pk)
        issued = endpoint.poll_key_created_at
        rotate = reverse("admin:deliveries_endpoint_rotate_poll_key", args=[endpoint.pk])
        return format_html(
            '<code id="poll-url">{}</code><br>{} key {}. <a href="{}">Rotate the poll key…</a>',
            path,
            "Its consumer's" if endpoint.mode == EndpointMode.POLL else "Catch-up",
            f"issued {issued:%Y-%m-%d %H:%M:%S %Z}" if issued else "not issued",
            rotate,
        )

    @admin.display(description="consumer groups")
    def poll_consumers(self, endpoint: Endpoint) -> SafeString | str:
        consumers = polling.consumers_with_lag(endpoint_id=endpoint.pk)
        if not consumers:
            return "none yet"
        rows = [
            format_html(
                '<tr class="consumer"><td>{}</td><td>{}</td><td>{}</td>'
                '<td class="lag">{}</td><td>{}</td></tr>',
                consumer.name,
                _position(consumer.position.id),
                consumer.committed_at.strftime("%Y-%m-%d %H:%M:%S")
                if consumer.committed_at
                else "never",
                consumer.lag,
                consumer.leased,
            )
            for consumer in consumers
        ]
        return format_html(
            '<table id="poll-consumers"><thead><tr><th>group</th><th>committed up to</th>'
            "<th>committed at</th><th>lag (messages)</th><th>leased, not committed</th>"
            "</tr></thead><tbody>{}</tbody></table>",
            SafeString("".join(rows)),
        )

    @admin.display(description="recent polls")
    def recent_polls(self, endpoint: Endpoint) -> SafeString | str:
        polls = selectors.endpoint_recent_polls(endpoint_id=endpoint.pk)
        every = reverse("admin:deliveries_pollrecord_changelist")
        link = format_html('<a href="{}?endpoint__id__exact={}">All polls</a>', every, endpoint.pk)
        if not polls:
            return format_html("No poll has handed out messages yet. {}", link)
        rows = [
            format_html(
                '<tr class="poll"><td>{}</td><td>{}</td><td>{}</td><td><code title="{}">{}</code>'
                "</td></tr>",
                poll.at.strftime("%Y-%m-%d %H:%M:%S"),
                poll.consumer or "(iterator read)",
                poll.count,
                poll.next_iterator,
                _short(poll.next_iterator),
            )
            for poll in polls
        ]
        return format_html(
            '<table id="recent-polls"><thead><tr><th>at</th><th>consumer</th><th>messages</th>'
            "<th>iterator answered</th></tr></thead><tbody>{}</tbody></table>{}",
            SafeString("".join(rows)),
            link,
        )

    # --- permissions of the custom actions ----------------------------------------------

    def has_suspend_resume_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("deliveries.suspend_resume_endpoint")

    def has_rotate_secret_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("deliveries.rotate_endpoint_secret")

    def has_send_test_event_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("deliveries.send_test_event")

    # --- actions -------------------------------------------------------------------------

    @admin.action(description="Suspend (hold their deliveries)", permissions=["suspend_resume"])
    def suspend_endpoints(self, request: HttpRequest, queryset: QuerySet[Endpoint]) -> None:
        # Who did it goes to the audit log; the reason is shown to the tenant (portal, API).
        reason = "suspended by an operator"
        suspended = [
            e
            for e in queryset
            if services.endpoint_suspend(endpoint_id=e.pk, reason=reason, by=StateSetBy.OPERATOR)
        ]
        audit(request, suspended, "Suspended the endpoint")
        self.message_user(
            request,
            ngettext("%d endpoint suspended.", "%d endpoints suspended.", len(suspended))
            % len(suspended),
            messages.SUCCESS,
        )

    @admin.action(description="Resume…", permissions=["suspend_resume"])
    def resume_endpoints(
        self, request: HttpRequest, queryset: QuerySet[Endpoint]
    ) -> HttpResponse | None:
        form = ResumeForm(request.POST if "confirm" in request.POST else None)
        if not form.is_valid():
            held = {e.pk: selectors.held_deliveries_count(endpoint=e) for e in queryset}
            return self._intermediate(
                request,
                queryset,
                "admin/deliveries/endpoint/resume.html",
                "Resume endpoints",
                form=form,
                held=[(e, held[e.pk]) for e in queryset],
            )
        deliver = form.cleaned_data["backlog"] == "deliver"
        resumed = [e for e in queryset if e.state != EndpointState.ACTIVE]
        released = sum(
            services.endpoint_resume(endpoint_id=e.pk, deliver_backlog=deliver) for e in resumed
        )
        verb = "delivered" if deliver else "cancelled"
        audit(request, resumed, f"Resumed the endpoint; held backlog {verb}")
        self.message_user(
            request,
            f"{len(resumed)} endpoint(s) resumed; {released} held deliveries {verb}.",
            messages.SUCCESS,
        )
        return None

    @admin.action(description="Rotate secret…", permissions=["rotate_secret"])
    def rotate_secret(
        self, request: HttpRequest, queryset: QuerySet[Endpoint]
    ) -> HttpResponse | None:
        form = RotateForm(request.POST if "confirm" in request.POST else None)
        if not form.is_valid():
            return self._intermediate(
                request,
                queryset,
                "admin/deliveries/endpoint/rotate_secret.html",
                "Rotate signing secrets",
                form=form,
            )
        grace = form.cleaned_data["grace_seconds"]
        rotated, rows = [], []
        for endpoint in queryset:
            secret, _ = services.endpoint_rotate_secret(endpoint=endpoint, grace_seconds=grace)
            rotated.append(endpoint)
            rows.append(self._secret_row(endpoint, secret))
        audit(request, rotated, f"Rotated the signing secret (grace {grace} s)")
        return self._secrets_page(
            request,
            title="New signing secrets",
            rows=rows,
            note="Copy them now; they are not shown again.",
            grace_seconds=grace,
        )

    @admin.action(description="Rotate the v1a signing key pair", permissions=["rotate_secret"])
    def rotate_signing_key(self, request: HttpRequest, queryset: QuerySet[Endpoint]) -> None:
        rotated = []
        for endpoint in queryset:
            try:
                services.endpoint_rotate_signing_key(endpoint=endpoint)
            except options.NoSigningKeys as exc:
                self.message_user(request, f"{endpoint}: not rotated, {exc}.", messages.WARNING)
            else:
                rotated.append(endpoint)
        if rotated:
            audit(request, rotated, "Rotated the v1a signing key pair (grace 24 h)")
            self.message_user(
                request,
                f"{len(rotated)} key pair(s) rotated; the old keys sign for 24 h more. "
                "The new public keys are on each endpoint's page.",
                messages.SUCCESS,
            )

    @admin.action(description="Send a test event (webhook.test)", permissions=["send_test_event"])
    def send_test_event(
        self, request: HttpRequest, queryset: QuerySet[Endpoint]
    ) -> HttpResponse | None:
        sent = []
        for endpoint in queryset:
            try:
                services.endpoint_send_test_event(
                    endpoint_id=endpoint.pk, requested_by=str(request.user)
                )
                sent.append(endpoint)
            except services.EndpointNotActive as exc:
                self.message_user(request, f"{endpoint}: not sent, {exc}.", messages.WARNING)
        audit(request, sent, "Sent a webhook.test event")
        if sent:
            self.message_user(
                request,
                f"Test event sent to {len(sent)} endpoint(s); the result shows on each "
                "endpoint's page under “test events”.",
                messages.SUCCESS,
            )
        if len(sent) == 1:
            url = reverse("admin:deliveries_endpoint_change", args=[sent[0].pk])
            return HttpResponseRedirect(f"{url}#test-events")
        return None

    @admin.action(
        description="Ask the target's consent again (CloudEvents handshake)",
        permissions=["suspend_resume"],
    )
    def request_validation(self, request: HttpRequest, queryset: QuerySet[Endpoint]) -> None:
        asked = []
        for endpoint in queryset:
            try:
                services.endpoint_request_validation(endpoint_id=endpoint.pk)
            except (services.ValidationUnavailable, services.ValidationFolded) as exc:
                self.message_user(request, f"{endpoint}: not asked, {exc}.", messages.WARNING)
            else:
                asked.append(endpoint)
        audit(request, asked, "Asked for the target's consent again (CloudEvents handshake)")
        if asked:
            self.message_user(
                request,
                ngettext(
                    "Handshake sent to %(count)d endpoint; its state shows on the list.",
                    "Handshake sent to %(count)d endpoints; their state shows on the list.",
                    len(asked),
                )
                % {"count": len(asked)},
                messages.SUCCESS,
            )

    @admin.action(
        description="Rotate the poll key (or issue a catch-up key)…", permissions=["rotate_secret"]
    )
    def rotate_poll_key(
        self, request: HttpRequest, queryset: QuerySet[Endpoint]
    ) -> HttpResponse | None:
        if "confirm" not in request.POST:
            return self._intermediate(
                request,
                queryset,
                "admin/deliveries/endpoint/rotate_poll_key.html",
                "Rotate poll keys",
            )
        return self._poll_keys_rotated(request, list(queryset))

    def _poll_keys_rotated(self, request: HttpRequest, endpoints: list[Endpoint]) -> HttpResponse:
        rows = [
            self._poll_key_row(request, e, polling.poll_key_issue(endpoint_id=e.pk))
            for e in endpoints
        ]
        audit(request, endpoints, "Issued a new poll key (the previous one stopped working)")
        return self._secrets_page(
            request,
            title="New poll keys",
            rows=rows,
            note="Copy them now; they are not shown again. The previous keys stopped working.",
        )

    def _intermediate(
        self,
        request: HttpRequest,
        queryset: QuerySet[Endpoint],
        template: str,
        title: str,
        **extra: Any,
    ) -> TemplateResponse:
        return TemplateResponse(
            request,
            template,
            {
                **self.admin_site.each_context(request),
                "title": title,
                "opts": self.opts,
                "queryset": queryset,
                "action": request.POST.get("action", ""),
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
                **extra,
            },
        )

    # --- reveal secret: its own page, its own permission ---------------------------------

    def get_urls(self) -> list[URLPattern]:
        custom = [
            path(
                "<uuid:object_id>/reveal-secret/",
                self.admin_site.admin_view(self.reveal_secret_view),
                name="deliveries_endpoint_reveal_secret",
            ),
            path(
                "<uuid:object_id>/rotate-poll-key/",
                self.admin_site.admin_view(self.rotate_poll_key_view),
                name="deliveries_endpoint_rotate_poll_key",
            ),
        ]
        return custom + super().get_urls()

    @method_decorator(sensitive_post_parameters())
    def rotate_poll_key_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The action for one endpoint, from its page: confirm, then the key shown once."""
        if not self.has_rotate_secret_permission(request):
            raise PermissionDenied
        endpoint = get_object_or_404(Endpoint, pk=object_id)
        if request.method == "POST":
            return self._poll_keys_rotated(request, [endpoint])
        return TemplateResponse(
            request,
            "admin/deliveries/endpoint/rotate_poll_key_one.html",
            {
                **self.admin_site.each_context(request),
                "title": "Rotate the poll key",
                "opts": self.opts,
                "endpoint": endpoint,
            },
        )

    @method_decorator(sensitive_post_parameters())
    def reveal_secret_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if not request.user.has_perm("deliveries.reveal_endpoint_secret"):
            raise PermissionDenied
        endpoint = get_object_or_404(Endpoint, pk=object_id)
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "title": "Reveal signing secrets",
            "opts": self.opts,
            "endpoint": endpoint,
        }
        if request.method == "POST":
            secrets = list(
                selectors.endpoint_signing_secrets(endpoint=endpoint, now=timezone.now())
            )
            audit(request, [endpoint], "Revealed the signing secrets")
            return self._secrets_page(
                request,
                title="Reveal signing secrets",
                rows=[self._secret_row(endpoint, s.value, s.expires_at) for s in secrets],
                note="Shown because you asked; this was written to the admin log.",
            )
        return TemplateResponse(request, "admin/deliveries/endpoint/reveal_secret.html", context)

    def _secret_row(
        self, endpoint: Endpoint, secret: str, expires_at: datetime | None = None
    ) -> ShownSecret:
        url = reverse("admin:deliveries_endpoint_change", args=[endpoint.pk])
        label = endpoint.url or str(endpoint)
        return ShownSecret(label=label, secret=secret, url=url, expires_at=expires_at)

    def _poll_key_row(self, request: HttpRequest, endpoint: Endpoint, key: str) -> ShownSecret:
        url = reverse("admin:deliveries_endpoint_change", args=[endpoint.pk])
        feed = request.build_absolute_uri(polling.poll_path(endpoint.pk))
        return ShownSecret(label=f"poll key: {feed}", secret=key, url=url)

    def _secrets_page(self, request: HttpRequest, **kwargs: Any) -> TemplateResponse:
        return secrets_page(
            request,
            self.admin_site,
            self.opts,
            back_url=reverse("admin:deliveries_endpoint_changelist"),
            back_label="Back to endpoints",
            subject_label="endpoint",
            **kwargs,
        )
