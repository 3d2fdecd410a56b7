"""List filters shared by the console's pages."""

from collections.abc import Iterator
from typing import Any, cast

from django.contrib import admin
from django.db.models import Field, Model, QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from deliveries import selectors
from deliveries.models import DeliveryStatus


def _aware(value: Any) -> Any:
    """A naive date-time string in the current time zone; anything else as it was given."""
    try:
        parsed = parse_datetime(value) if isinstance(value, str) else None
    except ValueError:
        return value  # the field's own validation reports it (no 500)
    if parsed is not None and timezone.is_naive(parsed):
        return timezone.make_aware(parsed)
    return value


class TimeRangeFilter(admin.FieldListFilter):
    """`<field>__gte` / `<field>__lt` typed in as a range (ISO dates or date-times)."""

    template = "admin/deliveries/time_range_filter.html"

    def __init__(
        self,
        field: Field[Any, Any],
        request: HttpRequest,
        params: dict[str, list[str]],
        model: type[Model],
        model_admin: admin.ModelAdmin[Any],
        field_path: str,
    ) -> None:
        self.lookup_since = f"{field_path}__gte"
        self.lookup_until = f"{field_path}__lt"
        self.since = (params.get(self.lookup_since) or [""])[-1]
        self.until = (params.get(self.lookup_until) or [""])[-1]
        super().__init__(field, request, params, model, model_admin, field_path)
        self.title = f"{self.title} (range)"
        # The browser sends local wall-clock times; read them in the current time zone.
        for name, values in self.used_parameters.items():
            self.used_parameters[name] = [_aware(value) for value in cast(list[Any], values)]

    def expected_parameters(self) -> list[str | None]:
        return [self.lookup_since, self.lookup_until]

    def choices(self, changelist: Any) -> Iterator[dict[str, Any]]:  # type: ignore[override]
        keep = {
            key: value
            for key, value in changelist.get_filters_params().items()
            if key not in self.expected_parameters()
        }
        yield {
            "lookup_since": self.lookup_since,
            "lookup_until": self.lookup_until,
            "since": self.since,
            "until": self.until,
            "keep": [(k, v) for k, values in keep.items() for v in values],
            "clear_url": changelist.get_query_string(remove=self.expected_parameters()),
        }


class DeadLetterStatusFilter(admin.SimpleListFilter):
    """Dead-lettered by default: the queue an operator triages; "any" shows everything."""

    title = "status"
    parameter_name = "status"
    DEFAULT = DeliveryStatus.DEAD_LETTERED.value
    ANY = "any"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [*DeliveryStatus.choices, (self.ANY, "Any status")]

    def choices(self, changelist: Any) -> Iterator[dict[str, Any]]:  # type: ignore[override]
        current = self.value() or self.DEFAULT
        for value, label in self.lookup_choices:
            yield {
                "selected": current == str(value),
                "query_string": changelist.get_query_string({self.parameter_name: value}),
                "display": label,
            }

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        wanted = self.value() or self.DEFAULT
        if wanted == self.ANY:
            return queryset
        return queryset.filter(status=wanted)


class EventTypeFilter(admin.SimpleListFilter):
    title = "event type"
    parameter_name = "event_type"
    MAX_CHOICES = 200

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(t, t) for t in selectors.event_types_seen(limit=self.MAX_CHOICES)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value():
            return queryset.filter(event__type=self.value())
        return queryset


class TenantFilter(admin.SimpleListFilter):
    """By tenant: the known tenants are listed (capped); any id works in the URL too."""

    title = "tenant"
    parameter_name = "tenant"
    NONE = "-"
    MAX_CHOICES = 200
    #: The lookup that reaches the tenant from the listed model.
    field_path = "tenant"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        known = selectors.known_tenants(limit=self.MAX_CHOICES)
        return [(self.NONE, "No tenant"), *((t, t) for t in known if t is not None)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        wanted = self.value()
        if not wanted:
            return queryset
        if wanted == self.NONE:
            return queryset.filter(**{f"{self.field_path}__isnull": True})
        return queryset.filter(**{self.field_path: wanted})


class DeliveryTenantFilter(TenantFilter):
    # A delivery's event and endpoint always share a tenant (fan-out matches them).
    field_path = selectors.TENANT_FIELD
