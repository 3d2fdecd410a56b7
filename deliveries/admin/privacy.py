"""Privacy, for operators: tenant erasures and tenants' own settings (the audit log's
page is the core's: webhooks_core/admin.py).

An erasure is started here with the tenant's id (the add form); it runs in the background,
as from the API or ``erase_tenant``. Tenant settings are saved through the same service as
``PUT /api/v1/tenants/{tenant}/settings``, so the same bounds apply.
"""

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from deliveries import services
from deliveries.models import TenantErasure, TenantSettings
from deliveries.operator.erasure import Actor
from deliveries.operator.tenant_settings import retention_problem
from webhooks_core import tenants


class ErasureForm(forms.ModelForm):
    tenant = forms.CharField(
        max_length=tenants.MAX_LENGTH,
        help_text="Every endpoint, secret, event, payload, delivery, attempt, replay and "
        "portal link of this tenant is deleted, and the API tokens limited to it. This "
        "cannot be undone.",
    )

    class Meta:
        model = TenantErasure
        fields = ["tenant"]

    def clean_tenant(self) -> str:
        value = self.cleaned_data["tenant"]
        problem = tenants.problem(value)
        if problem:
            raise forms.ValidationError(f"The tenant {problem}.")
        return str(value)


@admin.register(TenantErasure)
class TenantErasureAdmin(admin.ModelAdmin[TenantErasure]):
    form = ErasureForm
    list_display = ["id", "status", "tenant", "requested_via", "created_at", "completed_at"]
    list_filter = ["status"]
    readonly_fields = ["status", "requested_via", "counts", "created_at", "completed_at"]

    def get_fields(self, request: HttpRequest, obj: TenantErasure | None = None) -> Any:
        if obj is None:
            return ["tenant"]
        return ["tenant", *self.readonly_fields]

    def get_readonly_fields(self, request: HttpRequest, obj: TenantErasure | None = None) -> Any:
        return ["tenant", *self.readonly_fields] if obj is not None else []

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # its page shows the progress, read-only

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: TenantErasure, form: Any, change: bool) -> None:
        started = services.tenant_erasure_start(
            tenant=form.cleaned_data["tenant"],
            actor=Actor(label=f"admin user #{request.user.pk}", user_id=request.user.pk),
        )
        obj.__dict__.update(started.__dict__)


class TenantSettingsForm(forms.ModelForm):
    class Meta:
        model = TenantSettings
        fields = ["tenant", "retention_days"]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        tenant = cleaned.get("tenant")
        if tenant is not None and tenants.problem(tenant):
            self.add_error("tenant", f"The tenant {tenants.problem(tenant)}.")
        days_problem = retention_problem(cleaned.get("retention_days"))
        if days_problem:
            self.add_error("retention_days", f"The retention {days_problem}.")
        return cleaned


@admin.register(TenantSettings)
class TenantSettingsAdmin(admin.ModelAdmin[TenantSettings]):
    form = TenantSettingsForm
    list_display = ["tenant", "retention_days", "updated_at"]
    search_fields = ["tenant"]

    def get_readonly_fields(self, request: HttpRequest, obj: TenantSettings | None = None) -> Any:
        return ["tenant"] if obj is not None else []

    def save_model(
        self, request: HttpRequest, obj: TenantSettings, form: Any, change: bool
    ) -> None:
        # The form checked what the service checks; the write (and its audit entry) is
        # the service's.
        services.tenant_settings_set(
            tenant=obj.tenant,
            retention_days=obj.retention_days,
            actor=f"admin user #{request.user.pk}",
        )
        saved = TenantSettings.objects.get(tenant=obj.tenant)
        obj.pk, obj.updated_at = saved.pk, saved.updated_at
