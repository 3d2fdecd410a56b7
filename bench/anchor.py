"""The benchmarks' writing view, `/bench/write`: the physical limit of an ingest door.

It authenticates as the API does (the same bearer token, looked up by the same class) and
durably inserts one row (one INSERT, committed on its own, on the same pooled connection),
then answers 202. Whatever the API's `POST /api/v1/events` or a receiver does beyond that
is the product's own cost; the benchmarks show each door beside it.

Only the benchmark's settings (`bench.settings`) route it, and its table exists only in a
benchmark's database (`create_table`): the product never serves it.
"""

from typing import Any

from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from webhooks_core.api.authentication import BearerTokenAuthentication

TABLE = "bench_anchor"


def create_table(cursor: Any) -> None:
    """The writing view's table: one row per request, its body kept as JSON (as an event's
    data is), in a benchmark's database only."""
    cursor.execute(
        f"CREATE TABLE IF NOT EXISTS {TABLE} (id bigserial PRIMARY KEY, token_id bigint NOT NULL,"
        " received_at timestamptz NOT NULL DEFAULT now(), body jsonb NOT NULL)"
    )


@csrf_exempt
def write(request: HttpRequest) -> HttpResponse:
    try:
        found = BearerTokenAuthentication().authenticate(Request(request))
    except AuthenticationFailed as exc:
        return JsonResponse({"detail": str(exc.detail)}, status=401)
    if found is None:
        return JsonResponse({"detail": "Authentication credentials were not provided."}, status=401)
    principal, _ = found
    with connection.cursor() as cursor:
        # Autocommit: the INSERT commits by itself, durable when it returns.
        cursor.execute(
            f"INSERT INTO {TABLE} (token_id, body) VALUES (%s, %s::jsonb) RETURNING id",  # noqa: S608
            [principal.token_id, request.body.decode("utf-8")],
        )
        (row_id,) = cursor.fetchone()
    return JsonResponse({"id": row_id}, status=202)
