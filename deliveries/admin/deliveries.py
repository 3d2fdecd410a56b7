"""Deliveries and the dead-letter queue; "retry now" and "cancel" call services."""

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.translation import ngettext

from deliveries import services
from deliveries.admin.audit import audit
from deliveries.admin.filters import (
    DeadLetterStatusFilter,
    DeliveryTenantFilter,
    EventTypeFilter,
    TimeRangeFilter,
)
from deliveries.admin.masking import searchable, shows_urls
from deliveries.models import Attempt, DeadLetter, Delivery
from webhooks_core.egress.urlmask import masked_url

# Characters of an endpoint's URL a list shows.
ENDPOINT_WIDTH = 40


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


def _cut(url: str) -> str:
    short = url if len(url) <= ENDPOINT_WIDTH else url[: ENDPOINT_WIDTH - 1] + "…"
    return format_html('<span title="{}">{}</span>', url, short)


class DeliveryActionsAdmin(admin.ModelAdmin[Any]):
    """Bulk "retry now" and "cancel", shared by the deliveries list and the DLQ, and the
    columns both show.

    What an operator acts on comes first and stays narrow, so status, endpoint, attempts
    and the next try fit a 1,280-pixel screen: the event as its type (its id is on the
    delivery's page), the endpoint's URL cut short (the whole of it in the cell's title).
    """

    @admin.display(description="event type", ordering="event__type")
    def event_type(self, delivery: Delivery) -> str:
        return delivery.event.type

    @admin.display(description="endpoint", ordering="endpoint__url")
    def endpoint_url(self, delivery: Delivery) -> str:
        return _cut(delivery.endpoint.url)

    # Not ordered by URL: the order of the rows would tell what a masked value is.
    @admin.display(description="endpoint")
    def masked_endpoint_url(self, delivery: Delivery) -> str:
        return _cut(masked_url(delivery.endpoint.url))

    def get_list_display(self, request: HttpRequest) -> Any:
        shown = super().get_list_display(request)
        if shows_urls(request):
            return shown
        return ["masked_endpoint_url" if name == "endpoint_url" else name for name in shown]

    def get_search_fields(self, request: HttpRequest) -> Any:
        return searchable(request, super().get_search_fields(request))

    @admin.action(description="Retry now", permissions=["change"])
    def retry_now(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        retried, skipped = [], 0
        for delivery in queryset:
            try:
                services.delivery_retry(delivery_id=delivery.pk)
                retried.append(delivery)
            except services.DeliveryNotRetryable:
                skipped += 1
        audit(request, retried, "Retried now (fresh retry cycle)")
        self.message_user(
            request,
            ngettext("%d delivery queued again.", "%d deliveries queued again.", len(retried))
            % len(retried)
            + (
                f" {skipped} skipped (already delivered: use a replay; in flight, held, or "
                "endpoint not active)."
                if skipped
                else ""
            ),
            messages.SUCCESS,
        )

    @admin.action(description="Cancel", permissions=["change"])
    def cancel(self, request: HttpRequest, queryset: QuerySet[Delivery]) -> None:
        cancelled = [d for d in queryset if services.delivery_cancel(delivery_id=d.pk)]
        audit(request, cancelled, "Cancelled")
        skipped = queryset.count() - len(cancelled)
        self.message_user(
            request,
            ngettext("%d delivery cancelled.", "%d deliveries cancelled.", len(cancelled))
            % len(cancelled)
            + (f" {skipped} skipped (in flight or finished)." if skipped else ""),
            messages.SUCCESS,
        )


@admin.register(Delivery)
class DeliveryAdmin(DeliveryActionsAdmin):
    list_display = [
        "id",
        "status",
        "endpoint_url",
        "attempts",
        "next_attempt_at",
        "event_type",
        "is_replay",
    ]
    list_filter = [
        "status",
        "is_replay",
        DeliveryTenantFilter,
        EventTypeFilter,
        ("created_at", TimeRangeFilter),
    ]
    list_select_related = ["event", "endpoint"]
    search_fields = ["event__type", "endpoint__url", "endpoint__tenant"]
    raw_id_fields = ["event", "endpoint"]
    readonly_fields = [f.name for f in Delivery._meta.fields]
    inlines = [AttemptInline]
    actions = ["retry_now", "cancel"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(DeadLetter)
class DeadLetterAdmin(DeliveryActionsAdmin):
    """The dead-letter queue: dead-lettered deliveries unless the status filter says else."""

    list_display = [
        "id",
        "status",
        "endpoint_url",
        "attempts",
        "last_status_code",
        "short_error",
        "event_type",
        "completed_at",
    ]
    list_filter = [
        DeadLetterStatusFilter,
        DeliveryTenantFilter,
        ("endpoint", admin.RelatedOnlyFieldListFilter),
        EventTypeFilter,
        ("created_at", TimeRangeFilter),
    ]
    list_select_related = ["event", "endpoint"]
    search_fields = ["event__type", "endpoint__url", "endpoint__tenant", "last_error"]
    readonly_fields = [f.name for f in Delivery._meta.fields]
    inlines = [AttemptInline]
    actions = ["retry_now", "cancel"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: DeadLetter | None = None) -> bool:
        return False  # cancel, do not erase the record

    @admin.display(description="last error")
    def short_error(self, delivery: DeadLetter) -> str:
        return delivery.last_error[:60]
