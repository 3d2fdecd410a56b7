"""``GET /metrics`` for Prometheus (``metrics_view``, mounted by the host): counters from
every process, gauges from the database.

* Counters and histograms are incremented wherever the work happens (Celery workers,
  gunicorn processes). With ``PROMETHEUS_MULTIPROC_DIR`` set, prometheus-client writes them
  to files in that directory and this view adds up the files of every process; without it
  (one process, e.g. the embedded default) it reads this process's registry.
* Gauges that describe the state of the system (oldest pending delivery, dead-letter size,
  suspended endpoints, oldest unprocessed inbox row, queue lengths) are computed at scrape
  time from PostgreSQL and Redis, so every web process answers the same and nothing is
  kept in memory that a restart would lose.

``GET /metrics?tenant=acme`` answers the delivery and endpoint gauges of that tenant only
(nothing else: counters, queues and the inbox are not per tenant). Tenants are a filter,
not a label: a product may have thousands of customers, and a label would make every
gauge that many time series whether anyone looks at them or not; a scrape job (or an
ad-hoc request) per tenant of interest costs only what is asked for.

Access: a bearer token (``METRICS_TOKEN``) or a client address in ``METRICS_ALLOWED_IPS``.
"""

import hmac
import ipaddress
import logging
import os
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Any

import redis
from celery import current_app
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from webhooks_core import conf, tenants
from webhooks_core.runtime.tasking import QUEUES

logger = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# kombu's Redis transport keeps a queue's messages of priority p>0 in "<queue>\x06\x16<p>".
REDIS_PRIORITY_SEPARATOR = "\x06\x16"
REDIS_PRIORITY_STEPS = (0, 3, 6, 9)


#: Collectors that compute their values from shared state (PostgreSQL) when scraped. Not in
#: prometheus-client's default REGISTRY: in multiprocess mode a scrape reads the counters
#: from files instead of that registry, and such a collector would vanish. /metrics serves
#: this registry beside the counters in both modes.
SCRAPE_TIME_REGISTRY = CollectorRegistry(auto_describe=False)

#: Gauge collectors the apps register in ``ready()``: ``factory(tenant)`` answers the
#: collector for that tenant (``None``: all), or ``None`` when it has no per-tenant gauges.
GaugeFactory = Callable[[str | None], Collector | None]
_gauges: dict[str, GaugeFactory] = {}


def register_gauges(name: str, factory: GaugeFactory) -> None:
    """Serve an app's database gauges at ``/metrics`` (called from its ``ready()``)."""
    _gauges[name] = factory


#: Label filters the apps register: ``keep(values)`` answers which of a label's values the
#: counters may still show (an erased tenant's endpoint ids may not: a counter lives on in
#: every process's memory and in the multiprocess files, which no erasure can edit).
LabelFilter = Callable[[set[str]], set[str]]
_label_filters: dict[str, LabelFilter] = {}


def register_label_filter(label: str, keep: LabelFilter) -> None:
    """Show a counter's series only while ``keep`` keeps its value of ``label``."""
    _label_filters[label] = keep


class _Filtered(Collector):
    """The families of a registry without the series the label filters drop."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        families = list(self.registry.collect())
        seen: dict[str, set[str]] = {label: set() for label in _label_filters}
        for family in families:
            for sample in family.samples:
                for label, values in seen.items():
                    if label in sample.labels:
                        values.add(sample.labels[label])
        kept = {label: _label_filters[label](values) for label, values in seen.items() if values}
        for family in families:
            family.samples = [
                sample
                for sample in family.samples
                if all(
                    label not in sample.labels or sample.labels[label] in values
                    for label, values in kept.items()
                )
            ]
            yield family


def _computed(tenant: str | None) -> Iterator[Collector]:
    for factory in _gauges.values():
        collector = factory(tenant)
        if collector is not None:
            yield collector


class QueueCollector(Collector):
    """Length of each Celery queue in Redis: a growing queue means too few workers."""

    def collect(self) -> Iterator[Metric]:
        broker_url = str(current_app.conf.broker_url or "")
        if not broker_url.startswith(("redis://", "rediss://")):
            return
        family = GaugeMetricFamily(
            "webhooks_queue_length", "Messages waiting in a Celery queue", labels=["queue"]
        )
        try:
            client = _redis_client(broker_url)
            with client.pipeline(transaction=False) as pipe:
                for queue in celery_queues():
                    for key in _queue_keys(queue):
                        pipe.llen(key)
                lengths = iter(pipe.execute())
            for queue in celery_queues():
                family.add_metric([queue], sum(next(lengths) for _ in REDIS_PRIORITY_STEPS))
        except Exception:
            # A scrape must not fail because the broker is down; /readyz reports that.
            logger.warning("queue lengths unavailable: broker not reachable")
            return
        yield family


def celery_queues() -> list[str]:
    return list(QUEUES)


def _queue_keys(queue: str) -> list[str]:
    return [
        queue if p == 0 else f"{queue}{REDIS_PRIORITY_SEPARATOR}{p}" for p in REDIS_PRIORITY_STEPS
    ]


@lru_cache(maxsize=4)
def _redis_client(url: str) -> Any:
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


def exposition(tenant: str | None = None) -> bytes:
    """The whole scrape: process counters (one or all processes) and the computed gauges;
    with a tenant, that tenant's gauges only."""
    computed = CollectorRegistry(auto_describe=False)
    for collector in _computed(tenant):
        computed.register(collector)
    if tenant is not None:
        return generate_latest(computed)
    computed.register(QueueCollector())
    multiproc_dir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if multiproc_dir:
        counters = CollectorRegistry()
        MultiProcessCollector(counters, path=multiproc_dir)
    else:
        counters = REGISTRY
    if _label_filters:
        filtered = CollectorRegistry(auto_describe=False)
        filtered.register(_Filtered(counters))
        counters = filtered
    # The apps' own scrape-time collectors (e.g. circuit breaker gauges), in both modes.
    scraped = generate_latest(SCRAPE_TIME_REGISTRY)
    return generate_latest(counters) + generate_latest(computed) + scraped


# --- access ---------------------------------------------------------------------------


def _token_ok(request: HttpRequest, token: str) -> bool:
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return bool(
        token
        and scheme.lower() == "bearer"
        and hmac.compare_digest(given.strip().encode(), token.encode())
    )


def _address_ok(request: HttpRequest, networks: list[str]) -> bool:
    # REMOTE_ADDR only: X-Forwarded-For is written by the client and proves nothing.
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in network for network in _networks(tuple(networks)))


@lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    parsed = []
    for entry in entries:
        try:
            parsed.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            logger.error("METRICS_ALLOWED_IPS entry ignored: not an address or network")
    return parsed


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    token: str = conf.value("METRICS_TOKEN")
    networks: list[str] = list(conf.value("METRICS_ALLOWED_IPS"))
    if not token and not networks:
        return JsonResponse(
            {"detail": "metrics are disabled: set METRICS_TOKEN or METRICS_ALLOWED_IPS"},
            status=403,
        )
    if not (_token_ok(request, token) or _address_ok(request, networks)):
        response = JsonResponse({"detail": "unauthorized"}, status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    tenant = request.GET.get("tenant")
    if tenant is not None and tenants.problem(tenant):
        return JsonResponse({"tenant": [tenants.problem(tenant)]}, status=400)
    return HttpResponse(exposition(tenant), content_type=CONTENT_TYPE)
