"""Shared fixtures: a real Celery worker on Redis, a real HTTP receiver on 127.0.0.1.

The suite runs against PostgreSQL and Redis (``make test`` points DATABASE_URL and
CELERY_BROKER_URL at them). Tests that need the worker use ``transaction=True`` so that
what they write is committed and visible to the worker's threads.
"""

import gc
import ipaddress
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from pytest_django import DjangoDbBlocker
from pytest_django.fixtures import Settings as SettingsWrapper

import tests.event_catalogue  # noqa: F401  (declares the event types the tests emit)
from tests.services import require_services
from webhooks_core.runtime.tasking import QUEUES
from webhooks_project.celery import app as celery_app

ALL_QUEUES = list(QUEUES)

# Every test's fixtures and factories: one module, tests/fixtures.py.
pytest_plugins = ["tests.fixtures"]


_real_getaddrinfo = socket.getaddrinfo
_TEST_HOSTS = {"localhost": ["127.0.0.1", "::1"]}


def _test_getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
    """Name resolution for the suite: IP literals and `localhost`, nothing from real DNS.

    A test that needs a name to resolve states it through an injected resolver
    (`AddressPolicy(resolver=...)`); anything else fails as an unknown name would, the same
    on every machine, whatever its resolver or network.
    """
    name = host.decode() if isinstance(host, bytes) else host
    if name is None or name in ("", "0"):
        return _real_getaddrinfo(host, port, *args, **kwargs)
    try:
        ipaddress.ip_address(str(name).strip("[]").split("%")[0])
    except ValueError:
        addresses = _TEST_HOSTS.get(str(name).lower().rstrip("."))
        if addresses is None:
            raise socket.gaierror(socket.EAI_NONAME, f"{name}: not resolvable in tests") from None
        return [info for a in addresses for info in _real_getaddrinfo(a, port, *args, **kwargs)]
    return _real_getaddrinfo(host, port, *args, **kwargs)


# The edit loop's subset (`make test PYTEST_ARGS="-m fast"`): the tests of one process that
# start no Celery worker, child process, browser, live server or benchmark run and commit
# nothing for real (emptying every table after a test costs more than most tests take).
# Left out: the directories, modules and tests listed here, and any test that asks for one
# of these fixtures, is marked `transaction=True`, or is marked needs, worker or faults.
NOT_FAST = (
    "tests/bench/",
    "tests/examples/",
    "tests/faults/",
    "tests/packaging/",
    # Child processes: a server, a worker, the snippets' toolchains, a migration run.
    "tests/docs/test_getting_started.py",
    "tests/docs/test_wire_format_snippets.py",
    "tests/observability/test_metrics.py",
    "tests/webhooks_core/runtime/test_cooperative.py",
    "tests/webhooks_core/test_migrations.py",
    "tests/webhooks_project/test_serve_first_run.py",
    "tests/webhooks_project/test_startup_keys.py",
    "tests/webhooks_project/test_web_process_security.py",
    # Browsers.
    "tests/deliveries/portal/test_browser.py",
    "tests/deliveries/portal/test_validation_browser.py",
    "tests/observability/test_dashboard_browser.py",
    "tests/receivers/test_admin_browser.py",
    # One process, but slow: admin pages rendered whole (and the admin's browser tests),
    # query plans over thousands of rows, requests that wait out a deadline or a timeout.
    "tests/deliveries/admin/",
    "tests/receivers/test_admin.py",
    "tests/receivers/test_provider_sources.py::test_admin_",
    "tests/deliveries/pipeline/owner/test_claims.py",
    "tests/deliveries/destinations/http_client/test_egress_proxy.py",
    "tests/receivers/test_reconciliation.py",
    "tests/deliveries/destinations/http_client/test_exchange.py::test_urllib3s_own_path_through_the_guarded_",
    "tests/deliveries/destinations/http_client/test_exchange.py::test_an_answer_that_ends_with_its_connection_",
    "tests/deliveries/destinations/http_client/test_transport.py::test_a_header_that_could_break_the_request_",
    "tests/deliveries/destinations/http_client/test_transport.py::test_a_name_whose_dns_never_answers_",
    "tests/deliveries/destinations/http_client/test_transport.py::test_deadlines_armed_in_any_order_",
    "tests/deliveries/destinations/http_client/test_oauth2.py::test_token_server_answers_that_give_no_token",
    "tests/webhooks_project/test_health.py::test_readyz_names_the_broker_when_redis_is_unreachable",
)
NOT_FAST_FIXTURES = frozenset({"celery_worker", "live_server", "transactional_db"})
NOT_FAST_MARKS = ("needs", "worker", "faults")


