"""The admin of the core's models: API tokens (the plain value is shown once, at
creation, on its own page) and the audit log (read only)."""

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from webhooks_core import tenants
from webhooks_core.models import ApiToken, AuditEntry
from webhooks_core.web.secrets_page import ShownSecret, secrets_page


class ApiTokenForm(forms.ModelForm):
    class Meta:
        model = ApiToken
        fields = ["name", "tenant", "revoked_at"]

    def clean_tenant(self) -> str | None:
        value = self.cleaned_data.get("tenant") or None
        problem = tenants.problem(value)
        if problem:
            raise forms.ValidationError(f"The tenant {problem}.")
        return value


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin[ApiToken]):
    form = ApiTokenForm
    list_display = ["name", "tenant", "token_prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "tenant"]
    readonly_fields = ["token_prefix", "created_at", "last_used_at"]
    fields = ["name", "tenant", "token_prefix", "created_at", "last_used_at", "revoked_at"]

    def get_readonly_fields(self, request: HttpRequest, obj: ApiToken | None = None) -> Any:
        # A token's reach is fixed when it is made: widening it later would hand a
        # tenant's integration every tenant's data.
        readonly = list(super().get_readonly_fields(request, obj))
        return [*readonly, "tenant"] if obj is not None else readonly

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        token, plain = ApiToken.issue(obj.name, tenant=obj.tenant or None)
        obj.__dict__.update(token.__dict__)
        # For response_add in this request only: never a message (a cookie) or a log line.
        request._new_api_token = plain  # type: ignore[attr-defined]

    def response_add(
        self, request: HttpRequest, obj: ApiToken, post_url_continue: str | None = None
    ) -> HttpResponse:
        plain = getattr(request, "_new_api_token", None)
        if plain is None:
            return super().response_add(request, obj, post_url_continue)
        return secrets_page(
            request,
            self.admin_site,
            self.opts,
            title="API token created",
            rows=[
                ShownSecret(
                    label=obj.name,
                    secret=plain,
                    url=reverse("admin:webhooks_core_apitoken_change", args=[obj.pk]),
                )
            ],
            note="Copy it now; it is not shown again.",
            back_url=reverse("admin:webhooks_core_apitoken_changelist"),
            back_label="Back to API tokens",
            subject_label="token",
        )


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin[AuditEntry]):
    list_display = ["at", "action", "actor", "tenant", "target"]
    list_filter = ["action"]
    search_fields = ["actor", "tenant", "target"]
    fields = ["at", "action", "actor", "api_token", "user", "tenant", "target", "counts"]
    readonly_fields = ["at", "action", "actor", "api_token", "user", "tenant", "target", "counts"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
