"""API tokens: the plain value is shown once, at creation."""

from django.contrib import admin, messages
from django.http import HttpRequest

from ..models import ApiToken


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
