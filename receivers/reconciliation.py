"""Reconciliation: ask the provider for the truth about objects stuck in a pending state.

A webhook may be lost for good (the provider gave up, or never retries, like GitHub).
A reconciler per scheme looks at local objects of one source that have waited too long and
applies what the provider's API says through the same transition service the handlers use.
A scheme that knows its provider's API says so itself (it overrides ``Scheme.reconcile``);
a host reconciles its own domain for any scheme with ``@reconciler("<scheme>")``, which
wins over the scheme's own. Beat runs ``reconcile_all`` every
``RECEIVERS_RECONCILE_INTERVAL_SECONDS``; it sends one ``reconcile_source`` task per enabled
source that has an API base URL and a reconciler for its scheme.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin

import requests
from celery import current_app as celery_app
from urllib3.util import parse_url

from receivers import schemes
from receivers.models import Source
from webhooks_core import conf as core_conf
from webhooks_core.egress import deadlines, ssrf
from webhooks_core.egress.ssrf_transport import GuardedHTTPAdapter, address_policy
from webhooks_core.runtime.tasking import QUEUE_MAINTENANCE

# Dispatched by its registered name: the task module imports this one.
RECONCILE_SOURCE_TASK = "receivers.tasks.reconcile_source"

MAX_PAGES = 20
TIMEOUT = (3.0, 10.0)


@dataclass
class ReconcileResult:
    checked: int = 0
    changed: int = 0
    unknown: int = 0


Reconciler = Callable[[Source], ReconcileResult]
_reconcilers: dict[str, Reconciler] = {}


def reconciler(scheme: str) -> Callable[[Reconciler], Reconciler]:
    def decorate(fn: Reconciler) -> Reconciler:
        _reconcilers[scheme] = fn
        return fn

    return decorate


class ProviderURLRefused(ssrf.UnsafeURL):
    """A reconciliation request was not sent: the URL is unsafe or on another origin."""


def _origin(url: str) -> tuple[str, str, int]:
    parsed = parse_url(url)
    scheme = (parsed.scheme or "").lower()
    return scheme, (parsed.host or "").lower(), parsed.port or (443 if scheme == "https" else 80)


def provider_pages(
    *, base_url: str, token: str, first_url: str, max_pages: int = MAX_PAGES
) -> Iterator[Any]:
    """GET a provider's paginated API with the source's bearer token, page by page.

    The token is a credential for the provider only, so the requests go through the same
    SSRF guard as webhooks (checked at connect time, on the address connected to), and a
    page's ``next`` link is followed only on the origin (scheme, host, port) of
    ``base_url``: an answer cannot send the token, or us, anywhere else. Each page's
    request ends within its connect plus read timeout in total (`requests.Timeout`).
    """
    origin = _origin(base_url)
    policy = core_conf.address_policy()
    session = requests.Session()
    session.trust_env = False
    adapter = GuardedHTTPAdapter(max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    url = first_url
    with session, address_policy(policy):
        for _ in range(max_pages):
            problem = ssrf.scheme_refusal(url, policy) or ssrf.ambiguity_refusal(url)
            if problem:
                raise ProviderURLRefused(problem)
            if _origin(url) != origin:
                raise ProviderURLRefused("a next link points to another origin; not followed")
            # No token (none given, or dropped by a change of origin): no header.
            response = _get(session, url, {"Authorization": f"Bearer {token}"} if token else {})
            response.raise_for_status()
            page = response.json()
            yield page
            link = page.get("next") if isinstance(page, dict) else None
            if not link:
                return
            url = urljoin(url, str(link))


def _get(session: requests.Session, url: str, headers: dict[str, str]) -> requests.Response:
    """One GET within a total deadline, connect plus read timeout, as a delivery's: the
    socket timeouts bound each read, so a provider trickling its answer a byte at a time
    would hold the task for as long as it liked. Past the deadline: `requests.Timeout`."""
    total = sum(TIMEOUT)
    late = requests.Timeout(f"the provider's answer took longer than {total:g} s")
    deadline = deadlines.arm(deadlines.after(total))
    try:
        response = session.get(url, headers=headers, timeout=TIMEOUT, allow_redirects=False)
    except requests.RequestException as exc:
        if deadline.fired:
            raise late from exc
        raise
    finally:
        cut = deadlines.finish(deadline)
    # An answer read to the end of its connection ends, to `requests`, where it was cut.
    if cut:
        raise late
    return response


def reconciler_for(scheme: str) -> Reconciler | None:
    """What reconciles a source of ``scheme``: the host's registered function, else the
    scheme's own ``reconcile``, else nothing."""
    registered = _reconcilers.get(scheme)
    if registered is not None:
        return registered
    found = schemes.SCHEMES.get(scheme)
    if found is not None and found.reconciles():
        return found.reconcile
    return None


def dispatch_reconciliations() -> int:
    reconciled = [name for name in {*schemes.SCHEMES, *_reconcilers} if reconciler_for(name)]
    ids = list(
        Source.objects.filter(enabled=True, scheme__in=reconciled)
        .exclude(api_base_url="")
        .values_list("id", flat=True)
    )
    for source_id in ids:
        celery_app.send_task(RECONCILE_SOURCE_TASK, (source_id,), queue=QUEUE_MAINTENANCE)
    return len(ids)


def source_reconcile(*, source_id: int) -> ReconcileResult:
    source = Source.objects.get(pk=source_id)
    fn = reconciler_for(source.scheme)
    if fn is None or not source.enabled or not source.api_base_url:
        return ReconcileResult()
    return fn(source)
