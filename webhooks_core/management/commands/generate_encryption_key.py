from typing import Any

from django.core.management.base import BaseCommand

from webhooks_core import crypto


class Command(BaseCommand):
    help = "Print a new key for WEBHOOKS_ENCRYPTION_KEY (a Fernet key)."
    requires_system_checks: list[str] = []

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(crypto.generate_key())
