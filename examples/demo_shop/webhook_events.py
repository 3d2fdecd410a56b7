"""The demo shop's event types (imported at start-up: every app's `webhook_events` module).

``shop.order.created`` has two versions: version 1 had a flat e-mail and the total as a
string; version 2 nests them. Endpoints that subscribed in version 1's time keep getting
version 1, built from version 2 by ``order_created_v1``.
"""

from typing import Any

from deliveries.catalogue import Version, declare

ORDER = {
    "type": "object",
    "required": ["order_id", "status", "customer", "total"],
    "properties": {
        "order_id": {"type": "integer"},
        "status": {"enum": ["placed", "paid", "shipped"]},
        "customer": {
            "type": "object",
            "required": ["email"],
            "properties": {"email": {"type": "string", "format": "email"}},
        },
        "total": {
            "type": "object",
            "required": ["amount_cents", "currency"],
            "properties": {
                "amount_cents": {"type": "integer", "minimum": 0},
                "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
            },
        },
    },
}
ORDER_EXAMPLE = {
    "order_id": 42,
    "status": "placed",
    "customer": {"email": "ada@example.com"},
    "total": {"amount_cents": 1250, "currency": "EUR"},
}


def order_created_v1(v2: dict[str, Any]) -> dict[str, Any]:
    total = v2["total"]
    return {
        "order_id": v2["order_id"],
        "email": v2["customer"]["email"],
        "total": f"{total['amount_cents'] / 100:.2f} {total['currency']}",
    }


declare(
    "shop.order.created",
    description="A customer placed an order.",
    versions=[
        Version(
            1,
            schema={
                "type": "object",
                "required": ["order_id", "email", "total"],
                "properties": {
                    "order_id": {"type": "integer"},
                    "email": {"type": "string"},
                    "total": {"type": "string", "description": "e.g. '12.50 EUR'"},
                },
            },
            example={"order_id": 42, "email": "ada@example.com", "total": "12.50 EUR"},
            from_newer=order_created_v1,
        ),
        Version(2, schema=ORDER, example=ORDER_EXAMPLE),
    ],
)
declare(
    "shop.order.updated",
    description="An order changed (paid, shipped). `data` is the whole order after the change.",
    versions=[Version(1, schema=ORDER, example={**ORDER_EXAMPLE, "status": "shipped"})],
)
declare(
    "shop.order.deleted",
    description="An order was cancelled and removed. `data` is the order as it was.",
    versions=[Version(1, schema=ORDER, example=ORDER_EXAMPLE)],
)
declare(
    "shop.invoice.paid",
    description="The invoice of an order was paid.",
    versions=[
        Version(
            1,
            schema={
                "type": "object",
                "required": ["invoice_id", "order_id", "amount_cents", "currency", "paid_at"],
                "properties": {
                    "invoice_id": {"type": "integer"},
                    "order_id": {"type": "integer"},
                    "amount_cents": {"type": "integer", "minimum": 0},
                    "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
                    "paid_at": {"type": "string", "format": "date-time"},
                },
            },
            example={
                "invoice_id": 7,
                "order_id": 42,
                "amount_cents": 1250,
                "currency": "EUR",
                "paid_at": "2026-04-15T10:12:34Z",
            },
        )
    ],
)
