"""The owner's hot statements as PostgreSQL runs them once prepared: with a generic plan,
made for any parameters. Through a backlog each reads only the rows it takes or looks
at, never every due row of the endpoint (a status passed as a parameter once kept the
plan off the index of pending rows: 19 ms a claim through 10,000 rows)."""

import itertools
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from deliveries.models import Delivery, DeliveryStatus, Endpoint, EndpointState, Event
from deliveries.pipeline import record
from deliveries.pipeline.owner import claims, lease_rows
from tests.fixtures import make_endpoint
from tests.receiver import Receiver

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="the statements written once run on PostgreSQL"
    ),
]

BACKLOG = 300
LIMIT = 4


def backlog(endpoint: Endpoint, count: int = BACKLOG) -> None:
    """`count` pending rows of the endpoint, all due, as one fan-out writes them."""
    now = timezone.now()
    events = Event.objects.bulk_create(
        Event(type="order.created", data={}, occurred_at=now) for _ in range(count)
    )
    Delivery.objects.bulk_create(
        Delivery(event=event, endpoint=endpoint, next_attempt_at=now) for event in events
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Delivery._meta.db_table}")


def generic_plan(sql: str, params: list[Any], *, seqscan: bool = False) -> dict[str, Any]:
    """The plan PostgreSQL runs `sql` (with `%s` placeholders) by once it is prepared and
    planned for any parameters, as run with `params` (EXPLAIN ANALYZE). Without reading
    whole tables: a test's table is small enough for that to be the cheaper plan, which it
    never is through a real backlog; what is asked is whether an index serves the query."""
    numbers = itertools.count(1)
    numbered = re.sub("%s", lambda _: f"${next(numbers)}", sql)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        if not seqscan:
            cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"PREPARE planned AS {numbered}")
        try:
            placeholders = ", ".join(["%s"] * len(params))
            cursor.execute(
                f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE planned({placeholders})", params
            )
            (plan,) = cursor.fetchone()
        finally:
            cursor.execute("DEALLOCATE planned")
    return plan[0]["Plan"]


def rows_read(plan: dict[str, Any]) -> Iterator[tuple[str, int]]:
    """Each scan of the deliveries table: its index, and the rows it read (those it
    returned and those it read and filtered out)."""
    if plan.get("Relation Name") == Delivery._meta.db_table and "Scan" in plan["Node Type"]:
        read = plan["Actual Rows"] * plan["Actual Loops"] + plan.get("Rows Removed by Filter", 0)
        yield plan.get("Index Name", plan["Node Type"]), read
    for child in plan.get("Plans", []):
        yield from rows_read(child)


def test_a_round_claim_reads_only_the_rows_it_takes(receiver: Receiver) -> None:
    endpoint, _ = make_endpoint(receiver)
    backlog(endpoint)
    version = claims.endpoint_version(endpoint_id=endpoint.pk)
    params = [endpoint.pk, endpoint.pk, EndpointState.ACTIVE, version]
    params += [LIMIT, DeliveryStatus.SENDING, uuid.uuid4(), lease_rows.lease_seconds()]

    plan = generic_plan(claims._round_claim_sql(False), params)

    scans = list(rows_read(plan))
    assert scans, plan
    assert all(read <= LIMIT for _, read in scans), scans
    assert Delivery.objects.filter(status=DeliveryStatus.SENDING).count() == LIMIT


def test_the_plain_claim_reads_only_the_rows_it_takes(receiver: Receiver) -> None:
    endpoint, _ = make_endpoint(receiver)
    backlog(endpoint)
    params = [endpoint.pk, LIMIT, DeliveryStatus.SENDING, uuid.uuid4(), lease_rows.lease_seconds()]

    plan = generic_plan(claims._unordered_claim_sql(False), params)

    scans = list(rows_read(plan))
    assert scans, plan
    assert all(read <= LIMIT for _, read in scans), scans


def test_the_look_for_the_next_due_row_reads_one_row(receiver: Receiver) -> None:
    endpoint, _ = make_endpoint(receiver)
    backlog(endpoint)

    plan = generic_plan(claims._NEXT_UNORDERED_DUE_SQL, [endpoint.pk, endpoint.pk])

    scans = list(rows_read(plan))
    assert scans, plan
    assert all(read <= 1 for _, read in scans), scans


def test_the_recording_of_successes_reads_only_its_rows(receiver: Receiver) -> None:
    """With sequential scans allowed, on a table of thousands of rows: PostgreSQL takes a
    JSON record set for 100 rows, and joined the whole deliveries table to it."""
    endpoint, _ = make_endpoint(receiver)
    backlog(endpoint, 3000)
    token = uuid.uuid4()
    mine = list(Delivery.objects.order_by("pk").values_list("pk", flat=True)[:2])
    Delivery.objects.filter(pk__in=mine).update(status=DeliveryStatus.SENDING, lease_token=token)
    now = timezone.now()
    rows = [{"id": pk, "token": token, "code": 200, "started": now} for pk in mine]
    params = [DeliveryStatus.SUCCEEDED, now, now, record._as_json(rows), mine]

    plan = generic_plan(record._SUCCESSES_SQL, params, seqscan=True)

    scans = list(rows_read(plan))
    assert scans, plan
    assert all(read <= len(mine) for _, read in scans), scans
