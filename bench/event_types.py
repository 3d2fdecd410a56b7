"""Event types the benchmark emits (imported via WEBHOOKS_EVENT_TYPE_MODULES)."""

from deliveries.catalogue import Version, declare

# The soak's events come in groups, each subscribed by a few endpoints (`bench.soak`).
SOAK_GROUPS = 10

for name in (
    "bench.load",
    "bench.alone",
    "bench.beside_dead",
    *(f"bench.soak.{group}" for group in range(SOAK_GROUPS)),
):
    declare(
        name,
        description=f"{name}: benchmark load",
        versions=[Version(1, schema={"type": "object"}, example={"n": 1})],
    )
