from django.db import models


class WorkerHeartbeat(models.Model):
    """The last time a worker ran the periodic heartbeat task, one row per worker host.

    Operators (and the smoke test) see from it that beat, the broker and a worker form a
    working loop end to end.
    """

    hostname = models.CharField(max_length=255, unique=True)
    seen_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.hostname} @ {self.seen_at:%Y-%m-%d %H:%M:%S}"
