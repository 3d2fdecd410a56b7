"""Published signals of the sending side: extension points, never where core logic hides.

`endpoint_suspended(sender=Endpoint, endpoint=<Endpoint>, reason=<str>)`: sent after the
transaction that suspended an endpoint automatically (repeated failures, or 410 Gone) has
committed. Connect receivers in your AppConfig.ready().
"""

from django.dispatch import Signal

endpoint_suspended = Signal()
