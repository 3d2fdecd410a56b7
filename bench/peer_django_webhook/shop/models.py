import uuid

from django.db import models


class Order(models.Model):
    """The product row whose creation django-webhook announces; `ref` identifies it at the
    receiver (bench/peer.py reads `object.ref` from the body)."""

    ref = models.UUIDField(default=uuid.uuid4, unique=True)
    n = models.IntegerField()
    text = models.TextField(blank=True)

    def __str__(self) -> str:
        return str(self.ref)
