"""With DEBUG off no process starts with a key an attacker can know.

Each start is the real one (the image's CMD, the Procfile's Celery and Flower lines,
`manage.py`), in a fresh process with the environment a deployment would give it; each
must exit within seconds with one message naming every problem. The embedded default
(DEBUG on, no environment at all) keeps working.
"""

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import yaml

from tests.conftest import wait_until
from tests.fixtures import free_port
from tests.helpers import stop_process
from webhooks_core.crypto.encryption import generate_key
from webhooks_project.keys import INSECURE_DEFAULT_SECRET_KEY

ROOT = Path(__file__).resolve().parents[2]
BIN = str(Path(sys.executable).parent)
COMPOSE_SECRET_KEY = "change-me-to-a-long-random-string-of-50-characters"
COMPOSE_ENCRYPTION_KEY = "Xj12CFzqtYLFParsutiJDIxnirNujtbEGL2ZbUylLmM="
STRONG_SECRET_KEY = "k9#Vd2!qLm" * 6
STARTS_WITHIN = 30.0


def deployment_env(**values: str | None) -> dict[str, str]:
    """What a deployment sets (DATABASE_URL, so DEBUG is off), with ``values`` on top; a
    value None leaves the variable out."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DEBUG", "SECRET_KEY", "SECRET_KEY_FALLBACKS", "WEBHOOKS_ENCRYPTION_KEY"}
    }
    env["PATH"] = f"{BIN}:{env.get('PATH', '')}"
    env.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/webhooks")
    for key, value in values.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run(command: list[str], env: dict[str, str]) -> tuple[int, str, float]:
    started = time.monotonic()
    done = subprocess.run(
        command,
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=STARTS_WITHIN * 2,
        stdin=subprocess.DEVNULL,
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


def image_cmd() -> list[str]:
    """The Dockerfile's CMD, on a free loopback port."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    match = re.search(r"^CMD (\[.*\])\s*$", text, re.MULTILINE)
    assert match is not None, "the Dockerfile has no CMD"
    command: list[str] = json.loads(match.group(1))
    return [part.replace("0.0.0.0:8000", f"127.0.0.1:{free_port()}") for part in command]


def procfile(name: str) -> str:
    for line in (ROOT / "Procfile").read_text().splitlines():
        process, _, command = line.partition(":")
        if process.strip() == name:
            return command.strip()
    raise AssertionError(f"the Procfile has no {name} process")


STARTS = {
    "image CMD (gunicorn)": image_cmd,
    "celery worker": lambda: [f"{BIN}/celery", "-A", "webhooks_project", "worker", "-l", "INFO"],
    "manage.py migrate": lambda: [sys.executable, "manage.py", "migrate", "--noinput"],
}


@pytest.mark.parametrize("start", sorted(STARTS))
def test_every_start_refuses_missing_keys_naming_them(start: str) -> None:
    code, output, took = run(STARTS[start](), deployment_env())
    assert code != 0, output
    assert took < STARTS_WITHIN
    assert "SECRET_KEY is not set" in output
    assert "WEBHOOKS_ENCRYPTION_KEY is not set" in output


@pytest.mark.parametrize(
    ("secret_key", "encryption_key", "expected"),
    [
        (
            COMPOSE_SECRET_KEY,
            COMPOSE_ENCRYPTION_KEY,
            ["SECRET_KEY is a placeholder", "WEBHOOKS_ENCRYPTION_KEY is a placeholder"],
        ),
        (
            INSECURE_DEFAULT_SECRET_KEY,
            "not-a-fernet-key",
            ["SECRET_KEY is a placeholder", "not a Fernet key"],
        ),
        ("short-but-varied-key", None, ["SECRET_KEY is weak", "WEBHOOKS_ENCRYPTION_KEY is not"]),
        (
            "ab" * 40,
            f"{generate_key()},{COMPOSE_ENCRYPTION_KEY}",
            ["SECRET_KEY is weak", "WEBHOOKS_ENCRYPTION_KEY #2 is a placeholder"],
        ),
        ("django-insecure-" + "q7Zx!" * 10, generate_key(), ["SECRET_KEY is weak"]),
    ],
)
def test_shipped_and_weak_keys_are_refused_listing_every_problem(
    secret_key: str, encryption_key: str | None, expected: list[str]
) -> None:
    env = deployment_env(SECRET_KEY=secret_key, WEBHOOKS_ENCRYPTION_KEY=encryption_key)
    code, output, took = run([sys.executable, "manage.py", "check"], env)
    assert code != 0
    assert took < STARTS_WITHIN
    for problem in expected:
        assert problem in output, output
    assert secret_key not in output  # the message names the setting, never its value


