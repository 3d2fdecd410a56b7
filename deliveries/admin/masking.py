"""Who reads the credentials an endpoint URL may carry, in the admin: who may change
endpoints. Everyone else reads them masked (`webhooks_core.egress.urlmask`), and may not search
by URL either: a search is an oracle (does ``token=a…`` match?) that would spell a
masked value out one character at a time."""

from collections.abc import Sequence

from django.http import HttpRequest

CHANGE_ENDPOINT = "deliveries.change_endpoint"


def shows_urls(request: HttpRequest) -> bool:
    return request.user.has_perm(CHANGE_ENDPOINT)


def searchable(request: HttpRequest, fields: Sequence[str]) -> list[str]:
    """``fields`` without the URL fields for a user who reads URLs masked."""
    if shows_urls(request):
        return list(fields)
    return [name for name in fields if name != "url" and not name.endswith("__url")]
