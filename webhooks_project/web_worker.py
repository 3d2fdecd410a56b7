"""The web process's gunicorn worker: gevent's, taking turns between keep-alive requests.

gunicorn's gevent worker serves a keep-alive connection in a loop: once a response is sent it
reads the connection's next request at once, and if the client (a provider's sender, a load
balancer) has already sent it, the greenlet goes on without giving the others a turn. A
quick client then holds the process while every other connection waits (the figures are on
the deployment page). Yielding once after each request puts the connection behind the
others that are ready.

Run it with `--worker-class webhooks_project.web_worker.GeventWorker` (the Procfile's `web`).
"""

from typing import Any

import gevent
from gunicorn.workers import ggevent


class GeventWorker(ggevent.GeventWorker):
    """gunicorn's gevent worker; each connection yields after each of its requests."""

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> None:
        super().handle_request(listener_name, req, sock, addr)
        # To the back of the ready greenlets: their requests are served before this
        # connection's next one. (Not after an exception: the connection is closing.)
        gevent.sleep(0)
