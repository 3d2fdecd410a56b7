"""A known mix of attempts, deliveries and inbox rows for the dashboard tests."""

from datetime import timedelta

from django.utils import timezone

from deliveries import services
from deliveries.models import Attempt, Delivery, DeliveryStatus, Event
from receivers import services as receiver_services
from receivers.models import InboxEvent, InboxStatus


def seed_dashboard() -> None:
    now = timezone.now()
    good, _ = services.endpoint_create(url="https://good.example.com/hooks", event_types=["*"])
    bad, _ = services.endpoint_create(url="https://flaky.example.org/webhooks", event_types=["*"])
    for minute in range(0, 58, 2):
        at = now - timedelta(minutes=minute, seconds=30)
        for endpoint, status in ((good, 200), (bad, 500 if minute % 6 else 200)):
            event = Event.objects.create(type="order.created", occurred_at=at, data={})
            Event.objects.filter(pk=event.pk).update(created_at=at - timedelta(seconds=1))
            final = DeliveryStatus.SUCCEEDED if status == 200 else DeliveryStatus.PENDING
            if status != 200 and minute % 10 == 2:
                final = DeliveryStatus.DEAD_LETTERED
            delivery = Delivery.objects.create(
                event=event,
                endpoint=endpoint,
                status=final,
                attempts=1,
                completed_at=at + timedelta(seconds=0.2 + minute / 60)
                if final != DeliveryStatus.PENDING
                else None,
            )
            Delivery.objects.filter(pk=delivery.pk).update(created_at=at)
            Attempt.objects.create(
                delivery=delivery,
                number=1,
                started_at=at,
                duration_ms=40.0 + minute,
                response_status=status,
            )
    source, _ = receiver_services.source_create(slug="dash-src", scheme="ours")
    for i in range(12):
        InboxEvent.objects.create(
            source=source,
            event_id=f"d{i}",
            type="t",
            status=InboxStatus.FAILED if i % 4 == 0 else InboxStatus.PROCESSED,
            payload={},
            received_at=now - timedelta(minutes=5 * i + 1),
        )
