"""Reads on the receiving hot path, kept to one statement per request.

``source_for_request`` loads an enabled source and its unexpired secrets in one query. It
runs once per request (the body buffering's look-up is the view's: ``kept_source``) and
nothing of it is cached across requests, so a disabled source, a new secret or an expired
one counts at once, in every process. (Decrypting a secret is cheap beside the
request: not worth a cache of plaintext secrets.)
"""

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from django.db import connections, models, router

from receivers.models import FINISHED_STATUSES, InboxEvent, Source, SourceSecret
from webhooks_core.crypto import encryption

#: The source's fields the receiving view reads, loaded with the secrets in one query.
SOURCE_FIELDS = (
    "id",
    "slug",
    "scheme",
    "enabled",
    "tolerance_seconds",
    "max_body_bytes",
    "expected_account",
    "expected_mode",
    "public_url",
)


@dataclass(frozen=True)
class StoredSecret:
    fingerprint: str
    encrypted_value: str

    @property
    def value(self) -> str:
        """The plaintext; raises ``encryption.SecretDecryptionError``."""
        return encryption.decrypt(self.encrypted_value)


@dataclass(frozen=True)
class SourceForRequest:
    # Only SOURCE_FIELDS are loaded (the others are deferred): what the view needs.
    source: Source
    secrets: list[StoredSecret]


def source_for_request(*, slug: str, now: datetime) -> SourceForRequest | None:
    """The enabled source ``slug`` with its secrets unexpired at ``now``, or None."""
    connection = connections[router.db_for_read(Source)]
    with connection.cursor() as cursor:
        cursor.execute(
            _lookup_sql(connection.alias),
            [connection.ops.adapt_datetimefield_value(now), slug],
        )
        rows = cursor.fetchall()
    if not rows:
        return None
    width = len(SOURCE_FIELDS)
    loaded = dict(zip(SOURCE_FIELDS, rows[0][:width], strict=True))
    # from_db in the model's field order; the fields not loaded are deferred, not blank.
    names = [f.attname for f in Source._meta.concrete_fields if f.attname in loaded]
    source = Source.from_db(connection.alias, names, [loaded[name] for name in names])
    # A source without an unexpired secret comes back as one row with NULL secret columns.
    secrets = [StoredSecret(*row[width:]) for row in rows if row[width + 1] is not None]
    return SourceForRequest(source=source, secrets=secrets)


@lru_cache(maxsize=8)
def _lookup_sql(alias: str) -> str:
    quote = connections[alias].ops.quote_name
    source, secret = quote(Source._meta.db_table), quote(SourceSecret._meta.db_table)
    selected = ", ".join(f"s.{quote(name)}" for name in SOURCE_FIELDS)
    # Only names from the models' metadata are formatted in; slug and time are parameters.
    return (
        f"SELECT {selected}, k.{quote('fingerprint')}, k.{quote('encrypted_value')} "  # noqa: S608
        f"FROM {source} s LEFT JOIN {secret} k ON k.{quote('source_id')} = s.{quote('id')} "
        f"AND (k.{quote('expires_at')} IS NULL OR k.{quote('expires_at')} > %s) "
        f"WHERE s.{quote('slug')} = %s AND s.{quote('enabled')} "
        f"ORDER BY k.{quote('created_at')} DESC, k.{quote('id')} DESC"
    )


def unfinished_inbox_events(*, source_id: int) -> int:
    """The source's inbox rows whose work is not done (see ``FINISHED_STATUSES``)."""
    return (
        InboxEvent.objects.filter(source_id=source_id).exclude(status__in=FINISHED_STATUSES).count()
    )


@dataclass(frozen=True)
class DeletionPreview:
    """What deleting a source takes along, and what stands in its way."""

    secrets: int
    inbox_events: int
    unfinished: int
    #: Rows of the host's models that protect the source (``on_delete=PROTECT``), by model.
    referring: dict[str, int]


def source_deletion_preview(*, source: Source) -> DeletionPreview:
    """Counts, never the rows themselves: a source may have millions of inbox events."""
    referring = {}
    for relation in Source._meta.related_objects:
        model = relation.related_model
        if model is InboxEvent or model is SourceSecret or not hasattr(relation, "field"):
            continue
        if relation.on_delete is not models.PROTECT:
            continue
        count = model._base_manager.filter(**{relation.field.name: source}).count()
        if count:
            referring[model._meta.label] = count
    return DeletionPreview(
        secrets=source.secrets.count(),
        inbox_events=source.inbox_events.count(),
        unfinished=unfinished_inbox_events(source_id=source.pk),
        referring=referring,
    )
