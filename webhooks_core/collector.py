"""Python's garbage collector in a long-running process, once it has started.

A worker or web process keeps what its start-up made (modules, Django's apps, models and
URL patterns, the Celery app) for its whole life: hundreds of thousands of objects that
every full collection walked again. In the gevent delivery worker at 600 deliveries/s
that was 0.14 s a collection and, with the younger generations' collections, about a
sixth of the process's CPU. `gc.freeze()` moves what exists at the call out of the
collector's sight for good.

A worker may also have its young generation collected after 10,000 new containers
instead of 700 (`young_generation_threshold`): it holds the requests in flight, which a
collection walks each time; in the delivery worker that cut its CPU by another 5%. Not in
the web process, where requests are short: there it cost the trivial view 5-10%.
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
