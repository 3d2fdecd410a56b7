"""The replay console: choose a range, preview what would be sent, confirm, follow progress."""

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from deliveries import selectors, services
from deliveries.admin.audit import audit
from deliveries.models import Replay
from deliveries.pipeline import event_types
from webhooks_core import tenants

DATETIME_INPUT = forms.DateTimeInput(attrs={"type": "datetime-local"}, format="%Y-%m-%dT%H:%M")


class ReplayForm(forms.Form):
    since = forms.DateTimeField(widget=DATETIME_INPUT, help_text="events recorded from…")
    until = forms.DateTimeField(widget=DATETIME_INPUT, help_text="…up to (excluded)")
    event_types = forms.CharField(
        required=False,
        help_text='Optional: types or prefixes separated by spaces or commas ("invoice.*").',
    )
    tenant = forms.CharField(
        required=False,
        max_length=100,
        strip=False,
        help_text="Optional: only this tenant's events and endpoints.",
    )
    endpoints = forms.ModelMultipleChoiceField(
        queryset=selectors.replayable_endpoints(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Optional: only these endpoints (each still gets only what it subscribes to).",
    )

    def clean_event_types(self) -> list[str]:
        patterns = [p for p in self.cleaned_data["event_types"].replace(",", " ").split() if p]
        for pattern in patterns:
            problem = event_types.validate_filter(pattern)
            if problem:
                raise forms.ValidationError(problem)
        return patterns

    def clean_tenant(self) -> str | None:
        tenant = self.cleaned_data["tenant"] or None
        problem = tenants.problem(tenant)
        if problem:
            raise forms.ValidationError(problem)
        return tenant

    def filters(self) -> services.ReplayFilters:
        data = self.cleaned_data
        return services.ReplayFilters(
            since=data["since"],
            until=data["until"],
            event_types=tuple(data["event_types"]),
            endpoint_ids=tuple(e.pk for e in data["endpoints"]),
            tenant=data["tenant"],
        )


@admin.register(Replay)
class ReplayAdmin(admin.ModelAdmin[Replay]):
    list_display = [
        "id",
        "requested_via",
        "since",
        "until",
        "event_types",
        "status",
        "progress",
        "created_at",
    ]
    list_filter = ["status"]
    readonly_fields = [
        "requested_by",
        "requested_via",
        "since",
        "until",
        "event_types",
        "endpoint_ids",
        "tenant",
        "status",
        "progress",
        "expected_deliveries",
        "events_done",
        "deliveries_created",
        "created_at",
        "completed_at",
        "its_deliveries",
    ]
    exclude = ["cursor_created_at", "cursor_event_id"]
    change_list_template = "admin/deliveries/replay/change_list.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # replays start from the console, after a preview

    def has_change_permission(self, request: HttpRequest, obj: Replay | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Replay | None = None) -> bool:
        return False  # the record is the audit trail

    @admin.display(description="progress")
    def progress(self, replay: Replay) -> str:
        return f"{replay.deliveries_created} / {replay.expected_deliveries} deliveries"

    @admin.display(description="deliveries")
    def its_deliveries(self, replay: Replay) -> SafeString:
        url = reverse("admin:deliveries_delivery_changelist")
        return format_html('<a href="{}?replay__id__exact={}">see them</a>', url, replay.pk)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        extra = {"can_replay": request.user.has_perm("deliveries.run_replay")}
        return super().changelist_view(request, {**(extra_context or {}), **extra})

    def get_urls(self) -> list[URLPattern]:
        console = path(
            "console/",
            self.admin_site.admin_view(self.console_view),
            name="deliveries_replay_console",
        )
        return [console, *super().get_urls()]

    def console_view(self, request: HttpRequest) -> HttpResponse:
        if not request.user.has_perm("deliveries.run_replay"):
            raise PermissionDenied
        form = ReplayForm(request.POST or None)
        preview = None
        if request.method == "POST" and form.is_valid():
            try:
                if "confirm" in request.POST:
                    return self._start(request, form)
                preview = services.replay_preview(filters=form.filters())
            except services.ReplayInvalid as exc:
                form.add_error(exc.field if exc.field in form.fields else None, exc.message)
        return TemplateResponse(
            request,
            "admin/deliveries/replay/console.html",
            {
                **self.admin_site.each_context(request),
                "title": "Replay events",
                "opts": self.opts,
                "form": form,
                "preview": preview,
            },
        )

    def _start(self, request: HttpRequest, form: ReplayForm) -> HttpResponse:
        replay, preview = services.replay_create(
            filters=form.filters(),
            requested_by=request.user,
            requested_via=f"admin: {request.user}",
        )
        audit(
            request,
            [replay],
            f"Started a replay of {preview.events} events ({preview.deliveries} deliveries)",
            added=True,
        )
        self.message_user(
            request,
            f"Replay #{replay.pk} started: {preview.deliveries} deliveries of "
            f"{preview.events} events are being created in batches.",
            messages.SUCCESS,
        )
        return HttpResponseRedirect(reverse("admin:deliveries_replay_change", args=[replay.pk]))
