"""What became of a delivery in its owner's round."""


class DeliveryOutcome:
    """What became of a delivery once its round was recorded (not the destination's answer
    to an attempt: that is `destinations.Outcome`); tests and logs assert on these strings."""

    NOT_CLAIMED = "not_claimed"
    HELD = "held"
    SUCCEEDED = "succeeded"
    RETRY_SCHEDULED = "retry_scheduled"
    DEAD_LETTERED = "dead_lettered"
    LEASE_LOST = "lease_lost"
    # Deferred without spending an attempt: breaker open, in-flight or rate limit reached.
    DEFERRED = "deferred"
