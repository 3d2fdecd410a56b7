"""Endpoint URLs as shown to those who may not change the endpoint: the one masking
function of credentials in URLs.

A URL may carry a credential: ``https://user:token@host/``, ``?token=...``, a broker's
password (``redis://:password@host``). Whoever may change the endpoint sees it whole;
everyone else sees the userinfo and every query value masked (the names stay, so an
operator still recognises the URL): view-only staff in the admin and the dashboard, and
every error text we store (`masked_text`: an attempt's error, a delivery's
``last_error``), which the API, the portal and the admin show. Pure, no Django.
"""

import re
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


#: A URL in a text: a scheme, "://", and what follows up to white space or a quote.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s\"'<>]+")
#: A path with a query and no scheme, as urllib3 quotes one ("with url: /hook?token=...").
_PATH_QUERY_IN_TEXT = re.compile(r"(?<![\w:/])(/[^\s\"'<>?]*)\?([^\s\"'<>)]+)")


def masked_text(text: str) -> str:
    """``text`` with every URL in it masked as `masked_url` masks one (a bare path's query
    values too)."""
    if "?" not in text and "@" not in text and "#" not in text:
        return text
    text = _URL_IN_TEXT.sub(lambda m: masked_url(m.group(0)), text)
    return _PATH_QUERY_IN_TEXT.sub(lambda m: masked_url(m.group(0)), text)
