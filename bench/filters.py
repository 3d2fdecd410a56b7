"""Payload-filter cost at fan-out: `python -m bench.filters` (target: filtered <= 1.2x).

100 endpoints subscribed to one event type fan out the same events twice over: once
without payload filters, once with a three-condition filter on every endpoint (a range, a
membership and an existence test) that every event matches, so both create the same
deliveries and the difference is the filters' own cost. The two modes alternate event by
event (in pairs, in alternating order, so that drift in the machine's load hits both
alike) and each figure is a median of `event_fan_out` per event, taken twice: the
transaction alone (lock the event, read the endpoints, match, bulk-create 100
deliveries), and the whole call, dispatching the 100 task messages after commit included.
No worker runs: nothing is sent.

Same set-up as `python -m bench`: a fresh PostgreSQL database and its Redis database.
"""

import argparse
import os
import statistics
import time

import redis
from django.db import transaction

from bench.common import BROKER_URL, ENV, Results, recreate_database

FILTER = {
    "data.amount": {"$gte": 100},
    "data.currency": {"$in": ["EUR", "USD", "GBP"]},
    "data.customer.vip": {"$exists": True},
}


def _matching_cost_us(endpoints: int) -> float:
    """The filters' share alone: build the document and run every predicate, in-process."""
    from deliveries.models import Endpoint, Event
    from deliveries.pipeline import subscriptions

    event = Event.objects.filter(type="bench.load").first()
    assert event is not None
    subscribed = list(Endpoint.objects.only("id", *subscriptions.FIELDS))[:endpoints]
    for endpoint in subscribed:
        endpoint.filter = FILTER
    runs = 200
    started = time.perf_counter()
    for _ in range(runs):
        subscribers = subscriptions.Subscribers(event)
        assert all(subscribers.accepts(endpoint) for endpoint in subscribed)
    return (time.perf_counter() - started) / runs * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--endpoints", type=int, default=100, help="subscribed endpoints")
    parser.add_argument("--events", type=int, default=20, help="pairs of events per round")
    parser.add_argument("--rounds", type=int, default=2, help="rounds (events x rounds pairs)")
    args = parser.parse_args()
    if not 1 <= args.endpoints <= 1000 or not 1 <= args.events <= 10_000:
        parser.error("--endpoints must be 1..1000 and --events 1..10000")

    os.environ.update(ENV)
    recreate_database()
    import django

    django.setup()
    from django.core.management import call_command

    from deliveries import services
    from deliveries.models import Delivery, Endpoint

    call_command("migrate", verbosity=0)
    broker = redis.Redis.from_url(BROKER_URL)
    broker.flushdb()
    for _ in range(args.endpoints):
        # Never sent to (no worker runs); the address only has to pass the SSRF guard.
        services.endpoint_create(url="http://127.0.0.1:9/hook", event_types=["bench.load"])

    def set_filters(filtered: bool) -> None:
        Endpoint.objects.update(filter=FILTER if filtered else None)

    def fan_out_one(filtered: bool, *, with_publish: bool) -> float:
        set_filters(filtered)
        event = services.emit(
            "bench.load", {"n": 1, "amount": 150, "currency": "EUR", "customer": {"vip": False}}
        )
        if with_publish:
            started = time.perf_counter()
            services.event_fan_out(event_id=event.pk)
            elapsed = time.perf_counter() - started
        else:
            # The outer transaction holds the after-commit publishing back until the
            # timing has stopped: this is the part the filters can change.
            with transaction.atomic():
                started = time.perf_counter()
                services.event_fan_out(event_id=event.pk)
                elapsed = time.perf_counter() - started
        created = Delivery.objects.filter(event=event).count()
        if created != args.endpoints:
            raise SystemExit(f"expected {args.endpoints} deliveries, got {created}")
        return elapsed * 1000

    def measure(*, with_publish: bool) -> tuple[float, float]:
        plain: list[float] = []
        filtered: list[float] = []
        for n in range(args.events * args.rounds):
            # Pairs, in alternating order, so drift in the machine's load hits both alike.
            for mode in (n % 2 == 1, n % 2 == 0):
                (filtered if mode else plain).append(fan_out_one(mode, with_publish=with_publish))
            Delivery.objects.all().delete()
            broker.flushdb()
        return statistics.median(plain), statistics.median(filtered)

    measure(with_publish=False)  # warm-up: connections, caches, the compiled filter
    in_transaction = measure(with_publish=False)
    without, with_ = measure(with_publish=True)
    matching = _matching_cost_us(args.endpoints)

    results = Results()
    n = args.endpoints
    results.add(f"filters: fan-out to {n} endpoints, ms per event, no filters", f"{without:.2f}")
    results.add(f"filters: fan-out to {n} endpoints, ms per event, filtered", f"{with_:.2f}")
    results.add("filters: filtered / unfiltered", f"{with_ / without:.2f}x")
    plain_tx, filtered_tx = in_transaction
    results.add(
        "filters: in the transaction only (no publishing), ms: no filters / filtered",
        f"{plain_tx:.2f} / {filtered_tx:.2f} ({filtered_tx / plain_tx:.2f}x)",
    )
    results.add(f"filters: matching one event against {n} filters (us)", f"{matching:.0f}")
    print(results.table())


if __name__ == "__main__":
    main()
