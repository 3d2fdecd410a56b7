"""What the demo's receiving side does with the shop's webhooks, whatever source they come
to: log them, so the inbox shows them `processed` (the point of the demo is the trip, not
the effect)."""

import logging

from receivers.handlers import inbox_handler
from receivers.models import InboxEvent

logger = logging.getLogger(__name__)

DEMO_SOURCE = "demo-shop"
#: The demo tenants; each tenant's endpoint posts to a receiving source of its own.
DEMO_TENANTS = ("acme", "globex")


# Every source: the demo's (the shop's, each tenant's) and the ones a newcomer makes while
# following Getting started.
@inbox_handler("shop.*")
def log_shop_event(event: InboxEvent) -> None:
    logger.info("demo receiver processed %s %s", event.type, event.event_id)
