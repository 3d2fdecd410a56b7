"""Portal sessions, for operators: who was given a link, when it was used, and "end it".

Links are issued by `POST /api/v1/portal-sessions` (never here: the token is shown once,
to the product that asked). Only the token's hash is stored, and it is not shown.
"""

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.translation import ngettext

from deliveries import services
from deliveries.admin.audit import audit
from deliveries.models import PortalLink


@admin.register(PortalLink)
class PortalLinkAdmin(admin.ModelAdmin[PortalLink]):
    list_display = [
        "id",
        "tenant",
        "requested_via",
        "created_at",
        "used_at",
        "expires_at",
        "ended_at",
    ]
    list_filter = ["tenant"]
    search_fields = ["tenant", "requested_via"]
    fields = ["tenant", "requested_via", "created_at", "used_at", "expires_at", "ended_at"]
    readonly_fields = ["tenant", "requested_via", "created_at", "used_at", "expires_at", "ended_at"]
    actions = ["end_sessions"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="End the session (the link stops working)", permissions=["delete"])
    def end_sessions(self, request: HttpRequest, queryset: QuerySet[PortalLink]) -> None:
        links = list(queryset)
        for link in links:
            services.portal_session_end(session_id=link.pk)
        audit(request, links, "Portal session ended")
        self.message_user(
            request,
            ngettext("%d portal session ended.", "%d portal sessions ended.", len(links))
            % len(links),
            messages.SUCCESS,
        )
