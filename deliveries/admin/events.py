"""Events: search by id, type and time range; each with its deliveries' attempt timeline."""

import json

from django.contrib import admin
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils.safestring import SafeString

from deliveries import selectors
from deliveries.admin.filters import TenantFilter, TimeRangeFilter
from deliveries.models import Event
from deliveries.pipeline import payloads


@admin.register(Event)
class EventAdmin(admin.ModelAdmin[Event]):
    list_display = [
        "id",
        "type",
        "tenant",
        "version",
        "occurred_at",
        "created_at",
        "fanned_out_at",
    ]
    list_filter = ["type", TenantFilter, ("created_at", TimeRangeFilter)]
    search_fields = ["id", "type", "idempotency_key", "tenant"]
    date_hierarchy = "created_at"
    # The raw data column is NULL for offloaded payloads: show what payloads.load() reads.
    exclude = ["data"]
    readonly_fields = [
        *(f.name for f in Event._meta.fields if f.name != "data"),
        "payload",
        "delivery_timeline",
    ]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # events come from emit() and the API, never from a form

    def has_change_permission(self, request: HttpRequest, obj: Event | None = None) -> bool:
        return False  # immutable: the detail page is read-only

    @admin.display(description="data")
    def payload(self, event: Event) -> str:
        try:
            return json.dumps(payloads.load(event), indent=2, ensure_ascii=False)
        except payloads.PayloadUnavailable as exc:
            return f"unavailable: {exc}"

    @admin.display(description="deliveries and attempts")
    def delivery_timeline(self, event: Event) -> SafeString:
        deliveries = selectors.event_timeline(event=event)
        return SafeString(
            render_to_string("admin/deliveries/event/timeline.html", {"deliveries": deliveries})
        )
