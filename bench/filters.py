"""Payload-filter cost at fan-out: `python -m bench.filters` (issue 17: <= 1.2x).

100 endpoints subscribed to one event type fan out the same events twice over: once
without payload filters, once with a three-condition filter on every endpoint (a range, a
membership and an existence test, as in the issue's example) that every event matches, so
both runs create the same deliveries and the difference is the filters' own cost. The
runs alternate in rounds and the figure is the median time of `event_fan_out` per event
(one transaction: lock the event, read the endpoints, match, bulk-create 100 deliveries,
publish their task messages after commit). No worker runs: nothing is sent.

Same set-up as `python -m bench`: a fresh PostgreSQL database and its Redis database.
"""

import argparse
import os
import statistics
import time

import redis

from bench.common import BROKER_URL, ENV, Results, recreate_database

FILTER = {
    "data.amount": {"$gte": 100},
    "data.currency": {"$in": ["EUR", "USD", "GBP"]},
    "data.customer.vip": {"$exists": True},
}


def _matching_cost_us(endpoints: int) -> float:
    """The filters' share alone: build the document and run every predicate, in-process."""
    from deliveries import subscriptions
    from deliveries.models import Endpoint, Event

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
    parser.add_argument("--events", type=int, default=20, help="events per round and mode")
    parser.add_argument("--rounds", type=int, default=4, help="alternations of the two modes")
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

    def fan_out_round(filtered: bool) -> list[float]:
        Endpoint.objects.update(filter=FILTER if filtered else None)
        events = [
            services.emit(
                "bench.load",
                {"n": n, "amount": 100 + n, "currency": "EUR", "customer": {"vip": False}},
            )
            for n in range(args.events)
        ]
        timings = []
        for event in events:
            started = time.perf_counter()
            services.event_fan_out(event_id=event.pk)
            timings.append((time.perf_counter() - started) * 1000)
        created = Delivery.objects.filter(event__in=events).count()
        if created != args.events * args.endpoints:
            raise SystemExit(f"expected {args.events * args.endpoints} deliveries, got {created}")
        Delivery.objects.all().delete()
        broker.flushdb()
        return timings

    fan_out_round(False)  # warm-up: connections, caches, the compiled filter
    fan_out_round(True)
    plain: list[float] = []
    filtered: list[float] = []
    for _ in range(args.rounds):
        plain += fan_out_round(False)
        filtered += fan_out_round(True)
    without, with_ = statistics.median(plain), statistics.median(filtered)
    matching = _matching_cost_us(args.endpoints)

    results = Results()
    n = args.endpoints
    results.add(f"filters: fan-out to {n} endpoints, ms per event, no filters", f"{without:.2f}")
    results.add(f"filters: fan-out to {n} endpoints, ms per event, filtered", f"{with_:.2f}")
    results.add("filters: filtered / unfiltered", f"{with_ / without:.2f}x")
    results.add(f"filters: matching one event against {n} filters (us)", f"{matching:.0f}")
    print(results.table())


if __name__ == "__main__":
    main()
