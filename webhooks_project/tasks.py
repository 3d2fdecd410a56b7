import socket

from celery import shared_task
from django.utils import timezone

from .models import WorkerHeartbeat


@shared_task(name="webhooks_project.tasks.heartbeat")
def heartbeat(hostname: str | None = None) -> str:
    name = hostname or socket.gethostname()
    WorkerHeartbeat.objects.update_or_create(hostname=name, defaults={"seen_at": timezone.now()})
    return name
