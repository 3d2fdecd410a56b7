"""The verification code on the wire-format page, run against requests our sender signs.

Each snippet marked ``<!-- snippet: NAME -->`` in docs/wire-format.md is run as it is
printed there, through a small harness per language, on requests signed by
``webhooks_core.crypto.signing`` (the code that signs every delivery): a good signature, a rotation
(two signatures, the second secret), a tampered body, a wrong secret and a stale timestamp.
A language whose toolchain is not installed is skipped.
"""

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.docs.wire_format import BODY, MSG_ID, python_verifier, snippets
from webhooks_core.crypto import signing

OLD_SECRET = signing.generate_secret()
NEW_SECRET = signing.generate_secret()


def cases() -> list[tuple[str, str, dict[str, str], bytes, bool]]:
    """(name, secret, signed headers, body, expected) for every check."""
    now = int(time.time())

    def signed(secrets: list[str], timestamp: int = now) -> dict[str, str]:
        headers = signing.signature_headers(secrets, msg_id=MSG_ID, timestamp=timestamp, body=BODY)
        return {**headers, "webhook-id": MSG_ID, "webhook-timestamp": str(timestamp)}

    return [
        ("good", NEW_SECRET, signed([NEW_SECRET]), BODY, True),
        ("rotation", NEW_SECRET, signed([OLD_SECRET, NEW_SECRET]), BODY, True),
        ("tampered", NEW_SECRET, signed([NEW_SECRET]), BODY.replace(b"Zo", b"Jo"), False),
        ("wrong secret", OLD_SECRET, signed([NEW_SECRET]), BODY, False),
        ("stale", NEW_SECRET, signed([NEW_SECRET], timestamp=now - 3600), BODY, False),
    ]


LANGUAGES = ("python", "node", "go", "ruby", "php")


def test_every_language_has_a_snippet_for_every_signature() -> None:
    assert set(snippets()) >= {
        f"{kind}-{language}" for kind in ("v1", "standard", "v1a") for language in LANGUAGES
    } | {"standard-python-library"}


PRIVATE_KEYS = [signing.generate_key_pair()[0] for _ in range(2)]
PUBLIC_KEYS = [signing.public_key_of(key) for key in PRIVATE_KEYS]


def header_cases(kind: str) -> list[tuple[str, str, dict[str, str], bytes, bool]]:
    """(name, verifying key, headers, body, expected) for the webhook-signature header:
    `standard` (HMAC `v1,` entries, the secret verifies) or `v1a` (ed25519 entries, the
    public key verifies)."""
    if kind == "standard":
        return cases()
    now = int(time.time())

    def signed(keys: list[str], timestamp: int = now) -> dict[str, str]:
        headers = signing.signature_headers(
            [NEW_SECRET], msg_id=MSG_ID, timestamp=timestamp, body=BODY,
            scheme="v1a", private_keys=keys,
        )  # fmt: skip
        return {**headers, "webhook-id": MSG_ID, "webhook-timestamp": str(timestamp)}

    old, new = PRIVATE_KEYS
    return [
        ("good", PUBLIC_KEYS[1], signed([new]), BODY, True),
        ("rotation", PUBLIC_KEYS[1], signed([old, new]), BODY, True),
        ("tampered", PUBLIC_KEYS[1], signed([new]), BODY.replace(b"Zo", b"Jo"), False),
        ("wrong key", PUBLIC_KEYS[0], signed([new]), BODY, False),
        ("stale", PUBLIC_KEYS[1], signed([new], timestamp=now - 3600), BODY, False),
    ]


def test_python_v1() -> None:
    verify = python_verifier("v1-python")
    for case, secret, headers, body, expected in cases():
        assert verify(secret, headers["X-Webhook-Signature"], body) is expected, case


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("standard-python", "standard"),
        ("standard-python-library", "standard"),
        ("v1a-python", "v1a"),
    ],
)
def test_python_webhook_signature(name: str, kind: str) -> None:
    verify = python_verifier(name)
    for case, key, headers, body, expected in header_cases(kind):
        assert verify(key, headers, body) is expected, case


# Harnesses: read the secret, the header and the hex body from argv, print true/false.
HARNESS = {
    "v1-node": (
        "node",
        "verify.js",
        "{code}\n"
        "const [secret, header, body] = process.argv.slice(2);\n"
        "console.log(verify(secret, header, Buffer.from(body, 'hex')) ? 'true' : 'false');\n",
        ["node", "verify.js"],
    ),
    "v1-ruby": (
        "ruby",
        "verify.rb",
        "{code}\n"
        "secret, header, body = ARGV\n"
        "puts(verify(secret, header, [body].pack('H*')) ? 'true' : 'false')\n",
        ["ruby", "verify.rb"],
    ),
    "v1-php": (
        "php",
        "verify.php",
        "{code}\necho verify($argv[1], $argv[2], hex2bin($argv[3])) ? 'true' : 'false', \"\\n\";\n",
        ["php", "verify.php"],
    ),
}


