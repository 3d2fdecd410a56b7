"""Example domain: payments for orders, fed by webhooks and reconciliation.

It shows every technique of ``receivers.idempotency`` and ``receivers.statemachine``:
unique provider ids, amount and currency checked against the order, a per-payment lock,
versioned updates, a state machine, a missing-predecessor policy, and one transition
service (``payments.payment_apply_state``) used by handlers and reconciliation alike.
"""
