"""The fault tests' view of tests/faults/driver.py: run a command, or keep one running."""

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

DRIVER = [sys.executable, "-m", "tests.faults.driver"]


def _env(extra_env: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **extra_env}


def run_driver(args: list[str], extra_env: dict[str, str], timeout: float = 120) -> Any:
    """Runs one driver command to its end and returns what it printed (JSON)."""
    done = subprocess.run(
        DRIVER + args, env=_env(extra_env), capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise DriverFailed(done.returncode, done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


class DriverFailed(Exception):
    def __init__(self, returncode: int, stderr: str) -> None:
        super().__init__(f"driver exited {returncode}: {stderr[-2000:]}")
        self.returncode = returncode
        self.stderr = stderr


@contextlib.contextmanager
def driver_running(args: list[str], extra_env: dict[str, str]) -> Iterator[None]:
    process = subprocess.Popen(DRIVER + args, env=_env(extra_env))
    try:
        yield
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
