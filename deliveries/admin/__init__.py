"""The operator console (Django admin) of the sending side. Actions call services.

One module per area: endpoints, events, deliveries and the dead-letter queue, polls,
replays, portal sessions, privacy (tenant erasure, tenant settings). Every action checks its
permission and lands in Django's admin log. API tokens and the audit log are the core's
(webhooks_core/admin.py).
"""

from deliveries.admin import deliveries, endpoints, events, polling, portal, privacy, replays

__all__ = ["deliveries", "endpoints", "events", "polling", "portal", "privacy", "replays"]
