from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from deliveries.models import ApiToken


class Command(BaseCommand):
    help = "Create an API token. The token is printed alone on the last line, once."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="who or what uses the token, e.g. 'billing-service'")

    def handle(self, *args: Any, name: str, **options: Any) -> None:
        token, plain = ApiToken.issue(name)
        self.stderr.write(f"Created API token {token.name!r} (id {token.pk}); store it now:")
        self.stdout.write(plain)
