"""docker-compose.yml runs what the Procfile runs, with what the settings require, on
volumes the image's `app` user can write.

No Docker engine is needed: the files are read and compared. The settings and Flower are
asked which variables they refuse to start without, so a new required key that compose or
the README does not name fails here.
"""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from webhooks_project import keys

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
COMPOSE_TEXT = (REPO / "docker-compose.yml").read_text()
DOCKERFILE = (REPO / "Dockerfile").read_text()
README = (REPO / "README.md").read_text()
INFRASTRUCTURE = {"postgres", "redis"}
DEFAULT = re.compile(r"\$\{\w+:-([^}]*)\}")
ASSIGNMENT = re.compile(r"^(\w+)=(\S+)$")


def procfile() -> dict[str, str]:
    lines = (REPO / "Procfile").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if line.strip())


def app_services() -> dict[str, dict[str, Any]]:
    return {n: s for n, s in COMPOSE["services"].items() if n not in INFRASTRUCTURE}


def words(command: str) -> list[str]:
    words = shlex.split(command)
    if words[:2] == ["sh", "-c"]:
        return shlex.split(words[2])
    return words


def test_every_procfile_process_is_a_service_running_the_same_command() -> None:
    processes = procfile()
    assert set(app_services()) == set(processes)
    for name, line in processes.items():
        # The Procfile's ${VAR:-default} at its default; its leading VAR=value assignments
        # are the service's environment.
        expected = words(DEFAULT.sub(r"\1", line))
        assignments = {}
        while ASSIGNMENT.match(expected[0]):
            key, value = ASSIGNMENT.match(expected.pop(0)).groups()  # type: ignore[union-attr]
            assignments[key] = value
        service = app_services()[name]
        assert words(service["command"]) == expected, name
        for key, value in assignments.items():
            assert str(service["environment"][key]) == value, (name, key)


def refused_variables(environment: dict[str, str]) -> set[str]:
    """The variables the settings name when they refuse to load in this environment."""
    result = subprocess.run(
        [sys.executable, "-c", "import webhooks_project.settings"],
        env={"PATH": os.environ["PATH"], **environment},
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    return set(re.findall(r"\b([A-Z][A-Z_]+) is not set", result.stderr))


def test_every_variable_the_processes_require_comes_from_compose_env_and_the_readme() -> None:
    web = app_services()["web"]
    environment = {k: str(v) for k, v in web["environment"].items()}
    required = refused_variables(environment)
    assert required >= {"SECRET_KEY", "WEBHOOKS_ENCRYPTION_KEY"}
    flower = re.findall(r"\b([A-Z][A-Z_]+) is not set", " ".join(keys.flower_auth_problems("")))
    required |= set(flower)
    assert "FLOWER_BASIC_AUTH" in required
    for name, service in app_services().items():
        # None of them in the compose file itself: they come from compose.env, which
        # `make run` (reading .env) never sees.
        assert not required & set(service["environment"]), name
        assert [e["path"] for e in service["env_file"]] == ["compose.env"], name
    for variable in required:
        assert f"{variable}=" in COMPOSE_TEXT, f"the compose file's header shows {variable}"
        assert variable in README, f"the README names {variable}"


def owned_directories() -> set[str]:
    """Directories the Dockerfile makes (mkdir -p) and gives to `app` (chown app:app)."""
    made = {p for m in re.finditer(r"mkdir -p ([^\n&\\]+)", DOCKERFILE) for p in m[1].split()}
    owned = {p for m in re.finditer(r"chown app:app ([^\n&\\]+)", DOCKERFILE) for p in m[1].split()}
    return made & owned


def test_every_volume_an_app_service_mounts_exists_in_the_image_owned_by_app() -> None:
    mounted = set()
    for name, service in app_services().items():
        for volume in service.get("volumes", []):
            target = volume.split(":")[1]
            mounted.add(target)
            assert target in owned_directories(), (name, target)
    # The directories the settings write to are those volumes, the same for every process.
    for name, service in app_services().items():
        for key in ("PROMETHEUS_MULTIPROC_DIR", "MEDIA_ROOT"):
            assert service["environment"][key] in mounted, (name, key)
            assert f"{service['environment'][key]}" in {
                v.split(":")[1] for v in service["volumes"]
            }, (name, key)