# The same for webhook-signature: key, webhook-id, webhook-timestamp, the header, hex body.
HEADER_HARNESS = {
    "node": (
        "verify.js",
        "{code}\n"
        "const [key, id, ts, header, body] = process.argv.slice(2);\n"
        "console.log(verify(key, id, ts, header, Buffer.from(body, 'hex')) ? 'true' : 'false');\n",
        ["node", "verify.js"],
    ),
    "ruby": (
        "verify.rb",
        "{code}\n"
        "key, id, ts, header, body = ARGV\n"
        "puts(verify(key, id, ts, header, [body].pack('H*')) ? 'true' : 'false')\n",
        ["ruby", "verify.rb"],
    ),
    "php": (
        "verify.php",
        "{code}\necho verify($argv[1], $argv[2], $argv[3], $argv[4], hex2bin($argv[5]))"
        " ? 'true' : 'false', \"\\n\";\n",
        ["php", "verify.php"],
    ),
}


def run_header_cases(workdir: Path, command: list[str], kind: str) -> None:
    for case, key, headers, body, expected in header_cases(kind):
        result = subprocess.run(
            [*command, key, headers["webhook-id"], headers["webhook-timestamp"],
             headers["webhook-signature"], body.hex()],
            cwd=workdir, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == ("true" if expected else "false"), case


@pytest.mark.parametrize("kind", ["standard", "v1a"])
@pytest.mark.parametrize("language", sorted(HEADER_HARNESS))
def test_script_languages_webhook_signature(language: str, kind: str, tmp_path: Path) -> None:
    filename, template, command = HEADER_HARNESS[language]
    if shutil.which(command[0]) is None:
        pytest.skip(f"{command[0]} is not installed")
    (tmp_path / filename).write_text(template.format(code=snippets()[f"{kind}-{language}"]))
    run_header_cases(tmp_path, command, kind)


def run_cases(workdir: Path, command: list[str]) -> None:
    for case, secret, headers, body, expected in cases():
        result = subprocess.run(
            [*command, secret, headers["X-Webhook-Signature"], body.hex()],
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == ("true" if expected else "false"), case


@pytest.mark.parametrize("name", sorted(HARNESS))
def test_script_languages(name: str, tmp_path: Path) -> None:
    tool, filename, template, command = HARNESS[name]
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")
    (tmp_path / filename).write_text(template.format(code=snippets()[name]))
    run_cases(tmp_path, command)


def go_build(tmp_path: Path, snippet: str, main: str) -> None:
    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not installed")
    code = snippets()[snippet].replace("package webhooks", "package main", 1)
    (tmp_path / "verify.go").write_text(code)
    (tmp_path / "main.go").write_text(main)
    (tmp_path / "go.mod").write_text("module verify\n\ngo 1.19\n")
    env = {"HOME": str(tmp_path), "GOCACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    build = subprocess.run(
        [go, "build", "-o", "verify", "."],
        cwd=tmp_path,
        env={**env, "GOFLAGS": "-mod=mod", "GOPROXY": "off"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert build.returncode == 0, build.stderr


def test_go(tmp_path: Path) -> None:
    go_build(
        tmp_path,
        "v1-go",
        "package main\n\n"
        'import (\n\t"encoding/hex"\n\t"fmt"\n\t"os"\n\t"time"\n)\n\n'
        "func main() {\n"
        "\tbody, _ := hex.DecodeString(os.Args[3])\n"
        "\tfmt.Println(Verify(os.Args[1], os.Args[2], body, 5*time.Minute))\n"
        "}\n",
    )
    run_cases(tmp_path, ["./verify"])


@pytest.mark.parametrize(
    ("kind", "function"), [("standard", "VerifyStandard"), ("v1a", "VerifyV1a")]
)
def test_go_webhook_signature(tmp_path: Path, kind: str, function: str) -> None:
    go_build(
        tmp_path,
        f"{kind}-go",
        "package main\n\n"
        'import (\n\t"encoding/hex"\n\t"fmt"\n\t"os"\n\t"time"\n)\n\n'
        "func main() {\n"
        "\tbody, _ := hex.DecodeString(os.Args[5])\n"
        f"\tfmt.Println({function}(os.Args[1], os.Args[2], os.Args[3], os.Args[4], body,"
        " 5*time.Minute))\n"
        "}\n",
    )
    run_header_cases(tmp_path, ["./verify"], kind)
