"""Custom request headers of an endpoint: which may be set, and which are credentials.

Pure logic, no Django. Whoever manages an endpoint may add headers to every request (an API key
their endpoint expects, say), but never one that frames or routes the request: a custom
`Host` would aim it at another virtual host, `Transfer-Encoding` beside our
`Content-Length` makes its length ambiguous to proxies (request smuggling), and CR/LF in
a name or value would start a new header. Values must be Latin-1, the only text HTTP/1.1
headers can carry (`http.client` raises on anything else, at send time).
"""

import functools
import re
from collections.abc import Mapping

NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")
MAX_VALUE_LENGTH = 1000
# What RFC 9110's field-value grammar leaves out (CTLs but HTAB, DEL), and the C1
# controls: NEL (0x85) is a line break to Python's str.splitlines and to some parsers.
FORBIDDEN_IN_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")
MAX_HEADERS = 50

# Hop-by-hop and framing headers (RFC 9110 §7.6.1, RFC 9112 §6), and the ones the sender
# itself sets; none of them can be overridden per endpoint.
RESERVED = frozenset(
    {
        "host",
        "content-length",
        "content-type",
        "content-encoding",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "proxy-authenticate",
        "proxy-connection",
        "expect",
        "http2-settings",
        "traceparent",
        "tracestate",
    }
)
RESERVED_PREFIXES = ("x-webhook-", "webhook-")

#: Shown instead of a secret header's value on every read (the API, the admin, stored
#: attempts); sending it back keeps the value.
MASK = "<redacted>"
# A header whose name contains one of these is a credential: stored encrypted, masked on
# read, redacted in stored attempts (`wire.redact_headers`). The one list of those words.
CREDENTIAL_WORDS = ("authorization", "signature", "secret", "token", "key", "cookie", "password")


# Asked for every header of every attempt (`wire.redact_headers`), of a few names.
@functools.lru_cache(maxsize=1024)
def is_credential(name: str) -> bool:
    lowered = name.lower()
    return any(word in lowered for word in CREDENTIAL_WORDS)


def problems(headers: Mapping[str, object]) -> list[str]:
    """Every reason these custom headers cannot be sent; empty when they can."""
    found: list[str] = []
    if len(headers) > MAX_HEADERS:
        found.append(f"At most {MAX_HEADERS} custom headers.")
    seen: set[str] = set()
    for name, value in headers.items():
        if not isinstance(name, str) or not NAME.match(name):
            found.append(f"{name!r} is not a valid header name.")
            continue
        lowered = name.lower()
        if lowered in seen:
            found.append(f"{name!r} is given twice (header names ignore case).")
        seen.add(lowered)
        if lowered in RESERVED or lowered.startswith(RESERVED_PREFIXES):
            found.append(f"{name!r} is set by the sender itself (framing, routing or signing).")
            continue
        if not isinstance(value, str):
            found.append(f"The value of {name!r} must be a string.")
            continue
        if len(value) > MAX_VALUE_LENGTH:
            found.append(f"The value of {name!r} is longer than {MAX_VALUE_LENGTH} characters.")
        if FORBIDDEN_IN_VALUE.search(value):
            found.append(
                f"The value of {name!r} has a control character (a line break, NUL, NEL or "
                "another), which an HTTP header value cannot carry."
            )
        elif value != value.strip(" \t"):
            found.append(f"The value of {name!r} starts or ends with white space.")
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            found.append(
                f"The value of {name!r} has characters outside Latin-1 (ISO-8859-1), "
                "which HTTP headers cannot carry; percent- or base64-encode it."
            )
    return found
