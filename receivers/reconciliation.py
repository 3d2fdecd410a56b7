"""Reconciliation: ask the provider for the truth about objects stuck in a pending state.

A webhook may be lost for good (the provider gave up, or never retries, like GitHub).
A reconciler per scheme, registered with ``@reconciler("<scheme>")``, looks at local
objects of one source that have waited too long and applies what the provider's API says
through the same transition service the handlers use. Beat runs ``reconcile_all`` every
``RECEIVERS_RECONCILE_INTERVAL_SECONDS``; it sends one ``reconcile_source`` task per enabled
source that has an API base URL and a reconciler for its scheme.
"""

from collections.abc import Callable
from dataclasses import dataclass

from .models import Source


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


def enqueue_reconciliations() -> int:
    from .tasks import reconcile_source

    ids = list(
        Source.objects.filter(enabled=True, scheme__in=list(_reconcilers))
        .exclude(api_base_url="")
        .values_list("id", flat=True)
    )
    for source_id in ids:
        reconcile_source.delay(source_id)
    return len(ids)


def source_reconcile(*, source_id: int) -> ReconcileResult:
    source = Source.objects.get(pk=source_id)
    fn = _reconcilers.get(source.scheme)
    if fn is None or not source.enabled or not source.api_base_url:
        return ReconcileResult()
    return fn(source)
