"""Encryption at rest and signing: Fernet keys, secret rotation, request signatures."""
