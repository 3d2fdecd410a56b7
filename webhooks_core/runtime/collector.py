"""Python's garbage collector in a long-running process, once it has started.

A worker or web process keeps what its start-up made (modules, Django's apps, models and
URL patterns, the Celery app) for its whole life: hundreds of thousands of objects that
every full collection walked again, a large share of a busy worker's CPU (the
capacity page has the figures). `gc.freeze()` moves what exists at the call out of the
collector's sight for good.

A worker may also have its young generation collected less often
(`WORKER_YOUNG_GENERATION_THRESHOLD` new containers instead of Python's default): it holds
the requests in flight, which a collection walks each time. Not in the web process, where
requests are short: there the larger young generation made the trivial view slower.
Objects made later are collected as before; cycles among them live a little longer.

`webhooks_project.celery` calls `settle_after_start_up` once a worker is ready (Celery's
`worker_ready`, and `worker_process_init` in a prefork child), `webhooks_project.wsgi`
once the application is loaded. No Django here.
"""

import gc

WORKER_YOUNG_GENERATION_THRESHOLD = 10_000


def settle_after_start_up(young_generation_threshold: int | None = None) -> None:
    gc.freeze()
    if young_generation_threshold is not None:
        _, middle, old = gc.get_threshold()
        gc.set_threshold(young_generation_threshold, middle, old)
