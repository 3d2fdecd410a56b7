"""Source services refuse secrets that could never verify a request."""

import pytest

from receivers import services
from receivers.models import Source


@pytest.mark.django_db
def test_create_and_rotate_refuse_unusable_secrets() -> None:
    with pytest.raises(services.InvalidSecret, match="base64"):
        services.source_create(slug="std", scheme="standard", secret="whsec_not base64!")
    assert not Source.objects.exists()

    source, _ = services.source_create(slug="gh", scheme="github", secret="good")
    with pytest.raises(services.InvalidSecret, match="control characters"):
        services.source_rotate_secret(source=source, secret="pasted\n")
    assert source.secrets.count() == 1
    assert source.secrets.get().expires_at is None  # the old secret was not retired
