from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from webhooks_core.models import ApiToken


class Command(BaseCommand):
    help = "Create an API token. The token is printed alone on the last line, once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="who or what uses the token, e.g. 'billing-service'")
        parser.add_argument(
            "--tenant",
            default=None,
            help="limit the token to this tenant: its endpoints, events, deliveries, "
            "replays and portal sessions only (no receiving side)",
        )

    def handle(self, *args: Any, name: str, tenant: str | None = None, **options: Any) -> None:
        try:
            token, plain = ApiToken.issue(name, tenant=tenant)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        scope = f" limited to tenant {token.tenant!r}" if token.tenant else ""
        self.stderr.write(f"Created API token {token.name!r} (id {token.pk}){scope}; store it now:")
        self.stdout.write(plain)
