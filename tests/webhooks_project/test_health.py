from typing import Any

import pytest
from django.test import Client

from webhooks_project.celery import app as celery_app


def test_healthz_answers_while_the_process_lives(client: Client) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_is_ok_when_database_and_broker_answer(client: Client) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"] == {"database": True, "broker": True}


@pytest.mark.django_db
def test_readyz_names_the_broker_when_redis_is_unreachable(
    client: Client, monkeypatch: Any
) -> None:
    # Nothing listens on port 1: the same refusal a stopped Redis gives.
    monkeypatch.setattr(celery_app.conf, "broker_write_url", "redis://127.0.0.1:1/0")

    response = client.get("/readyz")

    assert response.status_code == 503
    assert response.json()["failed"] == ["broker"]
    assert response.json()["checks"]["database"] is True
