from argparse import ArgumentTypeError
from datetime import datetime
from typing import Any
from uuid import UUID

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from deliveries import services


def _when(value: str) -> datetime:
    parsed = parse_datetime(value)
    if parsed is None:
        raise ArgumentTypeError(f"{value!r} is not an ISO 8601 date-time")
    return parsed if timezone.is_aware(parsed) else timezone.make_aware(parsed)


def _uuid(value: str) -> UUID:
    try:
        return UUID(value)
    except ValueError:
        raise ArgumentTypeError(f"{value!r} is not an endpoint id") from None


class Command(BaseCommand):
    help = (
        "Send the events recorded in [--since, --until) again to their endpoints, with "
        "X-Webhook-Replay: true. --dry-run only counts. Same as POST /api/v1/replays."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--since", type=_when, required=True, help="ISO 8601, e.g. 2026-04-15T10:00Z"
        )
        parser.add_argument("--until", type=_when, required=True, help="ISO 8601, excluded")
        parser.add_argument(
            "--event-type",
            dest="event_types",
            action="append",
            default=[],
            help="an event type or prefix (invoice.*); repeat for several",
        )
        parser.add_argument(
            "--endpoint",
            dest="endpoint_ids",
            type=_uuid,
            action="append",
            default=[],
            help="an endpoint id; repeat for several",
        )
        parser.add_argument("--tenant", help="only this tenant's events and endpoints")
        parser.add_argument("--dry-run", action="store_true", help="count, send nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        filters = services.ReplayFilters(
            since=options["since"],
            until=options["until"],
            event_types=tuple(options["event_types"]),
            endpoint_ids=tuple(options["endpoint_ids"]),
            tenant=options["tenant"],
        )
        try:
            if options["dry_run"]:
                preview = services.replay_preview(filters=filters)
                self.stdout.write(
                    f"dry run: {preview.deliveries} deliveries of {preview.events} events "
                    f"to {preview.endpoints} endpoints would be sent"
                )
                return
            replay, preview = services.replay_create(
                filters=filters, requested_via="management command", start_task=False
            )
        except services.ReplayInvalid as exc:
            raise CommandError(f"{exc.field}: {exc.message}") from None
        # The batches run here, one transaction each, the same steps the task runs; the
        # deliveries themselves are sent by the workers.
        replay = services.replay_run_inline(replay_id=replay.pk)
        self.stdout.write(
            f"replay #{replay.pk}: {replay.deliveries_created} deliveries of "
            f"{replay.events_done} events created"
        )
