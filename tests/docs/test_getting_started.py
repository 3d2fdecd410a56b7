"""Getting started, walked: every command of "A first delivered webhook" and "A first
received webhook" runs as written, in order, against `manage.py serve` (what `make run`
starts, with its demo), from the checkout's directory, as a newcomer's second terminal;
then the commands of the endpoints page, with the token the walk made.

The blocks are read from the page (tests/docs/examples.py says how a block is marked); an
``sh`` block runs in bash, the variables it exports kept for the next ones, and ``sh until
"TEXT"`` runs again until its output holds TEXT (the page says "run it again if not"). The
one substitution: the server listens on a free port instead of 8000. A block followed by an
expected output (a fence without a language) must print the JSON keys that output shows.
"""

import re
import subprocess
import time
from pathlib import Path

from tests.conftest import wait_until
from tests.docs.examples import examples, unmarked_blocks
from tests.fixtures import free_port
from tests.helpers import embedded_env, serve, status_if_answering, stop_process

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "getting-started.md"
SECTIONS = {"A first delivered webhook", "A first received webhook"}
ENDPOINTS = ROOT / "docs" / "sending" / "endpoints.md"
FILES_THE_PAGE_WRITES = ("endpoint.json", "source.json")
EXPECTED = re.compile(r"```\n(?P<output>\{.*?)\n```", re.S)


def expected_keys(page: Path) -> dict[int, set[str]]:
    """offset of a marked block -> the JSON keys of the expected output that follows it."""
    text = page.read_text()
    keys = {}
    for example in examples(page):
        rest = text[example.offset :].split("```", 2)[2]
        following = EXPECTED.match(rest.lstrip("\n"))
        if following and rest.lstrip("\n").startswith("```\n{"):
            keys[example.offset] = set(re.findall(r'"(\w+)":', following["output"]))
    return keys


def test_every_command_of_the_walk_is_marked() -> None:
    # The only unmarked blocks are the expected outputs (no language).
    assert [b for b in unmarked_blocks(PAGE, SECTIONS) if not b.startswith("{")] == []


def test_the_walk_reaches_a_delivered_and_a_received_webhook(tmp_path: Path) -> None:
    env = embedded_env(tmp_path)
    port = free_port()
    log = tmp_path / "run.log"
    state = tmp_path / "state.sh"
    server = serve(env, port, log, demo=True)

    def run_block(code: str) -> str:
        script = f"set -e\n[ -f {state} ] && . {state}\n{code}\nexport -p > {state}\n"
        result = subprocess.run(
            ["bash", "-c", script.replace("127.0.0.1:8000", f"127.0.0.1:{port}")],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert result.returncode == 0, f"{code}\n{result.stdout}\n{result.stderr}"
        return result.stdout

    keys = {page: expected_keys(page) for page in (PAGE, ENDPOINTS)}
    try:
        wait_until(
            lambda: (
                status_if_answering(f"http://127.0.0.1:{port}/healthz") == 200
                or server.poll() is not None
            ),
            timeout=90,
            what="make run's server",
        )
        assert server.poll() is None, log.read_text()[-3000:]
        walked = [(PAGE, e) for e in examples(PAGE) if e.section in SECTIONS]
        walked += [(ENDPOINTS, e) for e in examples(ENDPOINTS)]
        assert {e.kind for _, e in walked} == {"sh"}
        for page, example in walked:
            until = re.fullmatch(r'until "(.+)"', example.argument)
            output = run_block(example.code)
            deadline = time.monotonic() + 60
            while until and until[1] not in output:
                assert time.monotonic() < deadline, f"{example.code}\nnever said {until[1]}"
                time.sleep(0.5)
                output = run_block(example.code)
            shown = output + "".join((ROOT / f).read_text() for f in FILES_THE_PAGE_WRITES if (ROOT / f).exists())  # fmt: skip # noqa: E501
            missing = {k for k in keys[page].get(example.offset, set()) if f'"{k}"' not in shown}
            assert not missing, f"{example.code}\nprinted {output!r}, without {missing}"
    finally:
        stop_process(server)
        for name in FILES_THE_PAGE_WRITES:
            (ROOT / name).unlink(missing_ok=True)
