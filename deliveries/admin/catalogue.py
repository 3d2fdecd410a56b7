"""A read-only admin page listing the event-type catalogue: `/admin/event-types/`.

Operators see what the product can emit, each version's schema and example, and which
endpoints pinned which version.
"""

import json
from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from deliveries import catalogue
from deliveries.models import Endpoint


def _catalogue_rows() -> list[dict[str, Any]]:
    pins: dict[tuple[str, int], int] = {}
    for version_pins in Endpoint.objects.values_list("version_pins", flat=True):
        for name, number in (version_pins or {}).items():
            pins[(name, number)] = pins.get((name, number), 0) + 1
    return [
        {
            "name": event_type.name,
            "description": event_type.description,
            "versions": [
                {
                    "number": version.number,
                    "is_newest": version is event_type.newest,
                    "schema": json.dumps(version.schema, indent=2),
                    "example": json.dumps(version.example, indent=2),
                    "pinned_by": pins.get((event_type.name, version.number), 0),
                }
                for version in reversed(event_type.versions)
            ],
        }
        for event_type in catalogue.all_types()
    ]


def _event_types_page(request: HttpRequest) -> HttpResponse:
    context = {
        **admin.site.each_context(request),
        "title": "Event types",
        "event_types": _catalogue_rows(),
    }
    return TemplateResponse(request, "admin/deliveries/event_types.html", context)


#: Staff only, with the admin's login redirect; a host mounts it at `admin/event-types/`.
event_types_page = admin.site.admin_view(_event_types_page)
