"""A first operator view of the sending side; actions call services."""

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from . import services
from .models import ApiToken, Attempt, CircuitTransition, Delivery, Endpoint, Event


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
    list_display = [
        "url",
        "state",
        "event_types",
        "consecutive_failures",
        "last_success_at",
        "circuit_state",
    ]
    list_filter = ["state", "circuit_state"]
    inlines = [CircuitTransitionInline]
    search_fields = ["url", "description", "owner_email"]
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
    ]


class AttemptInline(admin.TabularInline[Attempt, Delivery]):
    model = Attempt
    extra = 0
    can_delete = False
    readonly_fields = [
        "number",
        "started_at",
        "duration_ms",
        "response_status",
        "response_body",
        "error",
        "request_headers",
    ]

    def has_add_permission(self, request: HttpRequest, obj: Delivery | None = None) -> bool:
        return False


@admin.register(Delivery)
class DeliveryAdmin(admin.ModelAdmin[Delivery]):
    list_display = ["id", "event", "endpoint", "status", "attempts", "next_attempt_at"]
    list_filter = ["status", "is_replay"]
    list_select_related = ["event", "endpoint"]
    search_fields = ["event__id", "event__type", "endpoint__url"]
    raw_id_fields = ["event", "endpoint"]
    readonly_fields = [f.name for f in Delivery._meta.fields]
    inlines = [AttemptInline]
    actions = ["retry_now"]

    @admin.action(description="Retry now", permissions=["change"])
    def retry_now(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        retried = 0
        for delivery in queryset:
            try:
                services.delivery_retry(delivery_id=delivery.pk)
                retried += 1
            except services.DeliveryNotRetryable:
                continue
        self.message_user(request, f"{retried} deliveries queued again.", messages.SUCCESS)


@admin.register(Event)
class EventAdmin(admin.ModelAdmin[Event]):
    list_display = ["id", "type", "version", "occurred_at", "fanned_out_at"]
    list_filter = ["type"]
    search_fields = ["id", "type", "idempotency_key"]
    readonly_fields = [f.name for f in Event._meta.fields]
    date_hierarchy = "created_at"


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin[ApiToken]):
    list_display = ["name", "token_prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["token_prefix", "created_at", "last_used_at"]
    fields = ["name", "token_prefix", "created_at", "last_used_at", "revoked_at"]

    def save_model(self, request: HttpRequest, obj: ApiToken, form: object, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        token, plain = ApiToken.issue(obj.name)
        obj.pk = token.pk
        self.message_user(
            request,
            f"Token created. Copy it now, it is not shown again: {plain}",
            messages.WARNING,
        )
