from typing import Any

from django.db import migrations, models


def encrypt_credential_headers(apps: Any, schema_editor: Any) -> None:
    """Custom headers that are credentials (Authorization, X-Api-Key, ...) move out of the
    plaintext column into the encrypted one."""
    from deliveries.endpoints import headers
    from webhooks_core.crypto import encryption

    Endpoint = apps.get_model("deliveries", "Endpoint")
    for endpoint in Endpoint.objects.exclude(custom_headers={}).iterator():
        plain = dict(endpoint.custom_headers or {})
        secret = {n: v for n, v in plain.items() if headers.is_credential(n)}
        if not secret:
            continue
        endpoint.custom_headers = {n: v for n, v in plain.items() if n not in secret}
        endpoint.secret_custom_headers = {n: encryption.encrypt(str(v)) for n, v in secret.items()}
        endpoint.save(update_fields=["custom_headers", "secret_custom_headers"])


class Migration(migrations.Migration):
    dependencies = [
        ("deliveries", "0007_payload_offload"),
    ]

    operations = [
        migrations.AddField(
            model_name="endpoint",
            name="secret_custom_headers",
            field=models.JSONField(blank=True, default=dict, editable=False),
        ),
        migrations.RunPython(encrypt_credential_headers, migrations.RunPython.noop),
    ]
