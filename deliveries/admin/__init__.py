"""The operator console (Django admin) of the sending side. Actions call services.

One module per area: endpoints, events, deliveries and the dead-letter queue, replays,
API tokens, portal sessions, privacy (audit log, tenant erasure, tenant settings). Every
action checks its permission and lands in Django's admin log.
"""

from . import deliveries, endpoints, events, portal, privacy, replays, tokens

__all__ = ["deliveries", "endpoints", "events", "portal", "privacy", "replays", "tokens"]
