"""Emit events from Django signals: a model's create/update/delete, or any custom signal.

Call these once, from your app's ``AppConfig.ready()``::

    from deliveries.bindings import bind_model, bind_signal

    bind_model(
        Order,
        created="order.created",
        updated="order.updated",
        deleted="order.deleted",
        serializer=lambda order: {"order_id": order.pk, "status": order.status},
    )
    bind_signal(invoice_paid, "invoice.paid", data=lambda sender, invoice, **kw: {...})

The event is written by ``emit`` in the transaction that saves the model, because
``post_save``/``post_delete`` run inside it: a rolled-back save emits nothing, a committed
one is never lost. That holds when the save runs in ``transaction.atomic()`` (or with
``ATOMIC_REQUESTS``); in autocommit mode Django has committed the row before ``post_save``
runs, so the event commits separately right after it (a warning is logged). An event that
the catalogue refuses raises ``EventRefused`` out of ``save()``, which rolls the
change back with it: no change is recorded without its event.

Model events carry an ordering key ``"<app_label>.<model>:<pk>"`` by default, so an
endpoint with ordered delivery receives one object's events in order.
"""

import logging
from collections.abc import Callable
from typing import Any

from django.db import models, router, transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import Signal

from deliveries.pipeline.emit import emit

logger = logging.getLogger(__name__)

Serializer = Callable[[Any], Any]
OrderingKey = Callable[[Any], str | None]
Tenant = Callable[[Any], str | None]


def object_ordering_key(instance: models.Model) -> str:
    """The default ordering key of a model event: one line per object."""
    return f"{instance._meta.label_lower}:{instance.pk}"


def _warn_outside_transaction(model: type[models.Model], event_type: str) -> None:
    if not transaction.get_connection(router.db_for_write(model)).in_atomic_block:
        logger.warning(
            "%s saved outside transaction.atomic(): event %s is committed separately from it",
            model._meta.label,
            event_type,
        )


def bind_model(
    model: type[models.Model],
    *,
    serializer: Serializer,
    created: str | None = None,
    updated: str | None = None,
    deleted: str | None = None,
    ordering_key: OrderingKey | None = object_ordering_key,
    tenant: Tenant | None = None,
) -> None:
    """Emit ``created``/``updated`` on ``post_save`` and ``deleted`` on ``post_delete``.

    ``serializer(instance)`` builds the event's ``data`` (for ``deleted`` it runs before
    Django clears the primary key). ``ordering_key(instance)`` (None: no key) groups the
    object's events for ordered delivery. ``tenant(instance)`` (None: no tenant) names the
    customer whose endpoints receive the event, e.g. ``lambda order: order.shop.slug``.
    Fixture loading (``raw`` saves) emits nothing.
    Binding the same model twice replaces the earlier binding.
    """
    if not (created or updated or deleted):
        raise ValueError("bind_model needs at least one of created, updated, deleted")

    def _emit(event_type: str, instance: models.Model) -> None:
        _warn_outside_transaction(model, event_type)
        key = ordering_key(instance) if ordering_key is not None else None
        its_tenant = tenant(instance) if tenant is not None else None
        emit(event_type, serializer(instance), ordering_key=key, tenant=its_tenant)

    def on_save(sender: Any, instance: models.Model, created: bool, raw: bool, **_: Any) -> None:
        event_type = created_type if created else updated
        if event_type and not raw:
            _emit(event_type, instance)

    def on_delete(sender: Any, instance: models.Model, **_: Any) -> None:
        if deleted:
            _emit(deleted, instance)

    created_type = created
    uid = f"deliveries.bindings:{model._meta.label}"
    post_save.connect(on_save, sender=model, weak=False, dispatch_uid=uid)
    post_delete.connect(on_delete, sender=model, weak=False, dispatch_uid=uid)


def bind_signal(
    signal: Signal,
    event_type: str,
    *,
    data: Callable[..., Any],
    sender: Any = None,
    ordering_key: Callable[..., str | None] | None = None,
    tenant: Callable[..., str | None] | None = None,
) -> None:
    """Emit ``event_type`` whenever ``signal`` is sent (by ``sender``, if given).

    ``data(sender=…, **kwargs)`` builds the event's data from the signal's arguments,
    ``ordering_key(sender=…, **kwargs)`` its ordering key and ``tenant(sender=…, **kwargs)``
    its tenant. Send the signal inside the
    transaction of the change it announces, as you would call ``emit``.
    """

    def receiver(sender: Any, **kwargs: Any) -> None:
        kwargs.pop("signal", None)
        key = ordering_key(sender=sender, **kwargs) if ordering_key is not None else None
        its_tenant = tenant(sender=sender, **kwargs) if tenant is not None else None
        emit(event_type, data(sender=sender, **kwargs), ordering_key=key, tenant=its_tenant)

    signal.connect(
        receiver,
        sender=sender,
        weak=False,
        dispatch_uid=f"deliveries.bindings:{id(signal)}:{event_type}",
    )
