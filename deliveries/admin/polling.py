"""Polls of polling endpoints (and catch-up feeds): read-only, as attempts are. A poll that
handed out messages is the polling endpoint's counterpart of an attempt."""

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html

from deliveries.admin.filters import TenantFilter, TimeRangeFilter
from deliveries.models import PollRecord

#: Characters of an iterator the list shows (the whole of it in the cell's title).
ITERATOR_WIDTH = 24


class PollRecordTenantFilter(TenantFilter):
    field_path = "endpoint__tenant"


def _cut(iterator: str) -> Any:
    if not iterator:
        return "-"
    short = iterator if len(iterator) <= ITERATOR_WIDTH else iterator[: ITERATOR_WIDTH - 1] + "…"
    return format_html('<code title="{}">{}</code>', iterator, short)


@admin.register(PollRecord)
class PollRecordAdmin(admin.ModelAdmin[PollRecord]):
    list_display = ["at", "endpoint", "consumer_name", "count", "asked_with", "answered"]
    list_filter = [
        PollRecordTenantFilter,
        ("endpoint", admin.RelatedOnlyFieldListFilter),
        ("at", TimeRangeFilter),
    ]
    list_select_related = ["endpoint"]
    search_fields = ["consumer"]
    readonly_fields = ["endpoint", "consumer", "count", "iterator", "next_iterator", "at"]
    ordering = ["-at", "-id"]

    @admin.display(description="consumer", ordering="consumer")
    def consumer_name(self, record: PollRecord) -> str:
        return record.consumer or "(iterator read)"

    @admin.display(description="iterator asked with")
    def asked_with(self, record: PollRecord) -> Any:
        return _cut(record.iterator)

    @admin.display(description="iterator answered")
    def answered(self, record: PollRecord) -> Any:
        return _cut(record.next_iterator)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: PollRecord | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: PollRecord | None = None) -> bool:
        return False  # kept as long as attempts are, then purged
