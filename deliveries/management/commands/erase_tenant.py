from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from deliveries import services
from deliveries.operator.erasure import Actor


class Command(BaseCommand):
    help = (
        "Erase every row and file of one tenant (endpoints, secrets, events, payloads, "
        "deliveries, attempts, replays, portal links, the tokens limited to it), in batches. "
        "Leaves an audit entry with the counts and no personal data."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("tenant", help="the tenant id, e.g. acme")
        parser.add_argument(
            "--background",
            action="store_true",
            help="only start it: a worker runs it (beat resumes it after a crash)",
        )

    def handle(self, *args: Any, tenant: str, background: bool = False, **options: Any) -> None:
        try:
            erasure = services.tenant_erasure_start(tenant=tenant, actor=Actor(label="command"))
        except services.ErasureInvalid as exc:
            raise CommandError(str(exc)) from None
        if background:
            self.stdout.write(f"Erasure #{erasure.pk} started.")
            return
        outcome = "more"
        while outcome == "more":
            outcome = services.tenant_erasure_run(erasure_id=erasure.pk)
        erasure.refresh_from_db()
        total = sum(n for kind, n in erasure.counts.items() if kind != "payloads")
        if outcome == "done":
            self.stdout.write(f"Erasure #{erasure.pk} done: {total} rows deleted.")
        else:
            self.stdout.write(
                f"Erasure #{erasure.pk}: {total} rows deleted so far; deliveries being sent "
                "right now are left to the periodic resume."
            )
