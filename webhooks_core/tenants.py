"""Tenant ids: who an endpoint or an event belongs to (one customer of the product).

Pure module. A tenant id is the product's own key for a customer, 1 to 100 characters of
``[A-Za-z0-9_.:-]`` (so it is safe in URLs, log lines and metric filters). ``None`` means
"no tenant": such events go to endpoints without a tenant, exactly as before tenants.
"""

import re
from typing import Any

MAX_LENGTH = 100
TENANT = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")


def problem(value: Any) -> str | None:
    """Why ``value`` is not a tenant id, or None when it is one (``None`` itself is fine)."""
    if value is None:
        return None
    if not isinstance(value, str) or not TENANT.fullmatch(value):
        return f"must be 1 to {MAX_LENGTH} letters, digits and . _ : - (e.g. acme)"
    return None
