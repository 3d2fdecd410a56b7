from typing import Any

from django.core.checks import Error
from pytest_django.fixtures import Settings

from webhooks_project.checks import check_debug_off_in_deployment, check_production_settings

GOOD_KEY = "a-k3y!" * 9  # 54 characters, 6 distinct: strong as Django W009 defines it


def ids(problems: list[Any]) -> set[str]:
    return {p.id for p in problems}


def test_default_secret_key_is_refused_outside_debug(settings: Settings) -> None:
    settings.DEBUG = False
    settings.SECRET_KEY = settings.INSECURE_DEFAULT_SECRET_KEY
    settings.WEBHOOKS_ENCRYPTION_KEY = "x"
    problems = check_production_settings(None)
    assert "webhooks.E001" in ids(problems)
    assert all(isinstance(p, Error) for p in problems if p.id == "webhooks.E001")


def test_safe_production_settings_pass(settings: Settings) -> None:
    settings.DEBUG = False
    settings.SECRET_KEY = GOOD_KEY
    settings.WEBHOOKS_ENCRYPTION_KEY = "x"
    settings.ALLOWED_HOSTS = ["hooks.example.com"]
    assert check_production_settings(None) == []
    assert check_debug_off_in_deployment(None) == []


def test_debug_is_refused_by_the_deploy_check(settings: Settings) -> None:
    settings.DEBUG = True
    assert ids(check_debug_off_in_deployment(None)) == {"webhooks.E003"}
    # In development (no --deploy) the default key is fine.
    settings.SECRET_KEY = settings.INSECURE_DEFAULT_SECRET_KEY
    assert check_production_settings(None) == []
