"""Real peers for the delivery-auth tests, all on 127.0.0.1: an OAuth2 token server, a
private PKI (CA, server and client certificates made with `cryptography`), a TLS context
that demands a client certificate, and a small forward proxy (CONNECT and absolute form)."""

import base64
import contextlib
import json
import select
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_address
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.raw_peer import read_head
from tests.receiver import PeerServer, ReceivedRequest, Reply

# --- PKI ------------------------------------------------------------------------------


def _pem_key(key: ec.EllipticCurvePrivateKey, password: bytes | None = None) -> str:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password)
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    ).decode()


def _pem_cert(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


@dataclass
class Issued:
    certificate: str
    key: str
    key_object: ec.EllipticCurvePrivateKey

    def encrypted_key(self, password: bytes = b"pass phrase") -> str:
        return _pem_key(self.key_object, password)


@dataclass
class PKI:
    ca: Issued
    ca_cert: x509.Certificate

    @classmethod
    def create(cls, name: str = "Test CA") -> "PKI":
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.now(UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(days=1))
            .not_valid_after(now + timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
            .sign(key, hashes.SHA256())
        )
        return cls(Issued(_pem_cert(cert), _pem_key(key), key), cert)

    def issue(
        self,
        common_name: str,
        *,
        names: tuple[str, ...] = (),
        client: bool = False,
        not_before: datetime | None = None,
        not_after: datetime | None = None,
    ) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.now(UTC)
        sans: list[x509.GeneralName] = []
        for name in names:
            try:
                sans.append(x509.IPAddress(ip_address(name)))
            except ValueError:
                sans.append(x509.DNSName(name))
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before or now - timedelta(hours=1))
            .not_valid_after(not_after or now + timedelta(days=10))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [
                        x509.ExtendedKeyUsageOID.CLIENT_AUTH
                        if client
                        else x509.ExtendedKeyUsageOID.SERVER_AUTH
                    ]
                ),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.ca.key_object.public_key()),
                critical=False,
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.ca.key_object, hashes.SHA256())
        return Issued(_pem_cert(cert), _pem_key(key), key)


def _load_chain(context: ssl.SSLContext, issued: Issued) -> None:
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "server.pem")
        with open(path, "w") as handle:
            handle.write(issued.certificate + issued.key)
        context.load_cert_chain(path)


def server_context(pki: PKI, server: Issued, *, require_client_cert: bool) -> ssl.SSLContext:
    """A receiver's TLS context; with `require_client_cert`, only clients with a
    certificate of `pki`'s CA get through the handshake."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_chain(context, server)
    if require_client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cadata=pki.ca.certificate)
    return context


# --- OAuth2 token server ------------------------------------------------------------


@dataclass
class TokenServer:
    """Issues `tok-1`, `tok-2`, … for the right client; counts every request."""

    client_id: str = "client-1"
    client_secret: str = "s3cret-client-value"
    expires_in: int | None = 3600
    delay_seconds: float = 0.0
    # (status, body) to answer instead of a token, while set.
    failure: tuple[int, bytes] | None = None
    fetches: int = 0
    issued: list[str] = field(default_factory=list)
    forms: list[dict[str, list[str]]] = field(default_factory=list)
    port: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/oauth/token"

    @property
    def current(self) -> str | None:
        with self._lock:
            return self.issued[-1] if self.issued else None

    def revoke(self) -> None:
        """The current token is no longer valid for the endpoint (the next one will be)."""
        with self._lock:
            self.issued.append(f"tok-revoked-{len(self.issued)}")

    def _answer(self, authorization: str, body: bytes) -> tuple[int, bytes]:
        with self._lock:
            self.fetches += 1
            self.forms.append(parse_qs(body.decode()))
            if self.failure is not None:
                return self.failure
            expected = base64.b64encode(f"{self.client_id}:{self.client_secret}".encode())
            if authorization != f"Basic {expected.decode()}":
                return 401, b'{"error": "invalid_client"}'
            token = f"tok-{self.fetches}"
            self.issued.append(token)
            document: dict[str, object] = {"access_token": token, "token_type": "Bearer"}
            if self.expires_in is not None:
                document["expires_in"] = self.expires_in
            return 200, json.dumps(document).encode()

    @contextlib.contextmanager
    def running(self) -> Iterator["TokenServer"]:
        server_ref = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if server_ref.delay_seconds:
                    time.sleep(server_ref.delay_seconds)
                status, answer = server_ref._answer(self.headers.get("Authorization", ""), body)
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: object) -> None:
                pass

        server = PeerServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()

    def stop(self) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()


# --- forward proxy ------------------------------------------------------------------


@dataclass
class ForwardProxy:
    """CONNECT tunnels and absolute-form requests, recording each request line (and its
    Proxy-Authorization) before it goes on; `required_auth` refuses others with 407."""

    required_auth: str | None = None
    seen: list[str] = field(default_factory=list)
    auth_seen: list[str] = field(default_factory=list)
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @contextlib.contextmanager
    def running(self) -> Iterator["ForwardProxy"]:
        listener = socket.create_server(("127.0.0.1", 0))
        self.port = listener.getsockname()[1]
        listener.settimeout(0.2)
        stop = threading.Event()

        def serve() -> None:
            while not stop.is_set():
                try:
                    client, _ = listener.accept()
                except (TimeoutError, OSError):
                    continue
                threading.Thread(target=self._handle, args=(client,), daemon=True).start()

        serving = threading.Thread(target=serve, daemon=True)
        serving.start()
        try:
            yield self
        finally:
            stop.set()
            serving.join()
            listener.close()

    def _handle(self, client: socket.socket) -> None:
        with contextlib.closing(client):
            read = read_head(client)
            if read is None:
                return
            head, rest = read
            lines = head.decode("latin-1").split("\r\n")
            method, target, _version = lines[0].split(" ", 2)
            headers = {
                name.lower(): value
                for name, value in (line.split(": ", 1) for line in lines[1:] if ": " in line)
            }
            self.seen.append(f"{method} {target}")
            auth = headers.get("proxy-authorization", "")
            self.auth_seen.append(auth)
            if self.required_auth is not None and auth != self.required_auth:
                client.sendall(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n"
                )
                return
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                upstream = socket.create_connection((host, int(port)), timeout=5)
                client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                parts = urlsplit(target)
                upstream = socket.create_connection((parts.hostname, parts.port or 80), timeout=5)
                path = parts.path + (f"?{parts.query}" if parts.query else "")
                kept = [
                    line
                    for line in lines[1:]
                    if not line.lower().startswith(("proxy-", "connection:"))
                ]
                upstream.sendall(
                    "\r\n".join(
                        [f"{method} {path} HTTP/1.1", *kept, "Connection: close", "", ""]
                    ).encode("latin-1")
                    + rest
                )
            with contextlib.closing(upstream):
                self._pipe(client, upstream)

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        sockets = [a, b]
        while True:
            readable, _, _ = select.select(sockets, [], [], 10)
            if not readable:
                return
            for sock in readable:
                data = sock.recv(65536)
                if not data:
                    return
                (b if sock is a else a).sendall(data)


def checking_bearer(token_server: TokenServer) -> "Any":
    """The endpoint: 200 for the token server's current token, 401 for any other."""

    def handler(request: ReceivedRequest) -> Reply:
        if request.headers.get("Authorization") == f"Bearer {token_server.current}":
            return Reply(200)
        return Reply(401, b"stale token")

    return handler
