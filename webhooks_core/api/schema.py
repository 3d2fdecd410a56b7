"""``extend_schema`` for our views whatever the host's ``DEFAULT_SCHEMA_CLASS`` is.

drf-spectacular builds the schema class of a decorated method on top of
``REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"]`` at import time; in a host that never set it
(DRF's own ``AutoSchema``) our ``/api/v1/schema`` would fail. While one of our decorators
runs, the default is drf-spectacular's, and then the host's again.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from drf_spectacular import utils
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, extend_schema_view
from rest_framework.settings import api_settings

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["OpenApiParameter", "extend_schema", "extend_schema_view"]


@contextmanager
def _spectacular_default() -> Iterator[None]:
    missing = object()
    saved = api_settings.__dict__.get("DEFAULT_SCHEMA_CLASS", missing)
    setattr(api_settings, "DEFAULT_SCHEMA_CLASS", AutoSchema)  # noqa: B010  (typed as str)
    try:
        yield
    finally:
        if saved is missing:
            del api_settings.DEFAULT_SCHEMA_CLASS
        else:
            setattr(api_settings, "DEFAULT_SCHEMA_CLASS", saved)  # noqa: B010


def extend_schema(**kwargs: Any) -> Callable[[F], F]:
    decorate = utils.extend_schema(**kwargs)

    def apply(f: F) -> F:
        with _spectacular_default():
            return decorate(f)

    return apply


def closed_request_bodies(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Postprocessing hook: every object a request body holds, nested ones included, says
    ``additionalProperties: false``, as the server refuses unknown fields
    (``webhooks_core.api.strict``). Maps of free keys (custom headers, version pins) keep
    their own ``additionalProperties`` schema."""
    components = result.get("components", {}).get("schemas", {})
    seen: set[str] = set()

    def close(schema: Any) -> None:
        if not isinstance(schema, dict):
            return
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            name = ref.rsplit("/", 1)[1]
            if name not in seen and name in components:
                seen.add(name)
                close(components[name])
            return
        if "properties" in schema and "additionalProperties" not in schema:
            schema["additionalProperties"] = False
        for sub in schema.get("properties", {}).values():
            close(sub)
        close(schema.get("items"))
        for key in ("allOf", "anyOf", "oneOf"):
            for sub in schema.get(key, []):
                close(sub)

    for item in result.get("paths", {}).values():
        for operation in item.values():
            if not isinstance(operation, dict):
                continue
            for media in operation.get("requestBody", {}).get("content", {}).values():
                close(media.get("schema"))
    return result
