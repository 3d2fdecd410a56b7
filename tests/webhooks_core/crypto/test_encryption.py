"""Encryption at rest of endpoint secrets (Fernet / MultiFernet)."""

import pytest
from cryptography.fernet import Fernet
from pytest_django.fixtures import Settings as SettingsWrapper

from webhooks_core.crypto import encryption, signing


@pytest.fixture
def key_a() -> str:
    return Fernet.generate_key().decode()


@pytest.fixture
def key_b() -> str:
    return Fernet.generate_key().decode()


def test_round_trip(settings: SettingsWrapper, key_a: str) -> None:
    settings.WEBHOOKS_ENCRYPTION_KEY = key_a
    secret = signing.generate_secret()
    token = encryption.encrypt(secret)
    assert secret not in token
    assert encryption.decrypt(token) == secret


def test_round_trip_of_non_ascii(settings: SettingsWrapper, key_a: str) -> None:
    settings.WEBHOOKS_ENCRYPTION_KEY = key_a
    assert encryption.decrypt(encryption.encrypt("päss☕")) == "päss☕"


def test_encryption_is_randomised(settings: SettingsWrapper, key_a: str) -> None:
    settings.WEBHOOKS_ENCRYPTION_KEY = key_a
    assert encryption.encrypt("same") != encryption.encrypt("same")


def test_key_derived_from_secret_key_when_unset(settings: SettingsWrapper) -> None:
    settings.WEBHOOKS_ENCRYPTION_KEY = ""
    token = encryption.encrypt("whsec_x")
    assert encryption.decrypt(token) == "whsec_x"
    settings.SECRET_KEY = "another-secret-key-that-is-long-enough-for-the-checks"
    with pytest.raises(encryption.SecretDecryptionError):
        encryption.decrypt(token)


def test_key_rotation_with_comma_separated_keys(
    settings: SettingsWrapper, key_a: str, key_b: str
) -> None:
    settings.WEBHOOKS_ENCRYPTION_KEY = key_a
    old_token = encryption.encrypt("whsec_old")

    # The new key goes first: it encrypts, both decrypt.
    settings.WEBHOOKS_ENCRYPTION_KEY = f"{key_b}, {key_a}"
    assert encryption.decrypt(old_token) == "whsec_old"
    new_token = encryption.encrypt("whsec_new")
    assert Fernet(key_b.encode()).decrypt(new_token.encode()) == b"whsec_new"

    # Once the old key is dropped, only what the new key encrypted can be read.
    settings.WEBHOOKS_ENCRYPTION_KEY = key_b
    assert encryption.decrypt(new_token) == "whsec_new"
    with pytest.raises(encryption.SecretDecryptionError):
        encryption.decrypt(old_token)


def test_blank_entries_in_the_key_list_are_ignored(settings: SettingsWrapper, key_a: str) -> None:
    settings.WEBHOOKS_ENCRYPTION_KEY = f" ,{key_a},, "
    assert encryption.decrypt(encryption.encrypt("x")) == "x"
    assert Fernet(key_a.encode()).decrypt(encryption.encrypt("y").encode()) == b"y"


@pytest.mark.parametrize("token", ["", "garbage", "gAAAAA", "tökén", "\x00"])
def test_decryption_error_holds_no_secret(
    settings: SettingsWrapper, key_a: str, key_b: str, token: str
) -> None:
    settings.WEBHOOKS_ENCRYPTION_KEY = key_a
    with pytest.raises(encryption.SecretDecryptionError) as info:
        encryption.decrypt(token)
    message = str(info.value)
    assert key_a not in message
    if token:
        assert token not in message


def test_wrong_key_error_holds_neither_key_nor_plaintext_nor_token(
    settings: SettingsWrapper, key_a: str, key_b: str
) -> None:
    settings.WEBHOOKS_ENCRYPTION_KEY = key_a
    secret = signing.generate_secret()
    token = encryption.encrypt(secret)
    settings.WEBHOOKS_ENCRYPTION_KEY = key_b
    with pytest.raises(encryption.SecretDecryptionError) as info:
        encryption.decrypt(token)
    message = f"{info.value!s} {info.value!r}"
    for forbidden in (secret, token, key_a, key_b):
        assert forbidden not in message


def test_generate_key_is_a_fernet_key() -> None:
    key = encryption.generate_key()
    Fernet(key.encode())
