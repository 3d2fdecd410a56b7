"""Query-string filters, validated as strictly as a JSON body."""

from typing import Any

from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request


def validated_filters(
    serializer_class: type[serializers.Serializer[Any]], request: Request
) -> dict[str, Any]:
    """The filters a list was asked for, or a 400.

    A serializer given the QueryDict itself reads it like an HTML form, where an empty
    value means "not given": ``?status=`` would list everything. Here an empty value is a
    value (and wrong where the schema says ``minLength: 1``), and a filter given twice is
    refused rather than one of the two silently winning.
    """
    params = request.query_params
    names: list[str] = [str(name) for name in serializer_class().fields if name in params]
    repeated = {name: ["must be given once"] for name in names if len(params.getlist(name)) > 1}
    if repeated:
        raise ValidationError(repeated)
    filters = serializer_class(data={name: params[name] for name in names})
    filters.is_valid(raise_exception=True)
    return dict(filters.validated_data)
