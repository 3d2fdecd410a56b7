"""Endpoint URLs as shown to those who may not change the endpoint.

A URL may carry a credential: ``https://user:token@host/`` or ``?token=...``. Whoever may
change the endpoint sees it whole; everyone else sees the userinfo and every query value
masked (the names stay, so an operator still recognises the URL). Pure, no Django.
"""

from urllib.parse import parse_qsl, urlsplit, urlunsplit

MASK = "***"


def masked_url(url: str) -> str:
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
        query = "&".join(
            f"{name}={MASK}" for name, _ in parse_qsl(parts.query, keep_blank_values=True)
        )
        if parts.query and not query:
            query = MASK
        fragment = MASK if parts.fragment else ""
        return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))
    except ValueError:
        return MASK
