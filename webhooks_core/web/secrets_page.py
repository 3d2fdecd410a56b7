"""The page that shows secrets once (created, rotated or revealed), for every admin view.

Django's `messages` are stored in a signed, not encrypted, cookie, and a read-only field is
shown to anyone who may view the object: a secret goes into neither, only into this one
response (the approach of `django.contrib.auth`'s password views).
"""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.admin import AdminSite
from django.http import HttpRequest
from django.template.response import TemplateResponse

TEMPLATE = "admin/secrets_shown.html"


@dataclass(frozen=True)
class ShownSecret:
    label: str
    secret: str
    url: str = ""
    expires_at: datetime | None = None


def secrets_page(
    request: HttpRequest,
    admin_site: AdminSite,
    opts: Any,
    *,
    title: str,
    rows: list[ShownSecret],
    note: str,
    back_url: str,
    **extra: Any,
) -> TemplateResponse:
    response = TemplateResponse(
        request,
        TEMPLATE,
        {
            **admin_site.each_context(request),
            "title": title,
            "opts": opts,
            "rows": rows,
            "note": note,
            "back_url": back_url,
            "grace_seconds": None,
            **extra,
        },
    )
    # Not kept by a browser's or proxy's cache either.
    response["Cache-Control"] = "no-store"
    return response
