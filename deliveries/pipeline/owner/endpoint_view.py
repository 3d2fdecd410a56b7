"""The endpoint as its owner sees it: read once and kept while its version holds (the
claims check the version), with its secrets and signing keys decrypted once per version;
and whether it still gets anything (deleted, disabled, suspended, awaiting consent)."""

import copy
import time
import uuid
from typing import Any

from django.db import connection
from django.utils import timezone

from deliveries.destinations import Credentials
from deliveries.endpoints.validation import ready as validation_ready
from deliveries.models import Delivery, Endpoint, EndpointState
from deliveries.pipeline.owner.claims import claim_due, claim_round, endpoint_version
from deliveries.pipeline.owner.known_endpoints import (
    KnownEndpoint,
    forget_endpoint,
    recall_endpoint,
    remember_endpoint,
)
from deliveries.pipeline.wire import signing_keys, uses_signing_keys

# An endpoint read this recently is not read again for the next round: a change (a
# disable, a new header) applies from the next request that starts later than this.
FRESH_SECONDS = 0.05
# Where the claim itself checks the endpoint's version (an unordered endpoint on
# PostgreSQL), the owner reads the endpoint again only when its version changed, or
# after this long (a net, not the rule: any change is seen by the next claim).
VERSIONED_FRESH_SECONDS = 30.0


class EndpointView:
    def __init__(self, endpoint_id: str) -> None:
        self.endpoint_id = endpoint_id
        self.endpoint: Endpoint | None = None
        self.read_at = 0.0
        # The endpoint's version as read with it (claims check it), and its secrets and
        # signing keys with their expiry, decrypted once per version.
        self.version: str | None = None
        self.secrets: list[tuple[str, Any]] = []
        self.signing_keys: list[tuple[str, Any]] | None = None
        self.gone = self.inactive = self.awaiting_consent = False

    def new_turn(self) -> None:
        self.inactive = self.awaiting_consent = False

    def stopped(self, state: str | None) -> bool:
        """Whether the endpoint, in this state, gets nothing more from this owner: deleted
        (its rows are gone with it) or disabled or suspended (inactive; a turn after a
        resume reads it again)."""
        if state is None:
            self.gone = True
        elif state != EndpointState.ACTIVE:
            self.inactive = True
            self.read_at = 0.0
        else:
            return False
        return True

    def read(self) -> bool:
        """Read the endpoint unless what we hold is fresh; False when it gets nothing now."""
        age = time.monotonic() - self.read_at
        if self.endpoint is not None and (
            age < FRESH_SECONDS or (self.version is not None and age < VERSIONED_FRESH_SECONDS)
        ):
            return True  # read for the round just before, or checked by every claim
        if self.endpoint is None:
            known = recall_endpoint(self.endpoint_id, VERSIONED_FRESH_SECONDS)
            if known is not None:
                # As the last owner here read it; the first claim checks its version.
                self.endpoint, self.version = known.endpoint, known.version
                self.secrets, self.signing_keys = known.secrets, known.signing_keys
                self.read_at = known.read_at
                return True
        versioned = connection.vendor == "postgresql"
        version = endpoint_version(endpoint_id=self.endpoint_id) if versioned else None
        endpoint = Endpoint.objects.filter(pk=self.endpoint_id).first()
        self.read_at = time.monotonic()
        if self.stopped(None if endpoint is None else endpoint.state):
            forget_endpoint(self.endpoint_id)
            return False
        assert endpoint is not None
        if not validation_ready(endpoint):
            # The target has not consented (CloudEvents handshake): claim nothing; the
            # handshake's success wakes the endpoint again (endpoints.validation).
            self.inactive = self.awaiting_consent = True
            return False
        self.endpoint = endpoint
        self.version = None
        if version is not None and not endpoint.ordered_delivery:
            self.secrets = [(s.value, s.expires_at) for s in endpoint.secrets.all()]
            self.signing_keys = (
                [(k.value, k.expires_at) for k in endpoint.signing_keys.all()]
                if uses_signing_keys(endpoint)
                else None
            )
            self.version = version
            known = KnownEndpoint(
                copy.copy(endpoint), version, self.secrets, self.signing_keys, self.read_at
            )
            remember_endpoint(self.endpoint_id, known)
        else:
            forget_endpoint(self.endpoint_id)
        return True

    def claim(
        self, token: uuid.UUID, limit: int, *, first: bool, probe: bool
    ) -> list[Delivery] | None:
        """The round's claim; None when the endpoint changed since we read it (nothing
        taken: read it again, then claim again)."""
        endpoint = self.endpoint
        assert endpoint is not None
        if self.version is None or probe:
            if probe:
                # The gate itself just wrote the circuit's state (the probe is ours): a
                # version check would find the row changed and send no probe.
                self.read_at = 0.0
            return claim_due(endpoint=endpoint, token=token, limit=limit, with_expired=first)
        claimed = claim_round(
            endpoint=endpoint, version=self.version, token=token, limit=limit, with_expired=first
        )
        if claimed.version != self.version:
            self.read_at = 0.0
            self.version = None
            return None
        return claimed.rows

    def credentials(self) -> Credentials | str:
        """The round's signing material (a secret may have expired or been rotated since
        the last round), or what is missing."""
        endpoint = self.endpoint
        assert endpoint is not None
        now = timezone.now()
        if self.version is not None:
            secrets = _unexpired(self.secrets, now)
            private_keys: list[str] | None = []
            if secrets and self.signing_keys is not None:
                private_keys = _unexpired(self.signing_keys, now) or None
        else:
            secrets = [secret.value for secret in endpoint.secrets.unexpired(now)]
            private_keys = signing_keys(endpoint, now) if secrets else []
        if not secrets:
            return "no unexpired signing secret"
        if private_keys is None:
            return "no unexpired v1a signing key"
        return Credentials(secrets, private_keys, int(now.timestamp()))


def _unexpired(values: list[tuple[str, Any]], now: Any) -> list[str]:
    return [value for value, expires_at in values if expires_at is None or expires_at > now]
