"""Every operator action is written to Django's admin log: who did what to which object."""

from collections.abc import Iterable

from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.db.models import Model
from django.http import HttpRequest


def audit(
    request: HttpRequest, objects: Iterable[Model], message: str, *, added: bool = False
) -> None:
    """Log one entry per object. The message must never contain a secret."""
    rows = list(objects)
    if not rows or request.user.pk is None:
        return
    LogEntry.objects.log_actions(
        user_id=request.user.pk,
        queryset=rows,
        action_flag=ADDITION if added else CHANGE,
        change_message=message,
    )
