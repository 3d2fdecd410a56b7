"""Mutual TLS for an endpoint: checking its client certificate and key, and the TLS
context its requests use. No Django here.

The checks run when the endpoint is saved (a clear 400, never a handshake failure found
at 3 a.m.): each PEM parses, the key is not encrypted (nobody would be there to type its
pass phrase), the key belongs to the certificate, the certificate is valid now.

A context is built once per credential fingerprint and kept per process: building one
parses the key and the CA bundle, which costs far more than a request, and a context is
safe to share between threads. The key reaches OpenSSL through an anonymous in-memory
file (`memfd`), never a file on disk, where the platform has one.

``ca_certificates``, when given, *replaces* the system CAs for that endpoint: an endpoint
on a private CA is then trusted for its own certificate only, and a public CA cannot
issue one that passes for it. To trust both, include the public roots in the bundle.
"""

import contextlib
import hashlib
import os
import ssl
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa

MAX_PEM_CHARS = 64 * 1024
MAX_CA_PEM_CHARS = 512 * 1024
CACHED_CONTEXTS = 512


@dataclass(frozen=True)
class ClientTLS:
    """What one endpoint's TLS connections need; ``fingerprint`` names it in caches."""

    certificate: str = ""
    key: str = ""
    ca_certificates: str = ""

    @property
    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for part in (self.certificate, self.key, self.ca_certificates):
            digest.update(part.encode())
            digest.update(b"\0")
        return digest.hexdigest()

    def __bool__(self) -> bool:
        return bool(self.certificate or self.ca_certificates)

    def __repr__(self) -> str:  # never the key, not even in a traceback's locals
        return f"ClientTLS(fingerprint={self.fingerprint[:12]}…)"


def _certificates(pem: str) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(pem.encode())


def certificate_problem(pem: str, *, now: datetime | None = None) -> str | None:
    """Why this client certificate (PEM, maybe followed by its chain) cannot be used."""
    if len(pem) > MAX_PEM_CHARS:
        return f"The certificate is longer than {MAX_PEM_CHARS} characters."
    try:
        leaf = _certificates(pem)[0]
    except ValueError:
        return "The certificate is not a PEM certificate (-----BEGIN CERTIFICATE-----)."
    now = now or datetime.now(UTC)
    if leaf.not_valid_after_utc <= now:
        return f"The certificate expired on {leaf.not_valid_after_utc:%Y-%m-%d %H:%M} UTC."
    if leaf.not_valid_before_utc > now:
        start = leaf.not_valid_before_utc
        return f"The certificate is not valid before {start:%Y-%m-%d %H:%M} UTC."
    return None


def key_problem(pem: str) -> str | None:
    """Why this private key (PEM) cannot be used, without saying anything of its value."""
    if len(pem) > MAX_PEM_CHARS:
        return f"The key is longer than {MAX_PEM_CHARS} characters."
    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except TypeError:
        return "The key is encrypted: give it without a pass phrase (it is stored encrypted)."
    except (ValueError, UnsupportedAlgorithm):
        return "The key is not a PEM private key (-----BEGIN PRIVATE KEY-----)."
    signing = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey
    if not isinstance(key, signing | ed448.Ed448PrivateKey):
        return "The key cannot sign (a key-agreement key): TLS needs RSA, EC or Ed25519."
    return None


def _public_bytes(public_key: object) -> bytes:
    return public_key.public_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def pair_problem(certificate_pem: str, key_pem: str) -> str | None:
    """Why the key does not go with the certificate (both already pass their own checks)."""
    key = serialization.load_pem_private_key(key_pem.encode(), password=None)
    leaf = _certificates(certificate_pem)[0]
    if _public_bytes(key.public_key()) != _public_bytes(leaf.public_key()):
        return "The key does not match the certificate (it is another key pair's)."
    return None


def ca_problem(pem: str) -> str | None:
    if len(pem) > MAX_CA_PEM_CHARS:
        return f"The CA bundle is longer than {MAX_CA_PEM_CHARS} characters."
    try:
        _certificates(pem)
    except ValueError:
        return "The CA bundle is not PEM certificates (-----BEGIN CERTIFICATE-----)."
    return None


def problems(
    certificate: str, key: str, ca_certificates: str, *, now: datetime | None = None
) -> dict[str, list[str]]:
    """{field: [reason]} for an endpoint's mutual-TLS fields as they will be stored."""
    errors: dict[str, list[str]] = {}
    if certificate and not key:
        errors["client_key"] = ["Give the certificate's private key (client_key)."]
    if key and not certificate:
        errors["client_certificate"] = ["Give the certificate of the key (client_certificate)."]
    if certificate:
        problem = certificate_problem(certificate, now=now)
        if problem:
            errors.setdefault("client_certificate", []).append(problem)
    if key:
        problem = key_problem(key)
        if problem:
            errors.setdefault("client_key", []).append(problem)
    if certificate and key and not errors:
        problem = pair_problem(certificate, key)
        if problem:
            errors["client_key"] = [problem]
    if ca_certificates:
        problem = ca_problem(ca_certificates)
        if problem:
            errors["ca_certificates"] = [problem]
    return errors


@contextlib.contextmanager
def _in_memory_file(text: str) -> Iterator[str]:
    """A path OpenSSL can read `text` from, gone once the block ends."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("webhooks-client-tls", getattr(os, "MFD_CLOEXEC", 0))
        try:
            os.write(fd, text.encode())
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    # No memfd (not Linux): a private temporary file, removed at once.
    handle, path = tempfile.mkstemp(prefix="webhooks-tls-")
    try:
        os.write(handle, text.encode())
        os.close(handle)
        yield path
    finally:
        os.unlink(path)


_contexts: "OrderedDict[str, ssl.SSLContext]" = OrderedDict()
_contexts_lock = threading.Lock()


def build_context(tls: ClientTLS) -> ssl.SSLContext:
    """A fresh client context: verifies the server (for the URL's host name, which
    urllib3 passes as SNI and checks, whatever address the SSRF guard pinned) and
    presents the client certificate."""
    if tls.ca_certificates:
        context = ssl.create_default_context(cadata=tls.ca_certificates)
    else:
        context = ssl.create_default_context()
    if tls.certificate:
        with _in_memory_file(f"{tls.certificate.strip()}\n{tls.key.strip()}\n") as path:
            context.load_cert_chain(path)
    return context


def context_for(tls: ClientTLS) -> ssl.SSLContext:
    """The process's context for these credentials (built once, then shared)."""
    key = tls.fingerprint
    with _contexts_lock:
        context = _contexts.get(key)
        if context is not None:
            _contexts.move_to_end(key)
            return context
    context = build_context(tls)
    with _contexts_lock:
        context = _contexts.setdefault(key, context)
        while len(_contexts) > CACHED_CONTEXTS:
            _contexts.popitem(last=False)
    return context