def test_a_weak_fallback_key_is_refused_too() -> None:
    env = deployment_env(
        SECRET_KEY=STRONG_SECRET_KEY,
        SECRET_KEY_FALLBACKS=COMPOSE_SECRET_KEY,
        WEBHOOKS_ENCRYPTION_KEY=generate_key(),
    )
    code, output, _ = run([sys.executable, "manage.py", "check"], env)
    assert code != 0
    assert "SECRET_KEY_FALLBACKS #1 is a placeholder" in output


def test_strong_keys_start_and_the_embedded_default_needs_none(tmp_path: Path) -> None:
    env = deployment_env(SECRET_KEY=STRONG_SECRET_KEY, WEBHOOKS_ENCRYPTION_KEY=generate_key())
    code, output, _ = run([sys.executable, "manage.py", "check"], env)
    assert code == 0, output
    # `make run`: no environment at all, DEBUG on by default, the development key.
    bare = {"PATH": env["PATH"], "HOME": str(tmp_path)}
    code, output, _ = run([sys.executable, "manage.py", "check"], bare)
    assert code == 0, output


# --- Flower ----------------------------------------------------------------------------


def flower_env(auth: str | None) -> dict[str, str]:
    return deployment_env(
        SECRET_KEY=STRONG_SECRET_KEY,
        WEBHOOKS_ENCRYPTION_KEY=generate_key(),
        FLOWER_BASIC_AUTH=auth,
        FLOWER_PORT=str(free_port()),
    )


@pytest.mark.parametrize(
    ("auth", "expected"),
    [
        (None, "FLOWER_BASIC_AUTH is not set"),
        ("admin:change-me", "a placeholder this repository ships"),
        ("admin:short-pw", "shorter than 12 characters"),
        ("ops:a-long-enough-one,admin:change-me", "password of user 'admin'"),
        ("no-colon-here", "not user:password"),
    ],
)
def test_flower_refuses_a_missing_shipped_or_short_password(
    auth: str | None, expected: str
) -> None:
    code, output, took = run(["sh", "-c", "exec " + procfile("flower")], flower_env(auth))
    assert code != 0
    assert took < STARTS_WITHIN
    assert expected in output, output
    if auth:
        assert auth.rsplit(":", 1)[-1] not in output


def test_flower_starts_behind_its_password() -> None:
    env = flower_env("ops:a-long-enough-password")
    base = f"http://127.0.0.1:{env['FLOWER_PORT']}"
    process = subprocess.Popen(
        ["sh", "-c", "exec " + procfile("flower")],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def answers() -> bool:
            assert process.poll() is None, "Flower exited"
            try:
                return requests.get(base, timeout=1).status_code == 401
            except requests.RequestException:
                return False

        wait_until(answers, timeout=60, what="Flower to ask for its password")
        assert requests.get(base, auth=("ops", "a-long-enough-password"), timeout=5).ok
    finally:
        stop_process(process)


def test_the_compose_file_ships_no_usable_key() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    # The keys come from compose.env, which compose requires (not .env, which `make run`
    # reads); each process refuses to start without its keys (the tests above), and
    # tests/packaging/test_deployment_files.py holds every variable to compose.env.
    services = yaml.safe_load(text)["services"]
    for name, service in services.items():
        if "build" in service or "image" not in service:
            assert service["env_file"] == [{"path": "compose.env", "required": True}], name
    for variable in ("SECRET_KEY", "WEBHOOKS_ENCRYPTION_KEY", "FLOWER_BASIC_AUTH"):
        assert not re.search(rf"^\s*{variable}\s*[:=]", text, re.MULTILINE), variable
    assert COMPOSE_SECRET_KEY not in text
    assert COMPOSE_ENCRYPTION_KEY not in text
    assert "change-me" not in text
    assert shlex.split(procfile("flower"))[:3] == ["python", "-m", "webhooks_project.flower"]
