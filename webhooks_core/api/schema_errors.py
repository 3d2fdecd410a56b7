"""What the OpenAPI schema says beyond what drf-spectacular reads from the views.

drf-spectacular documents an operation's success status only. The error statuses follow
from the shape of the operation, so one postprocessing hook adds them to every operation,
including the ones added later, with the bodies ``errors.exception_handler`` produces:

- ``400`` everywhere (a parameter, a body, a header such as a bogus charset);
- ``401`` wherever a token is required;
- ``404`` wherever the path names an object;
- ``413`` and ``415`` wherever there is a body (the API reads JSON only);
- ``503`` everywhere (the database is down: every request looks its token up).

Statuses that depend on the operation's meaning (``409`` for a retry of a delivery in
flight, ``403``) are declared on the view with ``extend_schema(responses={409:
OpenApiResponse(description=...)})``; the hook gives them the error body.
"""

from typing import Any

ERROR = "Error"
VALIDATION_ERROR = "ValidationError"

_COMPONENTS: dict[str, dict[str, Any]] = {
    ERROR: {
        "type": "object",
        "description": "Why the request was not served.",
        "required": ["detail"],
        "properties": {"detail": {"type": "string"}},
    },
    VALIDATION_ERROR: {
        "type": "object",
        "description": "Each field that is wrong (`Idempotency-Key` for the header, "
        "`non_field_errors` or `detail` for the request as a whole) with its messages; "
        "a field of a nested object or of a list item nests the same way.",
        "minProperties": 1,
        "additionalProperties": {
            "anyOf": [
                {"type": "string"},
                {"type": "array", "items": {}},
                {"type": "object"},
            ]
        },
    },
}

_DESCRIPTIONS = {
    400: "The request is invalid; nothing was changed.",
    401: "No valid token: send `Authorization: Bearer <token>`.",
    403: "The token may not do this.",
    404: "No such object.",
    409: "The object is not in a state that allows this.",
    413: "The body is larger than the server accepts.",
    415: "The body is not JSON (`Content-Type: application/json`).",
    503: "The database is unavailable; nothing was changed. Retry after `Retry-After` seconds.",
}

_HEADERS: dict[int, dict[str, Any]] = {
    401: {
        "WWW-Authenticate": {"schema": {"type": "string"}, "description": "`Bearer`"},
    },
    503: {
        "Retry-After": {
            "schema": {"type": "integer", "minimum": 0},
            "description": "Seconds to wait before trying again.",
        },
    },
}

_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def _answerable(path: str, operation: dict[str, Any]) -> set[int]:
    # 400 everywhere: besides parameters and bodies, a Content-Type with a charset that is
    # no text encoding is refused on any request (webhooks_core.web.middleware).
    statuses = {400, 503}
    security = operation.get("security") or []
    if security and {} not in security:
        statuses.add(401)
    if "{" in path:
        statuses.add(404)
    if "requestBody" in operation:
        statuses |= {413, 415}
    return statuses


def _body(status: int) -> dict[str, Any]:
    component = VALIDATION_ERROR if status == 400 else ERROR
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{component}"}}}


def document_errors(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Postprocessing hook: every operation's error statuses, with their body and headers."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    for name, component in _COMPONENTS.items():
        schemas.setdefault(name, component)
    for path, item in result.get("paths", {}).items():
        for method in _METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            responses = operation.setdefault("responses", {})
            declared = {int(code) for code in responses if str(code).isdigit()}
            for status in sorted(declared | _answerable(path, operation)):
                if status < 400:
                    continue
                response = responses.setdefault(str(status), {})
                response.setdefault("description", _DESCRIPTIONS.get(status, "Error."))
                response.setdefault("content", _body(status))
                if status in _HEADERS:
                    response.setdefault("headers", _HEADERS[status])
            operation["responses"] = dict(sorted(responses.items()))
    return result
