"""Event types the test suite emits, declared like a product declares its own.

The catalogue refuses undeclared types (WEBHOOKS_REQUIRE_DECLARED_TYPES is on in tests
too), so the types that tests written before the catalogue use are declared here, with a
schema that accepts any JSON: those tests are about delivery, not about schemas. Tests of
the catalogue itself declare their own strict types.
"""

from deliveries.catalogue import Version, declare

ANY_DATA: dict[str, object] = {}

for name in [
    "a.b",
    "c.d",
    "customer.created",
    "dead.created",
    "doomed.savepoint",
    "doomed.transaction",
    "invoice.paid",
    "invoice.voided",
    "kept.after_savepoint",
    "kept.autocommit",
    "logs.noted",
    "ok.created",
    "order.created",
    "order.paid",
    "payment.created",
    "payment.processing",
    "payment.succeeded",
    "t.x",
]:
    declare(
        name,
        description=f"{name} (test suite; any data)",
        versions=[Version(1, schema=ANY_DATA, example={})],
    )


def _same(data: object) -> object:
    return data


# Three versions, for tests that emit an explicit (newest) version.
declare(
    "invoice.refunded",
    description="invoice.refunded (test suite; any data, three versions)",
    versions=[
        Version(1, schema=ANY_DATA, example={}, from_newer=_same),
        Version(2, schema=ANY_DATA, example={}, from_newer=_same),
        Version(3, schema=ANY_DATA, example={}),
    ],
)
