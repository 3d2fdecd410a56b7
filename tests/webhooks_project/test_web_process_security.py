"""Secrets and transport in the web process as the Procfile starts it (gunicorn, gevent,
its access log on stdout, Django's logs on stderr): a portal link's token reaches no log
line, a scanner's GET leaves the link usable, and with DEBUG off plain http is redirected
to https and HSTS is sent, unless the environment turns them off."""

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from deliveries import services
from deliveries.models import PortalLink
from tests.conftest import wait_until
from tests.faults.processes import procfile_web_command
from tests.fixtures import free_port
from tests.helpers import database_url, stop_process

pytestmark = pytest.mark.django_db(transaction=True)

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def web(tmp_path: Path, **env: str | None) -> Iterator[tuple[str, Path]]:
    """The Procfile's web line on a free port; yields its URL and its output file."""
    port = free_port()
    full_env = {**os.environ, "DATABASE_URL": database_url(), "PORT": str(port)}
    full_env["PATH"] = f"{Path(sys.executable).parent}:{full_env.get('PATH', '')}"
    full_env.pop("WEB_CONCURRENCY", None)
    full_env["WEB_CONCURRENCY"] = "1"
    for key, value in env.items():
        if value is None:
            full_env.pop(key, None)
        else:
            full_env[key] = value
    log = tmp_path / f"web-{port}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            ["sh", "-c", "exec " + procfile_web_command()],
            env=full_env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        assert process.poll() is None, log.read_text()
        with contextlib.suppress(requests.RequestException):
            return requests.get(f"{base}/healthz", timeout=1).status_code == 200
        return False

    try:
        wait_until(answers, timeout=60, what="the web process")
        yield base, log
    finally:
        stop_process(process)


def csrf_token_of(html: str) -> str:
    match = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html)
    assert match is not None
    return match.group(1)


def test_no_log_line_holds_a_portal_token_and_a_scanner_leaves_the_link_usable(
    tmp_path: Path,
) -> None:
    _, token = services.portal_link_create(tenant="acme")
    _, unused = services.portal_link_create(tenant="acme")
    # Plain http here, as on the compose stack: cookies without the Secure flag.
    with web(tmp_path, SECURE_SSL_REDIRECT="false", CSRF_COOKIE_SECURE="false") as (base, log):
        link = f"{base}/portal/open/{token}"
        # A scanner: GET, HEAD, and a GET with the token in the query too.
        assert requests.get(link, timeout=10).status_code == 200
        assert requests.head(link, timeout=10).status_code == 405
        assert requests.get(f"{link}?utm=1", timeout=10).status_code == 200
        assert not PortalLink.objects.filter(used_at__isnull=False).exists()
        # A refused link (a 4xx Django logs), and a POST without its CSRF token.
        assert requests.get(f"{base}/portal/open/{unused}x", timeout=10).status_code == 403
        assert requests.post(f"{base}/portal/open/{unused}", timeout=10).status_code == 403
        # The person: the page, then its button.
        person = requests.Session()
        page = person.get(link, timeout=10, headers={"Referer": link})
        opened = person.post(
            link,
            data={"csrfmiddlewaretoken": csrf_token_of(page.text)},
            headers={"Referer": link},
            allow_redirects=False,
            timeout=10,
        )
        assert opened.status_code == 302, opened.text
        assert opened.headers["Location"] == "/portal/"
        assert "acme" in person.get(f"{base}/portal/", timeout=10).text
        # A second use: refused.
        assert requests.post(link, timeout=10).status_code == 403
        wait_until(
            lambda: log.read_text().count("/portal/open/[redacted]") >= 6,
            timeout=20,
            what="the access log lines",
        )
        text = log.read_text()
    assert token not in text
    assert unused not in text
    assert token[:12] not in text
    assert '"POST /portal/open/[redacted] HTTP/1.1" 302' in text
    assert "Forbidden" in text  # Django's own 4xx lines were written, masked


def test_with_debug_off_http_is_redirected_and_hsts_sent_by_default(tmp_path: Path) -> None:
    with web(tmp_path, SECURE_SSL_REDIRECT=None, SECURE_HSTS_SECONDS=None) as (base, _):
        plain = requests.get(f"{base}/portal/", allow_redirects=False, timeout=10)
        assert plain.status_code == 301
        assert plain.headers["Location"].startswith("https://")
        # Behind the TLS proxy (X-Forwarded-Proto: https): served, with HSTS.
        secure = requests.get(f"{base}/portal/", headers={"X-Forwarded-Proto": "https"}, timeout=10)
        assert secure.status_code == 403  # no session, but served over "https"
        assert secure.headers["Strict-Transport-Security"].startswith("max-age=31536000")
        # Probes from inside the deployment speak plain http (the compose health check).
        assert requests.get(f"{base}/readyz", allow_redirects=False, timeout=10).status_code in (
            200,
            503,
        )


def test_the_environment_turns_the_redirect_and_hsts_off(tmp_path: Path) -> None:
    with web(tmp_path, SECURE_SSL_REDIRECT="false", SECURE_HSTS_SECONDS="0") as (base, _):
        plain = requests.get(f"{base}/portal/", allow_redirects=False, timeout=10)
        assert plain.status_code == 403
        secure = requests.get(f"{base}/portal/", headers={"X-Forwarded-Proto": "https"}, timeout=10)
        assert "Strict-Transport-Security" not in secure.headers
