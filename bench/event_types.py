"""Event types the benchmark emits (imported via WEBHOOKS_EVENT_TYPE_MODULES)."""

from deliveries.catalogue import Version, declare

for name in ("bench.load", "bench.alone", "bench.beside_dead"):
    declare(
        name,
        description=f"{name}: benchmark load",
        versions=[Version(1, schema={"type": "object"}, example={"n": 1})],
    )