def _fast(item: pytest.Item) -> bool:
    if item.nodeid.startswith(NOT_FAST):
        return False
    if NOT_FAST_FIXTURES.intersection(getattr(item, "fixturenames", ())):
        return False
    if any(item.get_closest_marker(name) for name in NOT_FAST_MARKS):
        return False
    db = item.get_closest_marker("django_db")
    return not (db and (db.kwargs.get("transaction") or db.args[:1] == (True,)))


@pytest.hookimpl(tryfirst=True)  # before `-m` selects on the marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _fast(item):
            item.add_marker(pytest.mark.fast)


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers("needs"):
        require_services(*marker.args)


def pytest_configure(config: pytest.Config) -> None:
    socket.getaddrinfo = _test_getaddrinfo
    if not settings.USES_POSTGRES or settings.EMBEDDED_MODE:
        raise pytest.UsageError(
            "The test suite runs on PostgreSQL and Redis: start it with `make test` "
            "(or set DATABASE_URL and CELERY_BROKER_URL)."
        )


@pytest.fixture(scope="session")
def redis_client() -> redis.Redis:
    return redis.Redis.from_url(settings.CELERY_BROKER_URL)


@pytest.fixture
def celery_worker(
    transactional_db: None, django_db_blocker: DjangoDbBlocker, redis_client: redis.Redis
) -> Iterator[object]:
    """A real worker (thread pool, in this process) consuming every queue from Redis.

    One per test, on an empty broker, so no message of one test reaches another.
    """
    redis_client.flushdb()
    with (
        django_db_blocker.unblock(),
        start_worker(
            celery_app,
            pool="threads",
            concurrency=4,
            queues=ALL_QUEUES,
            perform_ping_check=False,
            shutdown_timeout=30.0,
            loglevel="WARNING",
        ) as worker,
    ):
        yield worker
    redis_client.flushdb()
    # The pool's threads have ended, each leaving its persistent database connection
    # (`CONN_MAX_AGE`) to the cycle collector: collected now, else they pile up across
    # the suite until PostgreSQL refuses new clients.
    gc.collect()


@pytest.fixture
def inline_fan_out(settings: SettingsWrapper) -> None:
    """Events of tenants with up to 10 endpoints fanned out by the emitting process right
    after their commit (by default only those of tenants with up to 5:
    `WEBHOOKS_INLINE_FAN_OUT_MAX_ENDPOINTS`), for a test that runs no worker and needs an
    event's deliveries at once."""
    settings.WEBHOOKS_INLINE_FAN_OUT_MAX_ENDPOINTS = 10


@pytest.fixture
def fast_sweeps(settings: SettingsWrapper) -> None:
    """Short grace periods so the sweeper acts within a test's patience."""
    settings.WEBHOOKS_WAKE_GRACE_SECONDS = 1.0
    settings.WEBHOOKS_FANOUT_GRACE_SECONDS = 1.0
    settings.WEBHOOKS_LEASE_SECONDS = 2.0


def wait_until(predicate: Callable[[], object], timeout: float = 20.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(0.05)


@pytest.fixture(autouse=True)
def _forget_many_endpoints() -> None:
    """Each test starts with no tenant known, by this process, to be above the inline
    fan-out's limit (a hint kept for a second: `fanout.forget_many_endpoints`)."""
    from deliveries.pipeline import fanout

    fanout.forget_many_endpoints()
