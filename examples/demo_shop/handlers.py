"""What the demo's receiving side does with the shop's webhooks: log them, so the inbox
shows them `processed` (the point of the demo is the trip, not the effect)."""

import logging

from receivers.handlers import inbox_handler
from receivers.models import InboxEvent

logger = logging.getLogger(__name__)

DEMO_SOURCE = "demo-shop"


@inbox_handler("shop.*", sources=[DEMO_SOURCE])
def log_shop_event(event: InboxEvent) -> None:
    logger.info("demo receiver processed %s %s", event.type, event.event_id)
