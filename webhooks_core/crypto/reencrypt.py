"""Re-encrypt every secret at rest with the first key of WEBHOOKS_ENCRYPTION_KEY.

The second half of a key rotation (docs/security.md): put the new key first, the old one
after it, deploy, run ``python manage.py reencrypt_secrets``, then drop the old key. Found
by convention in every installed model, so each app's secrets are covered without a
registry: text fields named ``encrypted_*`` (one token each; ``RotatingSecret``'s
``encrypted_value``, a source's ``encrypted_api_token``) and the JSON field
``secret_custom_headers`` (a name → token mapping). Row by row, each in its own short
transaction with the row locked, so it can run while the processes serve and be run again.
"""

from typing import Any

from django.apps import apps
from django.db import models, transaction

from webhooks_core.crypto import encryption

JSON_TOKEN_MAPS = ("secret_custom_headers",)


def _fields(model: type[models.Model]) -> tuple[list[str], list[str]]:
    tokens, maps = [], []
    for field in model._meta.concrete_fields:
        if isinstance(field, models.TextField) and field.name.startswith("encrypted_"):
            tokens.append(field.name)
        elif isinstance(field, models.JSONField) and field.name in JSON_TOKEN_MAPS:
            maps.append(field.name)
    return tokens, maps


def _rotated(row: Any, tokens: list[str], maps: list[str]) -> list[str]:
    changed = []
    for name in tokens:
        value = getattr(row, name)
        if value:
            setattr(row, name, encryption.reencrypt(value))
            changed.append(name)
    for name in maps:
        mapping = getattr(row, name) or {}
        if mapping:
            setattr(row, name, {key: encryption.reencrypt(token) for key, token in mapping.items()})
            changed.append(name)
    return changed


def reencrypt_all() -> dict[str, int]:
    """Rows re-encrypted per model label; raises SecretDecryptionError on a row that no
    configured key decrypts (nothing after it is touched, what came before stays done)."""
    counts: dict[str, int] = {}
    for model in apps.get_models():
        tokens, maps = _fields(model)
        if not tokens and not maps:
            continue
        done = 0
        for pk in model._default_manager.values_list("pk", flat=True).order_by("pk").iterator():
            with transaction.atomic():
                row = model._default_manager.select_for_update().filter(pk=pk).first()
                if row is None:
                    continue
                changed = _rotated(row, tokens, maps)
                if changed:
                    row.save(update_fields=changed)
                    done += 1
        counts[model._meta.label] = done
    return counts
