"""What every sending-side fault scenario must end with, checked the same way each time."""

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from uuid import UUID

from django.db.models import Count
from django.utils import timezone

from deliveries.models import Delivery, DeliveryStatus
from tests.conftest import wait_until
from tests.receiver import ReceivedRequest

# A fault scenario emits a few hundred to a thousand events; the same fast retry policy
# for all of them, so retries happen within a test's patience.
FAST_POLICY = {
    "backoff_base_seconds": 0.05,
    "backoff_max_seconds": 0.5,
    "connect_timeout_seconds": 1.0,
    "read_timeout_seconds": 2.0,
    "max_attempts": 50,  # the most an endpoint may have (the services refuse more)
}


@dataclass(frozen=True)
class Arrivals:
    events: int
    requests: int
    repeats: int  # requests beyond the first of each event: retries and crash duplicates


def assert_each_arrived_with_its_id(
    expected_ids: Iterable[str | UUID], requests: Iterable[ReceivedRequest]
) -> Arrivals:
    """Every event reached the receiver at least once, and every request of an event
    carried that event's id in `X-Webhook-Id` (retries and duplicates included)."""
    expected = {str(i) for i in expected_ids}
    seen: Counter[str] = Counter()
    for request in requests:
        header_id = request.headers["X-Webhook-Id"]
        assert json.loads(request.body)["id"] == header_id, "body and header ids differ"
        seen[header_id] += 1
    missing = expected - set(seen)
    assert not missing, f"{len(missing)} of {len(expected)} events never arrived"
    phantoms = set(seen) - expected
    assert not phantoms, f"{len(phantoms)} events arrived that nobody emitted"
    total = sum(seen.values())
    return Arrivals(events=len(expected), requests=total, repeats=total - len(expected))


def wait_all_succeeded(expected: int, timeout: float, what: str) -> None:
    """Waits for every delivery to succeed; on a timeout, says where the others are."""
    succeeded = Delivery.objects.filter(status=DeliveryStatus.SUCCEEDED)
    try:
        wait_until(lambda: succeeded.count() == expected, timeout=timeout, what=what)
    except AssertionError as timed_out:
        stuck = Delivery.objects.exclude(status=DeliveryStatus.SUCCEEDED).values(
            "pk", "status", "attempts", "next_attempt_at", "dispatched_at", "lease_expires_at"
        )
        raise AssertionError(
            f"{timed_out}; deliveries by status {dict(delivery_statuses())}; "
            f"some not succeeded: {list(stuck[:5])}; now {timezone.now()}"
        ) from None


def delivery_statuses() -> Counter[str]:
    rows = Delivery.objects.values("status").annotate(n=Count("id"))
    return Counter({row["status"]: row["n"] for row in rows})


def assert_database_consistent(statuses: Counter[str], expected_deliveries: int) -> None:
    """Nothing stuck in `sending`, nothing pending, nothing given up: every delivery
    succeeded, one row per event and endpoint."""
    assert statuses == Counter({DeliveryStatus.SUCCEEDED: expected_deliveries}), statuses
